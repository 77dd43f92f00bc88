// Parley: apply the stored theme and message density before the first paint,
// so that a dark-mode reader never sees a white flash. A classic script in
// <head> loaded from our own origin: the Content-Security-Policy
// (script-src 'self', no inline scripts) allows it. The app (lib/prefs.ts)
// keeps these attributes up to date afterwards; the keys and values are the
// same there.
(function () {
	var root = document.documentElement;
	var theme = null;
	var density = null;
	try {
		theme = localStorage.getItem('parley.theme');
		density = localStorage.getItem('parley.density');
	} catch (e) {
		// Storage blocked: follow the system.
	}
	if (theme !== 'light' && theme !== 'dark') {
		theme = window.matchMedia && window.matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
	}
	root.setAttribute('data-theme', theme);
	root.setAttribute('data-density', density === 'compact' ? 'compact' : 'comfortable');
})();
