// Issue 14, a stale root: Bob posts a message in #general and goes to
// #other; Alice replies to it (and edits, reacts, deletes elsewhere) while
// #general is off screen. When Bob comes back, the root row shows "1 reply"
// and the other changes at once, without a reload. (Reading #general sent
// a thread.read whose thread had no reply count, and the client took its 0.)
import { test, expect, watchPage } from './fixtures';
import { message, openAs, pair } from './people';

test('a reply posted while the root is off screen shows on the root when its author comes back', async ({ bob, server, newUser }) => {
	const problems = watchPage(bob);
	const p = await pair(server, newUser, 'Stale Co');
	const old = await p.alice.call<{ id: string }>('POST', `/channels/${p.general}/messages`, { text: 'Alice said this first', client_msg_id: 'stale-1' });
	const gone = await p.alice.call<{ id: string }>('POST', `/channels/${p.general}/messages`, { text: 'Alice will take this back', client_msg_id: 'stale-2' });
	await openAs(bob, p.bob, p);
	await expect(bob.getByTestId('channel-title')).toContainText('general');
	await bob.getByTestId('composer').fill('Who has the launch keys?');
	await bob.getByTestId('composer').press('Enter');
	const root = message(bob, 'Who has the launch keys?');
	await expect(root).not.toHaveAttribute('data-message-id', /^local:/);
	const rootId = (await root.getAttribute('data-message-id'))!;

	await bob.getByTestId('channel-other').click();
	await expect(bob.getByTestId('channel-title')).toContainText('other');
	await p.alice.call('POST', `/channels/${p.general}/messages`, { text: 'I do', client_msg_id: 'stale-3', thread_root_id: rootId });
	await p.alice.call('PATCH', `/messages/${old.id}`, { text: 'Alice said this first (edited)' });
	await p.alice.call('PUT', `/messages/${old.id}/reactions/tada`);
	await p.alice.call('DELETE', `/messages/${gone.id}`);
	// The reply reached Bob's session (his Threads badge counts it) while #general was off screen.
	await expect(bob.getByTestId('threads-badge')).toHaveText('1');

	await bob.getByTestId('channel-general').click();
	await expect(bob.getByTestId('channel-title')).toContainText('general');
	await expect(root.getByTestId('reply-count')).toContainText('1 reply');
	await expect(message(bob, 'Alice said this first (edited)')).toBeVisible();
	await expect(message(bob, 'Alice said this first').getByTestId('reaction-tada')).toContainText('1');
	await expect(message(bob, 'Alice will take this back')).toHaveCount(0);
	expect(problems).toEqual([]);
});
