package parley

// DefaultSearchLimit is the page size of a search without a limit (Slack's
// default); larger pages are clamped to MaxLimit like every list.
const DefaultSearchLimit = 20

// SearchLimit applies the search paging defaults.
func SearchLimit(n int) int {
	if n <= 0 {
		return DefaultSearchLimit
	}
	return ClampLimit(n)
}
