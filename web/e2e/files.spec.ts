// Issue 16, item 1: files between two real browsers on a real parley.
// Alice attaches an image (the progress bar shows while the upload is held
// back) and an HTML page; Bob sees the image's preview inline and the page
// as a download chip, and finds both in the channel's files panel. The
// download responses carry the headers that keep an upload from ever
// running script in Parley's origin. Every wait is on a condition.
import type { Page } from '@playwright/test';
import { test, expect, watchPage } from './fixtures';
import { message } from './people';
import { api } from './seed';
import type { ParleyServer, newUser as NewUser } from './harness';

// A 24×16 RGB PNG.
const PNG = Buffer.from(
	'iVBORw0KGgoAAAANSUhEUgAAABgAAAAQCAIAAACDRijCAAACk0lEQVR4nA3MkQLFIABA0XiSjONJMo4nyTieJON4kozjSTKOJ8nleJLsO947H3CEEAyCUaAEk2AWGMEiWAVOsAl2QRAcglOQBJfgFhTBI0DQBK/gEwghGSSjREkmySwxkkWySpxkk+ySIDkkpyRJLsktKZJHgqRJXskn/5FiUIwKpZgUs8IoFsWqcIpNsSuC4lCciqS4FLeiKB4FiqZ4FZ/6R5pBM2qUZtLMGqNZNKvGaTbNrgmaQ3NqkubS3JqieTRomubVfPofGQbDaFCGyTAbjGExrAZn2Ay7IRgOw2lIhstwG4rhMWBohtfwmX9kGSyjRVkmy2wxlsWyWpxls+yWYDkspyVZLsttKZbHgqVZXstn/5FjcIwO5Zgcs8M4FsfqcI7NsTuC43CcjuS4HLejOB4HjuZ4HZ/7R57BM3qUZ/LMHuNZPKvHeTbP7gmew3N6kufy3J7ieTx4muf1fP4fBYbAGFCBKTAHTGAJrAEX2AJ7IASOwBlIgStwB0rgCRBogTfwhX8UGSJjREWmyBwxkSWyRlxki+yREDkiZyRFrsgdKZEnQqRF3sgX/1FiSIwJlZgSc8IklsSacIktsSdC4kiciZS4EneiJJ4EiZZ4E1/6R5khM2ZUZsrMGZNZMmvGZbbMngmZI3NmUubK3JmSeTJkWubNfPkfFYbCWFCFqTAXTGEprAVX2Ap7IRSOwllIhatwF0rhKVBohbfwlX9UGSpjRVWmylwxlaWyVlxlq+yVUDkqZyVVrspdKZWnQqVV3spX/1FjaIwN1Zgac8M0lsbacI2tsTdC42icjdS4GnejNJ4GjdZ4G1/7R52hM3ZUZ+rMHdNZOmvHdbbO3gmdo3N2Uufq3J3SeTp0WuftfJ0f6NuBX1nQb7kAAAAASUVORK5CYII=',
	'base64',
);
const HTML = Buffer.from('<!DOCTYPE html><html><body><script>document.title = "pwned"</script></body></html>');

interface Member {
	token: string;
	call<T = unknown>(method: string, path: string, body?: unknown): Promise<T>;
}

async function team(server: ParleyServer, newUser: typeof NewUser) {
	const signUp = async (prefix: string, name: string): Promise<Member> => {
		const u = newUser(prefix);
		const r = await api<{ token: string }>(server.url, null, 'POST', '/auth/signup', { ...u, name });
		return { token: r.token, call: (method, path, body) => api(server.url, r.token, method, path, body) };
	};
	const [alice, bob] = await Promise.all([signUp('alice', 'Alice Moreau'), signUp('bob', 'Bob Okafor')]);
	const ws = await alice.call<{ id: string }>('POST', '/workspaces', { name: 'Files Co', slug: `files-${Date.now().toString(36)}` });
	const invite = await alice.call<{ code: string }>('POST', `/workspaces/${ws.id}/invites`, {});
	await bob.call('POST', `/invites/${invite.code}/accept`);
	const share = await alice.call<{ id: string }>('POST', `/workspaces/${ws.id}/channels`, { name: 'share', kind: 'public' });
	await bob.call('POST', `/channels/${share.id}/join`);
	return { ws: ws.id, alice, bob };
}

async function openAs(page: Page, m: Member, ws: string) {
	await page.goto('/');
	await page.evaluate(
		([t, w]) => {
			localStorage.setItem('parley.token', t);
			localStorage.setItem('parley.workspace', w);
		},
		[m.token, ws],
	);
	await page.reload();
	await expect(page.getByTestId('workspace-name')).toHaveText('Files Co');
	await page.getByTestId('channel-share').click();
}

test('an image previews inline for both, an HTML page only downloads, both are in the files panel', async ({ server, alice, bob, newUser }) => {
	const problems = [alice, bob].map(watchPage);
	const t = await team(server, newUser);
	await Promise.all([openAs(alice, t.alice, t.ws), openAs(bob, t.bob, t.ws)]);

	// Hold the image's upload back until its progress bar has been seen.
	let release!: () => void;
	const held = new Promise<void>((r) => (release = r));
	await alice.route('**/api/v1/workspaces/*/files?name=*', async (route) => {
		await held;
		await route.continue();
	});
	await alice.getByTestId('composer-file-input').setInputFiles({ name: 'chart.png', mimeType: 'image/png', buffer: PNG });
	await expect(alice.getByTestId('upload-progress')).toBeVisible();
	await expect(alice.getByTestId('composer-send')).toBeDisabled();
	release();
	await expect(alice.getByTestId('attachment-ready')).toHaveCount(1);
	// The page comes claiming to be an image: the server sniffs it.
	await alice.getByTestId('composer-file-input').setInputFiles({ name: 'page.html', mimeType: 'image/png', buffer: HTML });
	await expect(alice.getByTestId('attachment-ready')).toHaveCount(2);
	await alice.getByTestId('composer').fill('the chart and the page');
	await alice.getByTestId('composer').press('Enter');
	await expect(alice.getByTestId('attachment')).toHaveCount(0);

	for (const p of [alice, bob]) {
		const row = message(p, 'the chart and the page');
		await expect(row).not.toHaveAttribute('data-message-id', /^local:/);
		const img = row.getByTestId('file-preview');
		await expect(img).toBeVisible();
		await expect.poll(() => img.evaluate((el: HTMLImageElement) => el.complete && el.naturalWidth)).toBe(24);
		await expect(row.getByTestId('file-chip')).toContainText('page.html');
	}

	// The headers of Bob's downloads.
	const row = message(bob, 'the chart and the page');
	const imageUrl = await row.getByTestId('file-image').getAttribute('href');
	const pageUrl = await row.getByTestId('file-chip').getAttribute('href');
	expect(imageUrl).toContain('sig=');
	const image = await bob.request.get(imageUrl!);
	expect(image.status()).toBe(200);
	expect(image.headers()['content-type']).toBe('image/png');
	expect(image.headers()['content-disposition']).toMatch(/^inline; filename="?chart\.png/);
	const html = await bob.request.get(pageUrl!);
	expect(html.status()).toBe(200);
	expect(html.headers()['content-type']).toBe('application/octet-stream');
	expect(html.headers()['content-disposition']).toMatch(/^attachment; filename="?page\.html/);
	for (const res of [image, html]) {
		expect(res.headers()['x-content-type-options']).toBe('nosniff');
		expect(res.headers()['content-security-policy']).toContain('sandbox');
		expect(res.headers()['content-security-policy']).toContain("default-src 'none'");
	}
	// Opened in the browser, the page is a download, never a document of ours.
	const download = bob.waitForEvent('download');
	await row.getByTestId('file-chip').click();
	expect((await download).suggestedFilename()).toBe('page.html');
	await expect(bob).not.toHaveTitle('pwned');

	// The channel's files, newest first.
	await bob.getByTestId('files-button').click();
	await expect(bob.getByTestId('file-item')).toHaveCount(2);
	await expect(bob.getByTestId('file-item').first()).toContainText('page.html');
	await expect(bob.getByTestId('file-item').last()).toContainText('chart.png');

	expect(problems.flat()).toEqual([]);
});
