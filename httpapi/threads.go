package httpapi

import (
	"net/http"

	"parley"
)

func (s *Server) listThreads(w http.ResponseWriter, r *http.Request, c *caller) error {
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	tq := parley.ThreadQuery{Cursor: q.Get("cursor"), Limit: limit}
	switch q.Get("unread") {
	case "", "false", "0":
	case "true", "1":
		tq.Unread = true
	default:
		return parley.Errorf(parley.EINVALID, "unread must be true or false")
	}
	page, err := s.store.ListThreads(r.Context(), c.UserID, r.PathValue("ws"), tq)
	if err != nil {
		return err
	}
	page.Threads = nonNil(page.Threads)
	for i := range page.Threads {
		fillThread(&page.Threads[i])
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) followThread(w http.ResponseWriter, r *http.Request, c *caller) error {
	t, err := s.store.FollowThread(r.Context(), c.UserID, r.PathValue("root"))
	return writeThread(w, t, err)
}

func (s *Server) unfollowThread(w http.ResponseWriter, r *http.Request, c *caller) error {
	t, err := s.store.UnfollowThread(r.Context(), c.UserID, r.PathValue("root"))
	return writeThread(w, t, err)
}

func (s *Server) markThreadRead(w http.ResponseWriter, r *http.Request, c *caller) error {
	t, err := s.store.MarkThreadRead(r.Context(), c.UserID, r.PathValue("root"))
	return writeThread(w, t, err)
}

func writeThread(w http.ResponseWriter, t *parley.Thread, err error) error {
	if err != nil {
		return err
	}
	fillThread(t)
	writeJSON(w, http.StatusOK, t)
	return nil
}

// fillThread leaves no list null.
func fillThread(t *parley.Thread) {
	t.Participants = nonNil(t.Participants)
	if t.Root != nil {
		t.Root.Reactions = nonNil(t.Root.Reactions)
	}
}
