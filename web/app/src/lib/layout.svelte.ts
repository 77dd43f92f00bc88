// Layout state of the signed-in screen that several components share: the
// sidebar drawer on phones, and which of the three layouts is in force. The
// breakpoints match the media queries in styles/app.css.

/** Phones: the sidebar is a drawer, the channel and any right panel are full-screen. */
export const PHONE_QUERY = '(max-width: 767.98px)';

export const layout = $state({
	/** The sidebar drawer is open (phones only; it is always shown from 768 px). */
	drawerOpen: false,
	/** The viewport matches PHONE_QUERY. */
	phone: false,
});

/** Follow PHONE_QUERY; returns the function that stops following it. */
export function watchLayout(): () => void {
	if (typeof matchMedia === 'undefined') return () => {};
	const mq = matchMedia(PHONE_QUERY);
	const update = () => {
		layout.phone = mq.matches;
		if (!mq.matches) layout.drawerOpen = false;
	};
	update();
	mq.addEventListener('change', update);
	return () => mq.removeEventListener('change', update);
}
