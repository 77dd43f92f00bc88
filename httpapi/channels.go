package httpapi

import (
	"net/http"

	"parley"
)

func (s *Server) createChannel(w http.ResponseWriter, r *http.Request, c *caller) error {
	var in parley.NewChannel
	if err := decode(r, &in, false); err != nil {
		return err
	}
	ch, err := s.store.CreateChannel(r.Context(), c.UserID, r.PathValue("ws"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, ch)
	return nil
}

func (s *Server) openDM(w http.ResponseWriter, r *http.Request, c *caller) error {
	var in struct {
		WorkspaceID string   `json:"workspace_id"`
		UserIDs     []string `json:"user_ids"`
	}
	if err := decode(r, &in, false); err != nil {
		return err
	}
	if in.WorkspaceID == "" {
		return parley.Errorf(parley.EINVALID, "workspace_id is required")
	}
	ch, created, err := s.store.OpenDM(r.Context(), c.UserID, in.WorkspaceID, in.UserIDs)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, ch)
	return nil
}

func (s *Server) getChannel(w http.ResponseWriter, r *http.Request, c *caller) error {
	ch, err := s.store.GetChannel(r.Context(), c.UserID, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ch)
	return nil
}

func (s *Server) updateChannel(w http.ResponseWriter, r *http.Request, c *caller) error {
	var p parley.ChannelPatch
	if err := decode(r, &p, false); err != nil {
		return err
	}
	ch, err := s.store.UpdateChannel(r.Context(), c.UserID, r.PathValue("id"), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ch)
	return nil
}

func (s *Server) archiveChannel(w http.ResponseWriter, r *http.Request, c *caller) error {
	ch, err := s.store.ArchiveChannel(r.Context(), c.UserID, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ch)
	return nil
}

func (s *Server) joinChannel(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.joins.allow(s.now(), r.PathValue("id")); err != nil {
		return err
	}
	ch, err := s.store.JoinChannel(r.Context(), c.UserID, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ch)
	return nil
}

func (s *Server) leaveChannel(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.store.LeaveChannel(r.Context(), c.UserID, r.PathValue("id")); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) addMembers(w http.ResponseWriter, r *http.Request, c *caller) error {
	var in struct {
		UserIDs []string `json:"user_ids"`
	}
	if err := decode(r, &in, false); err != nil {
		return err
	}
	if len(in.UserIDs) > parley.MaxAddMembers {
		return parley.Errorf(parley.EINVALID, "at most %d user_ids at once", parley.MaxAddMembers)
	}
	ch, err := s.store.AddMembers(r.Context(), c.UserID, r.PathValue("id"), in.UserIDs)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ch)
	return nil
}

func (s *Server) removeMember(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.store.RemoveMember(r.Context(), c.UserID, r.PathValue("id"), r.PathValue("user_id")); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) listMembers(w http.ResponseWriter, r *http.Request, c *caller) error {
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	page, err := s.store.ListMembers(r.Context(), c.UserID, r.PathValue("id"), r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	page.Members = nonNil(page.Members)
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) markRead(w http.ResponseWriter, r *http.Request, c *caller) error {
	var in struct {
		Seq *int64 `json:"seq"`
	}
	if err := decode(r, &in, false); err != nil {
		return err
	}
	if in.Seq == nil || *in.Seq < 0 {
		return parley.Errorf(parley.EINVALID, "seq is required and must not be negative")
	}
	rs, err := s.store.MarkRead(r.Context(), c.UserID, r.PathValue("id"), *in.Seq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rs)
	return nil
}
