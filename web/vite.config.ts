/// <reference types="vitest/config" />
// Vite builds the web client (web/app) into webui/dist, which the Go package
// webui embeds into the parley binary. `npm run dev` serves the app with hot
// reload and proxies the API (HTTP and the gateway's WebSocket) to a running
// parley, by default http://127.0.0.1:8080 (PARLEY_URL overrides it).
import { defineConfig, type Plugin } from 'vite';
import { svelte } from '@sveltejs/vite-plugin-svelte';
import { fileURLToPath } from 'node:url';
import { readFileSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
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

// The emoji picker's data, built from emojibase-data (English names and
// keywords, Slack's shortcodes) keeping only the fields the client uses, as
// the module 'virtual:parley-emoji' (types in app/src/virtual-emoji.d.ts). The
// app imports it lazily, so it is a chunk of its own.
function emojiData(): Plugin {
	const id = 'virtual:parley-emoji';
	const resolved = '\0' + id;
	const require = createRequire(import.meta.url);
	const json = (p: string): unknown => JSON.parse(readFileSync(require.resolve(p), 'utf8'));
	type Compact = { unicode: string; label: string; group?: number; order?: number; tags?: string[] };
	return {
		name: 'parley-emoji',
		resolveId: (source) => (source === id ? resolved : undefined),
		load(source) {
			if (source !== resolved) return;
			const compact = json('emojibase-data/en/compact.json') as (Compact & { hexcode: string })[];
			const codes = json('emojibase-data/en/shortcodes/iamcal.json') as Record<string, string | string[]>;
			const messages = json('emojibase-data/en/messages.json') as { groups: { order: number; message: string }[] };
			const rows: [string, string, number, string, string][] = [];
			const sorted = compact.filter((e) => e.group !== undefined && e.group !== 2).sort((a, b) => (a.order ?? 0) - (b.order ?? 0));
			for (const e of sorted) {
				const sc = ([] as string[]).concat(codes[e.hexcode] ?? []).filter((c) => /^[a-z0-9_+-]{1,64}$/.test(c));
				if (sc.length === 0) continue;
				const words = (e.tags ?? []).filter((t) => !e.label.toLowerCase().includes(t));
				rows.push([e.unicode, e.label, e.group ?? 0, sc.join(' '), words.join(' ').toLowerCase()]);
			}
			const groups: string[] = [];
			for (const g of messages.groups) groups[g.order] = g.message;
			return `export const groups = ${JSON.stringify(groups)};\nexport default ${JSON.stringify(rows)};\n`;
		},
	};
}

export default defineConfig({
	root: join(here, 'app'),
	plugins: [svelte(), cleanOutDir(), emojiData()],
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
