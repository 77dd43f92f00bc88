// End-to-end harness: builds the web client and the parley binary once,
// runs `parley serve` on a free loopback port with a temporary data
// directory (SQLite, embedded NATS), and restarts it on the same port and
// data on demand. Playwright fixtures (fixtures.ts) and the library's
// integration tests use it.

import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync, mkdirSync, createWriteStream, type WriteStream } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const webDir = resolve(fileURLToPath(new URL('.', import.meta.url)), '..');
export const repoDir = resolve(webDir, '..');
export const resultsDir = join(webDir, 'test-results');
export const binPath = process.env.PARLEY_E2E_BIN ?? join(resultsDir, '.bin', 'parley');

/**
 * Build what the e2e tests run: the web client (unless PARLEY_E2E_SKIP_WEB_BUILD=1,
 * e.g. when `make web` just ran) and then the parley binary that embeds it
 * (unless PARLEY_E2E_BIN names a ready one).
 */
export function buildAll(opts: { web?: boolean } = {}): void {
	const web = opts.web ?? process.env.PARLEY_E2E_SKIP_WEB_BUILD !== '1';
	if (web) {
		execFileSync('npx', ['vite', 'build', '--logLevel', 'warn'], { cwd: webDir, stdio: 'inherit' });
	}
	if (process.env.PARLEY_E2E_BIN) return;
	mkdirSync(join(resultsDir, '.bin'), { recursive: true });
	execFileSync('go', ['build', '-o', binPath, './cmd/parley'], { cwd: repoDir, stdio: 'inherit' });
}

/** A free TCP port on 127.0.0.1 (the kernel's pick, released for parley to bind). */
export function freePort(): Promise<number> {
	return new Promise((res, rej) => {
		const s = createServer();
		s.unref();
		s.on('error', rej);
		s.listen(0, '127.0.0.1', () => {
			const port = (s.address() as { port: number }).port;
			s.close(() => res(port));
		});
	});
}

export interface ServerOptions {
	/** Seed the demo workspace (serve --demo). */
	demo?: boolean;
	/** Extra flags for `parley serve`. */
	args?: string[];
	/** Serve the admin listener (metrics) on a free loopback port: `adminUrl`. */
	admin?: boolean;
}

/** One parley server: a process, a port and a data directory that outlive restarts. */
export class ParleyServer {
	readonly dataDir: string;
	port = 0;
	adminPort = 0;
	private proc: ChildProcess | undefined;
	private stderrTail: string[] = [];
	private exited: Promise<void> | undefined;
	private logFile: WriteStream | undefined;

	constructor(private readonly opts: ServerOptions = {}) {
		this.dataDir = mkdtempSync(join(tmpdir(), 'parley-e2e-'));
	}

	get url(): string {
		return `http://127.0.0.1:${this.port}`;
	}

	/** The admin listener (`/metrics`), with `admin: true`. */
	get adminUrl(): string {
		return `http://127.0.0.1:${this.adminPort}`;
	}

	/** Start the server (a fresh port the first time, the same port after). */
	async start(): Promise<void> {
		if (this.proc) throw new Error('parley already running');
		if (!this.port) this.port = await freePort();
		if (this.opts.admin && !this.adminPort) this.adminPort = await freePort();
		if (!existsSync(binPath)) throw new Error(`no parley binary at ${binPath}: run buildAll() first`);
		const args = [
			'serve',
			'--listen',
			`127.0.0.1:${this.port}`,
			'--admin',
			this.opts.admin ? `127.0.0.1:${this.adminPort}` : 'off',
			'--data',
			this.dataDir,
			'--log-format',
			'json',
			'--log-level',
			'info',
			'--identify-rate',
			'100000',
			// Every browser and every seeding script of the suite comes from
			// 127.0.0.1, and some specs seed hundreds of messages through the
			// API: the per-address and message limits are for people.
			'--rate-message-user',
			'off',
			'--rate-message-ip',
			'off',
			'--rate-signup-ip',
			'off',
			'--rate-login-ip',
			'off',
			...(this.opts.demo ? ['--demo'] : []),
			...(this.opts.args ?? []),
		];
		const proc = spawn(binPath, args, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env } });
		this.proc = proc;
		// The whole log, for post-mortems: web/test-results/parley-<port>.log (appended across restarts).
		if (!this.logFile) {
			mkdirSync(resultsDir, { recursive: true });
			this.logFile = createWriteStream(join(resultsDir, `parley-${this.port}.log`), { flags: 'a' });
		}
		const logFile = this.logFile;
		this.stderrTail = [];
		this.exited = new Promise((res) => proc.once('exit', () => res()));
		let buf = '';
		await new Promise<void>((resolveStart, rejectStart) => {
			const timer = setTimeout(() => rejectStart(new Error(`parley did not start within 30 s:\n${this.stderrTail.join('\n')}`)), 30000);
			proc.stderr!.setEncoding('utf8');
			proc.stderr!.on('data', (chunk: string) => {
				buf += chunk;
				let i: number;
				while ((i = buf.indexOf('\n')) >= 0) {
					const line = buf.slice(0, i);
					buf = buf.slice(i + 1);
					logFile.write(line + '\n');
					this.stderrTail.push(line);
					if (this.stderrTail.length > 200) this.stderrTail.shift();
					if (line.includes('"msg":"parley started"')) {
						clearTimeout(timer);
						resolveStart();
					}
				}
			});
			proc.once('exit', (code) => {
				clearTimeout(timer);
				rejectStart(new Error(`parley exited (${code}) while starting:\n${this.stderrTail.join('\n')}`));
			});
		});
	}

	/** Stop the server: SIGTERM (graceful: the gateway sends reconnect), SIGKILL after 10 s. */
	async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
		const proc = this.proc;
		if (!proc) return;
		this.proc = undefined;
		if (proc.exitCode === null && proc.signalCode === null) {
			proc.kill(signal);
			const t = setTimeout(() => proc.kill('SIGKILL'), 10000);
			await this.exited;
			clearTimeout(t);
		}
	}

	/** Restart on the same port and data; `kill` simulates a crash instead of a drain. */
	async restart(opts: { kill?: boolean } = {}): Promise<void> {
		await this.stop(opts.kill ? 'SIGKILL' : 'SIGTERM');
		await this.start();
	}

	/** The last lines the server logged (for failure messages). */
	logTail(): string {
		return this.stderrTail.join('\n');
	}

	/** Stop and delete the data directory. */
	async dispose(): Promise<void> {
		await this.stop();
		this.logFile?.end();
		rmSync(this.dataDir, { recursive: true, force: true });
	}
}

/** Chromium as the issue asks: Debian's, with these flags. */
export const chromiumPath = process.env.PARLEY_CHROMIUM ?? '/usr/bin/chromium';
export const chromiumArgs = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

let seq = 0;
/** A unique user for a test: handle, email, name, password. */
export function newUser(prefix: string): { name: string; handle: string; email: string; password: string } {
	const id = `${Date.now().toString(36)}${(seq++).toString(36)}${Math.floor(Math.random() * 1296).toString(36)}`;
	const handle = `${prefix}${id}`.toLowerCase().slice(0, 32);
	return { name: prefix[0].toUpperCase() + prefix.slice(1), handle, email: `${handle}@example.test`, password: 'correct horse battery' };
}
