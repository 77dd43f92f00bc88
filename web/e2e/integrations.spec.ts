// Integrations end to end against the real binary: an admin adds a bot and a
// token, an incoming webhook (a Slack payload posted to its URL shows as the
// bot's message with a BOT badge) and a slash command whose endpoint is a
// real HTTP server here that verifies the signature; the composer completes
// the command and shows its private answer; /me posts.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test, expect, watchPage } from './fixtures';
import { signIn, workspace } from './seed';

/** A slash command endpoint: checks the signature, answers "You said …" to the caller only. */
function commandEndpoint(secret: () => string): Promise<{ url: string; server: Server; calls: string[] }> {
	const calls: string[] = [];
	const server = createServer((req, res) => {
		let body = '';
		req.on('data', (c) => (body += c));
		req.on('end', () => {
			const ts = String(req.headers['x-parley-request-timestamp'] ?? '');
			const sig = String(req.headers['x-parley-signature'] ?? '');
			const want = 'v0=' + createHmac('sha256', secret()).update(`v0:${ts}:${body}`).digest('hex');
			const fresh = Math.abs(Date.now() / 1000 - Number(ts)) < 300;
			if (!fresh || sig.length !== want.length || !timingSafeEqual(Buffer.from(sig), Buffer.from(want))) {
				res.writeHead(401).end('bad signature');
				return;
			}
			const form = new URLSearchParams(body);
			calls.push(form.get('text') ?? '');
			res.writeHead(200, { 'Content-Type': 'application/json' });
			res.end(JSON.stringify({ response_type: 'ephemeral', text: `You said *${form.get('text')}*` }));
		});
	});
	return new Promise((resolve) =>
		server.listen(0, '127.0.0.1', () => resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/cmd`, server, calls })),
	);
}

test('admin adds a bot, a webhook and a slash command; the composer runs it', async ({ page, server }) => {
	const s = await workspace(server.url, 'integ');
	let secret = '';
	const endpoint = await commandEndpoint(() => secret);
	try {
		const problems = watchPage(page);
		await signIn(page, s.owner.token, `/w/${s.ws.slug}/c/general`);
		await expect(page.getByTestId('channel-title')).toContainText('general');

		await page.getByTestId('workspace-menu').click();
		await page.getByTestId('menu-integrations').click();
		const dialog = page.getByTestId('integrations-dialog');
		await expect(dialog).toBeVisible();

		// A bot and a token, shown once.
		await dialog.getByTestId('bot-name').fill('Deployer');
		await dialog.getByTestId('bot-handle').fill(`deployer-${Date.now().toString(36)}`);
		await dialog.getByTestId('bot-create').click();
		await expect(dialog.getByTestId('bot-row').filter({ hasText: 'Deployer' })).toBeVisible();
		await dialog.getByTestId('bot-new-token').click();
		await dialog.getByTestId('bot-token-create').click();
		await expect(dialog.getByTestId('integ-secret')).toHaveText(/^pbt_/);

		// An incoming webhook for #general.
		await dialog.getByTestId('integ-tab-webhooks').click();
		await dialog.getByTestId('webhook-channel').selectOption({ label: '#general' });
		await dialog.getByTestId('webhook-name').fill('CI');
		await dialog.getByTestId('webhook-create').click();
		// The bot token stays shown until the webhook's URL replaces it.
		await expect(dialog.getByTestId('integ-secret')).toContainText('/api/v1/hooks/');
		const hookURL = (await dialog.getByTestId('integ-secret').textContent())!.trim();

		// A slash command pointing at the endpoint above.
		await dialog.getByTestId('integ-tab-commands').click();
		await dialog.getByTestId('integration-name').fill('echo');
		await dialog.getByTestId('integration-url').fill(endpoint.url);
		await dialog.getByTestId('integration-create').click();
		await expect(dialog.getByTestId('integration-row').filter({ hasText: '/echo' })).toBeVisible();
		await expect(dialog.getByTestId('integ-secret')).not.toHaveText(hookURL); // the command's signing secret now
		secret = (await dialog.getByTestId('integ-secret').textContent())!.trim();
		await dialog.getByTestId('close-dialog').click();

		// The tool posts Slack's payload; it shows as the bot's, with the badge
		// and the name the payload asked for (integrations-thread.spec.ts has more).
		const res = await fetch(hookURL, {
			method: 'POST',
			headers: { 'Content-Type': 'application/json' },
			body: JSON.stringify({ text: 'Build *passed* on main', username: 'Jenkins' }),
		});
		expect(await res.text()).toBe('ok');
		const botMsg = page.getByTestId('message').filter({ hasText: 'Build passed on main' });
		await expect(botMsg).toBeVisible();
		await expect(botMsg.getByTestId('bot-badge')).toHaveText('BOT');
		await expect(botMsg.getByTestId('message-author')).toHaveText('Jenkins');
		await expect(botMsg.locator('strong', { hasText: 'passed' })).toBeVisible();

		// The composer completes the command; its answer is for this user only.
		const composer = page.getByTestId('composer');
		await composer.pressSequentially('/ec');
		await expect(page.getByTestId('command-option').filter({ hasText: '/echo' })).toBeVisible();
		await composer.press('Tab');
		await expect(composer).toHaveValue('/echo ');
		await composer.pressSequentially('hello there');
		await composer.press('Enter');
		const answer = page.getByTestId('ephemeral-message').filter({ hasText: 'You said hello there' });
		await expect(answer).toBeVisible();
		await expect(answer).toContainText('Only visible to you');
		expect(endpoint.calls).toEqual(['hello there']);
		// Nothing was posted for it.
		await expect(page.getByTestId('message').filter({ hasText: 'hello there' })).toHaveCount(0);

		// Built-ins: /me posts in italics.
		await composer.fill('/me waves');
		await composer.press('Enter');
		await expect(page.getByTestId('message').filter({ hasText: 'waves' }).locator('em')).toHaveText('waves');
		expect(problems).toEqual([]);
	} finally {
		endpoint.server.close();
	}
});
