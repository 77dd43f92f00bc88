// Vitest global setup: the integration tests run a real parley binary.
import { buildAll } from '../../e2e/harness';

export default function setup(): void {
	buildAll({ web: false });
}
