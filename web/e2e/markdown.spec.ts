// Markdown and emoji in the web client (issue 14): a message with a list, a
// quote, strike-through and a Go code block renders as those elements, the
// code highlighted by the lazily loaded highlighter; the emoji picker finds
// "thumbs" and reacts; the composer completes ":tada" and sends the emoji.
// Alice is a real browser against the real server, set up over HTTP.
import AxeBuilder from '@axe-core/playwright';
import { test, expect, watchPage } from './fixtures';
import { message } from './people';
import { api } from './seed';

test('markdown blocks, highlighted code, the emoji picker and :shortcode: completion', async ({ page, server, newUser, shot }) => {
	const problems = watchPage(page);
	const scripts: string[] = [];
	page.on('request', (r) => {
		if (r.resourceType() === 'script') scripts.push(new URL(r.url()).pathname);
	});
	const u = newUser('md');
	const { token } = await api<{ token: string }>(server.url, null, 'POST', '/auth/signup', { ...u });
	const ws = await api<{ id: string }>(server.url, token, 'POST', '/workspaces', { name: 'Markdown Co', slug: `md-${Date.now().toString(36)}` });
	await page.goto('/');
	await page.evaluate(
		([t, w]) => {
			localStorage.setItem('parley.token', t);
			localStorage.setItem('parley.workspace', w);
		},
		[token, ws.id],
	);
	await page.reload();
	await expect(page.getByTestId('workspace-name')).toHaveText('Markdown Co');

	// The highlighter and the emoji set are chunks of their own, not loaded
	// until something needs them.
	expect(scripts.filter((p) => /highlight|emojidata/.test(p))).toEqual([]);

	// ---- A message with every block construct ----
	const composer = page.getByTestId('composer');
	await composer.fill(
		[
			'# Release plan',
			'- build the *binary*',
			'- ship it :coffee:',
			'> quoted one',
			'> quoted two',
			'~old~ and ~~older~~ <script>alert(1)</script>',
			'```go',
			'func main() { fmt.Println("hi") }',
			'```',
		].join('\n'),
	);
	await page.getByTestId('composer-send').click();
	const md = message(page, 'Release plan').getByTestId('message-text');
	await expect(md.locator('.md-h1')).toHaveText('Release plan');
	await expect(md.locator('ul > li')).toHaveText(['build the binary', /ship it ☕/]);
	await expect(md.locator('ul em')).toHaveText('binary');
	// Two quoted lines are one quote: a paragraph with a line break.
	await expect(md.locator('blockquote')).toHaveCount(1);
	await expect(md.locator('blockquote p')).toHaveText('quoted onequoted two');
	await expect(md.locator('blockquote p br')).toHaveCount(1);
	await expect(md.locator('s')).toHaveText(['old', 'older']);
	await expect(md).toContainText('<script>alert(1)</script>');
	await expect(md.locator('script')).toHaveCount(0);
	// :coffee: is not among the built-in few: it shows once the emoji set has loaded.
	await expect(md.locator('.emoji[title=":coffee:"]')).toHaveText(/☕/);
	// The code block is highlighted once the highlighter chunk has loaded.
	const code = md.locator('pre[data-lang="go"] code');
	await expect(code.locator('span.hljs-keyword').first()).toHaveText('func');
	await expect(code.locator('span.hljs-string')).toHaveText('"hi"');
	await expect(code).toHaveText('func main() { fmt.Println("hi") }');
	expect(scripts.filter((p) => /\/assets\/(highlight|emojidata)-/.test(p))).toHaveLength(2);
	// Highlighted tokens keep text contrast (4.5:1) in both themes.
	for (const colorScheme of ['light', 'dark'] as const) {
		await page.emulateMedia({ colorScheme });
		await expect(page.locator('html')).toHaveAttribute('data-theme', colorScheme);
		const { violations } = await new AxeBuilder({ page }).include('pre[data-lang="go"]').withRules(['color-contrast']).analyze();
		expect(violations.map((v) => v.nodes.map((n) => `${n.target.join(' ')}: ${n.failureSummary}`)).flat(), `code contrast (${colorScheme})`).toEqual([]);
	}
	await page.emulateMedia({ colorScheme: null });

	// ---- The picker: search "thumbs", pick with the keyboard, react ----
	const row = message(page, 'Release plan');
	await row.hover();
	await row.getByTestId('action-react').click();
	const picker = page.getByTestId('emoji-picker');
	await expect(picker).toHaveAttribute('role', 'dialog');
	await picker.getByTestId('emoji-search').fill('thumbs');
	const first = picker.getByRole('listbox').getByRole('option').first();
	await expect(first).toHaveAttribute('data-testid', 'emoji-thumbsup');
	await expect(first).toHaveAccessibleName('thumbs up');
	await shot(page, 'markdown-picker');
	await picker.getByTestId('emoji-search').press('Enter');
	await expect(picker).toHaveCount(0);
	await expect(row.getByTestId('reaction-thumbsup')).toHaveAttribute('aria-pressed', 'true');

	// ---- The composer's picker: the recent reaction comes first, inserted at the caret ----
	await page.getByTestId('composer-emoji').click();
	await expect(picker.getByRole('option').first()).toHaveAttribute('data-testid', 'emoji-thumbsup');
	await picker.getByRole('option').first().click();
	await expect(composer).toHaveValue(/^👍/);

	// ---- :shortcode: completion ----
	await composer.pressSequentially(' :tad');
	const suggestions = page.getByTestId('emoji-suggestions');
	await expect(suggestions.getByRole('option').first()).toContainText(':tada:');
	await expect(composer).toHaveAttribute('aria-activedescendant', /-0$/);
	await composer.press('Enter');
	await expect(suggestions).toHaveCount(0);
	await composer.pressSequentially('shipped');
	await composer.press('Enter');
	await expect(message(page, 'shipped').getByTestId('message-text')).toHaveText(/👍️? 🎉 shipped/);

	expect(problems, server.logTail()).toEqual([]);
});
