// Account and workspace lifecycle (issue 16, item 7; docs/lifecycle.md),
// between two real browsers on a real parley: Alice (the owner) deactivates
// Bob from his profile and his open page is signed out at once; she
// reactivates him; then she deletes the workspace through the typed
// confirmation. Every wait is on a condition.
import { test, expect, watchPage } from './fixtures';
import { openAs, pair } from './people';

test('deactivate signs the member out live; reactivate; delete the workspace with a typed confirmation', async ({ alice, bob, server, newUser }) => {
	const problems = [alice].map(watchPage);
	const p = await pair(server, newUser, 'Lifecycle Co');
	const ws = await p.alice.call<{ slug: string }>('GET', `/workspaces/${p.ws}`);
	await Promise.all([openAs(alice, p.alice, p), openAs(bob, p.bob, p)]);

	// ---- Deactivate Bob from the directory's profile panel ----
	await alice.getByTestId('nav-directory').click();
	await alice.getByTestId('directory-user').filter({ hasText: 'Bob Okafor' }).click();
	await expect(alice.getByTestId('profile-name')).toHaveText('Bob Okafor');
	await alice.getByTestId('profile-deactivate').click();
	await alice.getByTestId('profile-confirm').click();
	await expect(alice.getByTestId('profile-deactivated')).toBeVisible();
	await expect(alice.getByTestId('profile-reactivate')).toBeVisible();
	// Bob's socket was closed with 4010 and his token revoked: his page is
	// back at the log-in form.
	await expect(bob.getByTestId('auth-submit')).toBeVisible();
	// The directory still lists him for the admin, marked.
	await expect(alice.getByTestId('directory-user').filter({ hasText: 'Bob Okafor' }).getByTestId('directory-deactivated')).toBeVisible();

	// ---- Reactivate: he can log in again ----
	await alice.getByTestId('profile-reactivate').click();
	await expect(alice.getByTestId('profile-deactivate')).toBeVisible();
	await expect(alice.getByTestId('profile-deactivated')).toHaveCount(0);

	// ---- Delete the workspace: the button waits for the slug ----
	await alice.getByTestId('profile-menu').click();
	await alice.getByTestId('menu-delete-workspace').click();
	const submit = alice.getByTestId('delete-workspace-submit');
	await expect(submit).toBeDisabled();
	await alice.getByTestId('delete-workspace-confirm').fill('not-the-slug');
	await expect(submit).toBeDisabled();
	await alice.getByTestId('delete-workspace-confirm').fill(ws.slug);
	await expect(submit).toBeEnabled();
	await submit.click();
	await expect(alice.getByTestId('workspace-list').or(alice.getByTestId('invite-input'))).toBeVisible();
	await expect(alice.getByTestId('open-workspace').filter({ hasText: 'Lifecycle Co' })).toHaveCount(0);
	const left = await p.alice.call<{ workspaces: { id: string }[] }>('GET', '/workspaces');
	expect(left.workspaces.map((w) => w.id)).not.toContain(p.ws);
	expect(problems.flat()).toEqual([]);
});
