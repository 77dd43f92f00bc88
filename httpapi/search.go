package httpapi

import (
	"net/http"
	"strings"

	"parley"
)

// search answers GET /workspaces/{ws}/search: full-text search over the
// messages the caller may read (the store decides which, docs/search.md).
func (s *Server) search(w http.ResponseWriter, r *http.Request, c *caller) error {
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	if strings.TrimSpace(q.Get("q")) == "" {
		return parley.Errorf(parley.EINVALID, "query parameter q is required")
	}
	page, err := s.store.Search(r.Context(), c.UserID, r.PathValue("ws"), parley.SearchQuery{
		Q: q.Get("q"), Cursor: q.Get("cursor"), Limit: limit,
	})
	if err != nil {
		return err
	}
	page.Results = nonNil(page.Results)
	writeJSON(w, http.StatusOK, page)
	return nil
}
