// Slash commands in a thread and the names and icons of bot messages, end to
// end against the real binary: a command typed in the thread's reply box is
// signed with thread_ts, its in-channel answer is a reply in the thread
// (with the answer's own name), its private answer shows in the thread
// panel, not the channel; a webhook's username shows beside the BOT badge
// (so it cannot pass for a person), its icon_url as an image that sends no
// referrer, its icon_emoji as the emoji.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test, expect, watchPage } from './fixtures';
import { api, post, signIn, workspace } from './seed';

/** A command endpoint: verifies the signature; "public …" answers in channel as "Release bot", anything else privately. */
function endpoint(secret: () => string): Promise<{ url: string; server: Server; forms: URLSearchParams[] }> {
	const forms: URLSearchParams[] = [];
	const server = createServer((req, res) => {
		let body = '';
		req.on('data', (c) => (body += c));
		req.on('end', () => {
			const ts = String(req.headers['x-parley-request-timestamp'] ?? '');
			const sig = String(req.headers['x-parley-signature'] ?? '');
			const want = 'v0=' + createHmac('sha256', secret()).update(`v0:${ts}:${body}`).digest('hex');
			if (sig.length !== want.length || !timingSafeEqual(Buffer.from(sig), Buffer.from(want))) {
				res.writeHead(401).end('bad signature');
				return;
			}
			const form = new URLSearchParams(body);
			forms.push(form);
			const text = form.get('text') ?? '';
			res.writeHead(200, { 'Content-Type': 'application/json' });
			res.end(
				JSON.stringify(
					text.startsWith('public')
						? { response_type: 'in_channel', text: `Shipping *${text.slice(7)}*`, username: 'Release bot', icon_emoji: ':rocket:' }
						: { response_type: 'ephemeral', text: `Only you: *${text}*` },
				),
			);
		});
	});
	return new Promise((resolve) =>
		server.listen(0, '127.0.0.1', () => resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/cmd`, server, forms })),
	);
}

// A 1×1 PNG.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64');

test('a slash command typed in a thread answers in the thread', async ({ page, server }) => {
	const s = await workspace(server.url, 'thcmd');
	let secret = '';
	const ep = await endpoint(() => secret);
	try {
		const cmd = await api<{ signing_secret: string }>(server.url, s.owner.token, 'POST', `/workspaces/${s.ws.id}/integrations`, {
			kind: 'command',
			name: 'ship',
			url: ep.url,
		});
		secret = cmd.signing_secret;
		const root = await post(server.url, s.owner.token, s.general.id, 'Release 1.4 thread');
		const problems = watchPage(page);
		await signIn(page, s.owner.token, `/w/${s.ws.slug}/c/general`);
		const rootRow = page.getByTestId('message').filter({ hasText: 'Release 1.4 thread' });
		await expect(rootRow).toBeVisible();
		await rootRow.hover();
		await rootRow.getByTestId('action-reply').click();
		const panel = page.getByTestId('thread-panel');
		await expect(panel).toBeVisible();
		const box = panel.getByTestId('thread-composer');

		// The thread's reply box completes commands too.
		await box.pressSequentially('/shi');
		await expect(panel.getByTestId('command-option').filter({ hasText: '/ship' })).toBeVisible();
		await box.press('Tab');
		await box.pressSequentially('public api');
		await box.press('Enter');
		const reply = panel.getByTestId('thread-replies').getByTestId('message').filter({ hasText: 'Shipping api' });
		await expect(reply).toBeVisible();
		await expect(reply.getByTestId('message-author')).toHaveText('Release bot');
		await expect(reply.getByTestId('bot-badge')).toHaveText('BOT');
		await expect(reply.getByTestId('bot-emoji')).toHaveText('🚀');
		expect(ep.forms.at(-1)?.get('thread_ts')).toBe(root.id);
		expect(ep.forms.at(-1)?.get('channel_id')).toBe(s.general.id);
		// The reply is counted on the root in the channel, not posted in it.
		await expect(rootRow.getByTestId('reply-count')).toContainText('1 reply');
		await expect(page.getByTestId('channel-view').getByTestId('message').filter({ hasText: 'Shipping api' })).toHaveCount(0);

		// A private answer shows in the thread panel, not above the channel's composer.
		await box.fill('/ship status');
		await box.press('Enter');
		await expect(panel.getByTestId('ephemeral-message').filter({ hasText: 'Only you: status' })).toBeVisible();
		await expect(page.getByTestId('channel-view').getByTestId('ephemeral-message')).toHaveCount(0);

		// /me replies in the thread.
		await box.fill('/me waves');
		await box.press('Enter');
		await expect(panel.getByTestId('thread-replies').getByTestId('message').filter({ hasText: 'waves' }).locator('em')).toHaveText('waves');
		await expect(rootRow.getByTestId('reply-count')).toContainText('2 replies');
		expect(problems).toEqual([]);
	} finally {
		ep.server.close();
	}
});

test('a webhook names itself and picks an icon, beside the BOT badge', async ({ page, server }) => {
	const s = await workspace(server.url, 'botprof');
	const hook = await api<{ url: string }>(server.url, s.owner.token, 'POST', `/channels/${s.general.id}/webhooks`, { name: 'CI' });
	// The icon host: served here, and what it was sent is kept.
	const referers: (string | undefined)[] = [];
	await page.route('https://icons.example/**', (route) => {
		referers.push(route.request().headers()['referer']);
		return route.fulfill({ status: 200, contentType: 'image/png', body: PNG });
	});
	const problems = watchPage(page);
	await signIn(page, s.owner.token, `/w/${s.ws.slug}/c/general`);
	await expect(page.getByTestId('channel-title')).toContainText('general');

	const send = async (payload: object) => {
		const res = await fetch(hook.url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(payload) });
		return { status: res.status, body: await res.text() };
	};
	// Calling itself after the workspace's owner: the badge still says BOT.
	expect(await send({ text: 'Deploy approved', username: s.owner.name, icon_url: 'https://icons.example/owner.png' })).toEqual({ status: 200, body: 'ok' });
	const msg = page.getByTestId('message').filter({ hasText: 'Deploy approved' });
	await expect(msg.getByTestId('message-author')).toHaveText(s.owner.name);
	await expect(msg.getByTestId('bot-badge')).toHaveText('BOT');
	const icon = msg.getByTestId('bot-icon');
	await expect(icon).toHaveAttribute('src', 'https://icons.example/owner.png');
	await expect(icon).toHaveAttribute('referrerpolicy', 'no-referrer');
	await expect.poll(() => icon.evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth)).toBe(1);
	expect(referers.length).toBeGreaterThan(0);
	expect(referers.every((r) => r === undefined)).toBe(true);

	// An emoji icon; the next message with another name gets its own header.
	expect(await send({ text: 'Disk at 91%', username: 'Grafana', icon_emoji: ':fire:' })).toEqual({ status: 200, body: 'ok' });
	const graf = page.getByTestId('message').filter({ hasText: 'Disk at 91%' });
	await expect(graf.getByTestId('message-author')).toHaveText('Grafana');
	await expect(graf.getByTestId('bot-emoji')).toHaveText('🔥');
	await expect(graf.getByTestId('bot-badge')).toHaveText('BOT');

	// Hostile overrides are refused and nothing shows.
	for (const bad of [
		{ text: 'xss 1', icon_url: 'javascript:alert(1)' },
		{ text: 'xss 2', icon_url: 'https://icons.example/"><script>alert(1)</script>' },
		{ text: 'xss 3', username: 'two\nlines' },
		{ text: 'xss 4', icon_emoji: '<img src=x onerror=alert(1)>' },
	]) {
		expect(await send(bad)).toEqual({ status: 400, body: 'invalid_payload' });
	}
	// A plain post after them shows as the webhook itself.
	expect(await send({ text: 'plain again' })).toEqual({ status: 200, body: 'ok' });
	const plain = page.getByTestId('message').filter({ hasText: 'plain again' });
	await expect(plain.getByTestId('message-author')).toHaveText('CI');
	await expect(page.getByTestId('message').filter({ hasText: /xss/ })).toHaveCount(0);
	await expect(page.locator('img[src^="javascript:"]')).toHaveCount(0);
	expect(problems).toEqual([]);
});
