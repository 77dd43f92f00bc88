package httpapi

import (
	"net/http"

	"parley"
)

// Account and workspace lifecycle (docs/lifecycle.md). Who may do what is
// the store's decision (parley.LifecycleService).

func (s *Server) deactivateMember(w http.ResponseWriter, r *http.Request, c *caller) error {
	u, err := s.store.DeactivateUser(r.Context(), c.UserID, r.PathValue("ws"), r.PathValue("user_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, u)
	return nil
}

func (s *Server) reactivateMember(w http.ResponseWriter, r *http.Request, c *caller) error {
	u, err := s.store.ReactivateUser(r.Context(), c.UserID, r.PathValue("ws"), r.PathValue("user_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, u)
	return nil
}

func (s *Server) removeWorkspaceMember(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.store.RemoveWorkspaceMember(r.Context(), c.UserID, r.PathValue("ws"), r.PathValue("user_id")); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) transferOwnership(w http.ResponseWriter, r *http.Request, c *caller) error {
	var in struct {
		UserID string `json:"user_id"`
	}
	if err := decode(r, &in, false); err != nil {
		return err
	}
	if in.UserID == "" {
		return parley.Errorf(parley.EINVALID, "user_id is required")
	}
	if err := s.store.TransferOwnership(r.Context(), c.UserID, r.PathValue("ws"), in.UserID); err != nil {
		return err
	}
	return noContent(w)
}

// deleteWorkspace deletes at once what anyone can see and answers 202: the
// rows and files go in the background (package purge, Config.WorkspaceDeleted).
func (s *Server) deleteWorkspace(w http.ResponseWriter, r *http.Request, c *caller) error {
	confirm := r.URL.Query().Get("confirm")
	if confirm == "" {
		return parley.Errorf(parley.EINVALID, "confirm (the workspace's slug) is required")
	}
	ws := r.PathValue("ws")
	if err := s.store.DeleteWorkspace(r.Context(), c.UserID, ws, confirm); err != nil {
		return err
	}
	if s.workspaceDeleted != nil {
		s.workspaceDeleted(ws)
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"workspace_id": ws, "status": "deleting"})
	return nil
}
