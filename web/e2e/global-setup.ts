// Build the web client and the parley binary once for the whole suite.
import { existsSync } from 'node:fs';
import { buildAll, chromiumPath } from './harness';

export default function globalSetup(): void {
	if (!existsSync(chromiumPath)) {
		if (process.env.CI === 'true') throw new Error(`${chromiumPath} is missing and CI=true: the e2e suite must run (.ci/run installs chromium)`);
		return; // fixtures.ts skips every test with a clear message
	}
	buildAll();
}
