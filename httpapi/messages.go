package httpapi

import (
	"net/http"

	"parley"
)

func (s *Server) postMessage(w http.ResponseWriter, r *http.Request, c *caller) error {
	var in parley.NewMessage
	if err := decode(r, &in, false); err != nil {
		return err
	}
	m, created, err := s.store.PostMessage(r.Context(), c.UserID, r.PathValue("id"), in)
	if err != nil {
		return err
	}
	status := http.StatusOK // a repeated client_msg_id: the first message
	if created {
		status = http.StatusCreated
		s.afterPost(r.Context(), c, m) // outgoing webhooks (commands.go)
	}
	m.Reactions = nonNil(m.Reactions)
	writeJSON(w, status, m)
	return nil
}

func (s *Server) listMessages(w http.ResponseWriter, r *http.Request, c *caller) error {
	var q parley.HistoryQuery
	var err error
	if q.BeforeSeq, err = querySeq(r, "before_seq"); err != nil {
		return err
	}
	if q.AfterSeq, err = querySeq(r, "after_seq"); err != nil {
		return err
	}
	if q.Limit, err = queryLimit(r); err != nil {
		return err
	}
	page, err := s.store.ListMessages(r.Context(), c.UserID, r.PathValue("id"), q)
	if err != nil {
		return err
	}
	return writeMessages(w, page)
}

func (s *Server) listPins(w http.ResponseWriter, r *http.Request, c *caller) error {
	page, err := s.store.ListPins(r.Context(), c.UserID, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeMessages(w, page)
}

func (s *Server) listReplies(w http.ResponseWriter, r *http.Request, c *caller) error {
	after, err := queryAfter(r)
	if err != nil {
		return err
	}
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	page, err := s.store.ListReplies(r.Context(), c.UserID, r.PathValue("root"), after, limit)
	if err != nil {
		return err
	}
	return writeMessages(w, page)
}

// writeMessages writes a page of messages, with [] rather than null for an
// empty one and no reaction list left null.
func writeMessages(w http.ResponseWriter, page *parley.MessagePage) error {
	page.Messages = nonNil(page.Messages)
	for i := range page.Messages {
		page.Messages[i].Reactions = nonNil(page.Messages[i].Reactions)
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// writeMessage writes one message with a 200.
func writeMessage(w http.ResponseWriter, m *parley.Message, err error) error {
	if err != nil {
		return err
	}
	m.Reactions = nonNil(m.Reactions)
	writeJSON(w, http.StatusOK, m)
	return nil
}

func (s *Server) getMessage(w http.ResponseWriter, r *http.Request, c *caller) error {
	m, err := s.store.GetMessage(r.Context(), c.UserID, r.PathValue("id"))
	return writeMessage(w, m, err)
}

func (s *Server) editMessage(w http.ResponseWriter, r *http.Request, c *caller) error {
	var in struct {
		Text *string `json:"text"`
	}
	if err := decode(r, &in, false); err != nil {
		return err
	}
	if in.Text == nil {
		return parley.Errorf(parley.EINVALID, "text is required")
	}
	m, err := s.store.EditMessage(r.Context(), c.UserID, r.PathValue("id"), *in.Text)
	return writeMessage(w, m, err)
}

func (s *Server) deleteMessage(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.store.DeleteMessage(r.Context(), c.UserID, r.PathValue("id")); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) addReaction(w http.ResponseWriter, r *http.Request, c *caller) error {
	m, err := s.store.AddReaction(r.Context(), c.UserID, r.PathValue("id"), r.PathValue("emoji"))
	return writeMessage(w, m, err)
}

func (s *Server) removeReaction(w http.ResponseWriter, r *http.Request, c *caller) error {
	m, err := s.store.RemoveReaction(r.Context(), c.UserID, r.PathValue("id"), r.PathValue("emoji"))
	return writeMessage(w, m, err)
}

func (s *Server) pin(w http.ResponseWriter, r *http.Request, c *caller) error {
	m, err := s.store.Pin(r.Context(), c.UserID, r.PathValue("id"))
	return writeMessage(w, m, err)
}

func (s *Server) unpin(w http.ResponseWriter, r *http.Request, c *caller) error {
	m, err := s.store.Unpin(r.Context(), c.UserID, r.PathValue("id"))
	return writeMessage(w, m, err)
}
