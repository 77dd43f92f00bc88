// The page's signals that the session needs: whether the page is visible
// (messages on screen count as read only then) and when the network is
// back (reconnect at once instead of at the end of a long backoff). The
// client library stays free of DOM listeners; the app wires them here.

import type { Session } from '@parley/client';

/** Feed the page's visibility and online events to the session; returns the function that stops. */
export function watchPage(session: Session): () => void {
	const onVisibility = () => session.setVisible(document.visibilityState === 'visible');
	const onOnline = () => session.online();
	document.addEventListener('visibilitychange', onVisibility);
	window.addEventListener('online', onOnline);
	onVisibility();
	return () => {
		document.removeEventListener('visibilitychange', onVisibility);
		window.removeEventListener('online', onOnline);
	};
}
