package httpapi

import (
	"net/http"

	"parley"
)

// The directory queries (the switcher, mention suggestions, channel
// headers, the user directory and /users/batch) are answered by
// Config.Directory: the query cache on a node, the store-backed
// implementation in tests and tools. This layer only parses and encodes.

func (s *Server) switcher(w http.ResponseWriter, r *http.Request, c *caller) error {
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	res, err := s.dir.Switcher(r.Context(), c.UserID, r.PathValue("ws"), r.URL.Query().Get("q"), limit)
	if err != nil {
		return err
	}
	res.Channels, res.Users = nonNil(res.Channels), nonNil(res.Users)
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) mentionSuggestions(w http.ResponseWriter, r *http.Request, c *caller) error {
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	users, err := s.dir.MentionSuggestions(r.Context(), c.UserID, r.PathValue("id"), r.URL.Query().Get("q"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Users []parley.MentionSuggestion `json:"users"`
	}{nonNil(users)})
	return nil
}

func (s *Server) channelHeader(w http.ResponseWriter, r *http.Request, c *caller) error {
	h, err := s.dir.ChannelHeader(r.Context(), c.UserID, r.PathValue("id"))
	if err != nil {
		return err
	}
	h.MembersPreview = nonNil(h.MembersPreview)
	writeJSON(w, http.StatusOK, h)
	return nil
}
