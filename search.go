package parley

import "context"

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

// SearchQuery is a full-text search over a workspace's messages.
type SearchQuery struct {
	Q      string
	Cursor string
	Limit  int
}

// SearchResult is one matching message with its highlighted text: the
// matched terms wrapped in HighlightStart/HighlightEnd, the rest as stored
// (clients escape it before showing it).
type SearchResult struct {
	Message   Message `json:"message"`
	Highlight string  `json:"highlight"`
}

// Highlight markers in SearchResult.Highlight: private-use characters that
// message text is unlikely to hold, so clients can split on them safely.
const (
	HighlightStart = "\ue000"
	HighlightEnd   = "\ue001"
)

// SearchPage is one page of search results, best first.
type SearchPage struct {
	Results    []SearchResult `json:"results"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

// SearchService finds messages by text among those actor may read: the
// workspace's public channels and every channel actor belongs to.
type SearchService interface {
	Search(ctx context.Context, actor, workspaceID string, q SearchQuery) (*SearchPage, error)
}
