/// <reference types="vitest/config" />
// Vite builds the web client (web/app) into webui/dist, which the Go package
// webui embeds into the parley binary. `npm run dev` serves the app with hot
// reload and proxies the API (HTTP and the gateway's WebSocket) to a running
// parley, by default http://127.0.0.1:8080 (PARLEY_URL overrides it).
import { defineConfig, type Plugin } from 'vite';
import { svelte } from '@sveltejs/vite-plugin-svelte';
import { fileURLToPath } from 'node:url';
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const here = fileURLToPath(new URL('.', import.meta.url));
const outDir = join(here, '../webui/dist');
const parley = process.env.PARLEY_URL ?? 'http://127.0.0.1:8080';

// The build output directory holds one tracked file (README) so that
// go:embed always matches something and `go build` works without a web build.
// Vite's emptyOutDir would delete it, so clean everything else ourselves.
function cleanOutDir(): Plugin {
	return {
		name: 'parley-clean-outdir',
		apply: 'build',
		buildStart() {
			let entries: string[] = [];
			try {
				entries = readdirSync(outDir);
			} catch {
				return;
			}
			for (const e of entries) {
				if (e !== 'README') rmSync(join(outDir, e), { recursive: true, force: true });
			}
		},
	};
}

export default defineConfig({
	root: join(here, 'app'),
	plugins: [svelte(), cleanOutDir()],
	resolve: {
		alias: {
			'@parley/client': join(here, 'client/src/index.ts'),
		},
	},
	build: {
		outDir,
		emptyOutDir: false,
		assetsDir: 'assets',
		sourcemap: false,
		// The CSP forbids inline scripts and styles: never inline assets.
		assetsInlineLimit: 0,
	},
	server: {
		proxy: {
			'/api': { target: parley, changeOrigin: false, ws: true },
		},
	},
	test: {
		root: here,
		include: ['client/test/**/*.test.ts', 'app/src/**/*.test.ts', 'app/*.test.ts'],
		environment: 'node',
		globalSetup: ['client/test/global-setup.ts'],
		testTimeout: 15000,
	},
});
