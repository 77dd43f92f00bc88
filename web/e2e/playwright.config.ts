// Playwright runs the e2e suite (web/e2e/*.spec.ts) against a real parley
// binary (harness.ts) in Debian's Chromium. One worker: the machine is shared
// and the scenarios restart the server.
import { defineConfig } from '@playwright/test';
import { join } from 'node:path';
import { chromiumArgs, chromiumPath, resultsDir } from './harness';

export default defineConfig({
	testDir: '.',
	testMatch: '*.spec.ts',
	globalSetup: './global-setup.ts',
	outputDir: join(resultsDir, 'playwright'),
	workers: 1,
	fullyParallel: false,
	retries: 0,
	timeout: 180_000,
	expect: { timeout: 20_000 },
	reporter: process.env.CI === 'true' ? [['list']] : [['line']],
	use: {
		browserName: 'chromium',
		headless: true,
		launchOptions: { executablePath: chromiumPath, args: chromiumArgs },
		screenshot: 'only-on-failure',
		trace: 'off',
		video: 'off',
		actionTimeout: 20_000,
		navigationTimeout: 30_000,
		viewport: { width: 1280, height: 800 },
	},
});
