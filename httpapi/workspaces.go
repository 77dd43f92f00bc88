package httpapi

import (
	"net/http"

	"parley"
	"parley/internal/edge"
)

func (s *Server) createWorkspace(w http.ResponseWriter, r *http.Request, c *caller) error {
	var in struct {
		Name string `json:"name"`
		Slug string `json:"slug"`
	}
	if err := decode(r, &in, false); err != nil {
		return err
	}
	ws, err := s.store.CreateWorkspace(r.Context(), c.UserID, in.Name, in.Slug)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, ws)
	return nil
}

func (s *Server) listWorkspaces(w http.ResponseWriter, r *http.Request, c *caller) error {
	list, err := s.store.ListWorkspaces(r.Context(), c.UserID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Workspaces []parley.Workspace `json:"workspaces"`
	}{nonNil(list)})
	return nil
}

func (s *Server) getWorkspace(w http.ResponseWriter, r *http.Request, c *caller) error {
	ws, err := s.store.GetWorkspace(r.Context(), c.UserID, r.PathValue("ws"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ws)
	return nil
}

func (s *Server) createInvite(w http.ResponseWriter, r *http.Request, c *caller) error {
	var p parley.InviteParams
	if err := decode(r, &p, true); err != nil {
		return err
	}
	inv, err := s.store.CreateInvite(r.Context(), c.UserID, r.PathValue("ws"), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, inv)
	return nil
}

// invitePreview answers the invite page, before sign-up: the workspace's
// name and slug only. Public, so limited per client IP like login (in its
// bucket: both are what an address without an account can ask).
func (s *Server) invitePreview(w http.ResponseWriter, r *http.Request, _ *caller) error {
	if err := s.rl.allow(s.now(), TierAuth, limitCheck{s.rl.loginIP, edge.IPKey(s.clientIP(r)), "invite_ip"}); err != nil {
		return err
	}
	p, err := s.store.InvitePreview(r.Context(), r.PathValue("code"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

func (s *Server) acceptInvite(w http.ResponseWriter, r *http.Request, c *caller) error {
	// Accepting joins #general: one link shared to a crowd is a join spike
	// into it, limited per invite code (the workspace is not known yet).
	if err := s.joins.allow(s.now(), "invite:"+r.PathValue("code")); err != nil {
		return err
	}
	ws, err := s.store.AcceptInvite(r.Context(), c.UserID, r.PathValue("code"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ws)
	return nil
}

func (s *Server) setMemberRole(w http.ResponseWriter, r *http.Request, c *caller) error {
	var in struct {
		Role parley.Role `json:"role"`
	}
	if err := decode(r, &in, false); err != nil {
		return err
	}
	err := s.store.SetMemberRole(r.Context(), c.UserID, r.PathValue("ws"), r.PathValue("user_id"), in.Role)
	if err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) listWorkspaceUsers(w http.ResponseWriter, r *http.Request, c *caller) error {
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	page, err := s.dir.Directory(r.Context(), c.UserID, r.PathValue("ws"), parley.UserQuery{
		Q: q.Get("q"), Cursor: q.Get("cursor"), Limit: limit,
		IncludeDeactivated: q.Get("include_deactivated") == "true",
	})
	if err != nil {
		return err
	}
	page.Users = nonNil(page.Users)
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) listChannels(w http.ResponseWriter, r *http.Request, c *caller) error {
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	page, err := s.store.ListChannels(r.Context(), c.UserID, r.PathValue("ws"), parley.ChannelQuery{
		Q: q.Get("q"), Cursor: q.Get("cursor"), Limit: limit,
	})
	if err != nil {
		return err
	}
	page.Channels = nonNil(page.Channels)
	writeJSON(w, http.StatusOK, page)
	return nil
}
