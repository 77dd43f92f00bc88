// Compression: the browser negotiates permessage-deflate with the gateway,
// which is on by default (gateway_compression), and the event frames it
// gets are compressed once per event and inflated by Chromium: the message
// shows as sent, and the node's metrics count compressed frames.
import { test, expect, watchPage } from './fixtures';
import { ParleyServer } from './harness';

/** The sum of a counter's samples whose labels include `labels`. */
function counter(metrics: string, name: string, labels: string): number {
	let sum = 0;
	for (const line of metrics.split('\n')) {
		if (line.startsWith(`${name}{`) && line.includes(labels)) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
	}
	return sum;
}

test('the browser gets compressed event frames and shows them', async ({ browser, shot, newUser }) => {
	const server = new ParleyServer({ admin: true });
	await server.start();
	try {
		const ctx = await browser.newContext({ baseURL: server.url });
		const page = await ctx.newPage();
		const problems = watchPage(page);
		// What Chromium hands the page is the inflated frame.
		const frames: string[] = [];
		let closes = 0;
		page.on('websocket', (ws) => {
			ws.on('framereceived', (f) => frames.push(String(f.payload)));
			ws.on('close', () => closes++);
		});
		const u = newUser('zip');
		await page.goto('/');
		await page.getByTestId('tab-signup').click();
		await page.getByLabel('Full name').fill(u.name);
		await page.getByLabel('Handle').fill(u.handle);
		await page.getByLabel('Email').fill(u.email);
		await page.getByLabel('Password').fill(u.password);
		await page.getByTestId('auth-submit').click();
		await page.getByTestId('ws-name').fill('Compression Co');
		await page.getByTestId('ws-create').click();
		await expect(page.getByTestId('channel-general')).toBeVisible();

		const text = 'A message long enough for its event frame to be compressed: ' + 'the staging deploy finished and the smoke checks are green. '.repeat(3);
		await page.getByTestId('composer').fill(text);
		await page.getByTestId('composer').press('Enter');
		const shown = page.getByTestId('message-list').getByTestId('message').filter({ hasText: 'smoke checks are green' });
		await expect(shown).toHaveCount(1);

		// Chromium inflated the message.created (the author's own session:
		// its frame carries client_msg_id) into the JSON the gateway built,
		// without closing the socket…
		await expect
			.poll(() => frames.some((f) => f.includes('"t":"message.created"') && f.includes('smoke checks are green') && f.includes('"client_msg_id"')))
			.toBe(true);
		expect(closes).toBe(0);
		// …and it went out compressed: this browser is the node's only session.
		await expect
			.poll(async () => {
				const res = await fetch(`${server.adminUrl}/metrics`);
				return counter(await res.text(), 'parley_gateway_event_frames_total', 'compressed="true"');
			})
			.toBeGreaterThan(0);
		await shot(page, 'compression-general');
		expect(problems, server.logTail()).toEqual([]);
		await ctx.close();
	} finally {
		await server.dispose();
	}
});
