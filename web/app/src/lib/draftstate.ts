// The app's drafts (drafts.svelte.ts): the signed-in user's, in the open workspace.
import { app } from './app.svelte';
import { appDrafts } from './drafts.svelte';

export const drafts = appDrafts(() => ({ userId: app.s?.self?.id, workspaceId: app.s?.workspace?.id }));
