package httpapi

import (
	"net/http"

	"parley"
)

// boot answers POST /boot: the store's part, then the users a
// one-channel-first boot references, the gateway URL and the limits.
func (s *Server) boot(w http.ResponseWriter, r *http.Request, c *caller) error {
	var in parley.BootQuery
	if err := decode(r, &in, false); err != nil {
		return err
	}
	b, err := s.store.Boot(r.Context(), c.UserID, in)
	if err != nil {
		return err
	}
	if b.Channel != nil {
		b.Users = []parley.User{}
		if len(b.UserIDs) > 0 {
			users, err := s.dir.Users(r.Context(), b.Workspace.ID, b.UserIDs)
			if err != nil {
				return err
			}
			b.Users = append(b.Users, users...)
		}
	}
	b.WSURL = s.gatewayURL(r, b.Workspace.ID)
	limits := s.limits
	limits.RateLimits = s.rl.bootRates()
	limits.Workspace, limits.Features = parley.LimitsFor(r.Context(), b.Workspace.ID).Effective(s.wlimits.caps)
	b.Limits = &limits
	writeJSON(w, http.StatusOK, b)
	return nil
}

// gatewayURL is the WebSocket URL for a workspace's sessions: the one
// Config.WSURL picks, or else this server's own gateway path.
func (s *Server) gatewayURL(r *http.Request, workspaceID string) string {
	if s.wsURL != nil {
		if u := s.wsURL(workspaceID); u != "" {
			return u
		}
	}
	scheme := "ws"
	if s.isHTTPS(r) {
		scheme = "wss"
	}
	return scheme + "://" + r.Host + Prefix + "/gateway"
}

// bootLimits are the limits boot reports, from the server's settings;
// the rate limits are added per request (they follow the live
// configuration).
func bootLimits() parley.BootLimits {
	return parley.BootLimits{
		MaxMessageChars:  parley.MaxMessageLen,
		MaxBodyBytes:     MaxBodyBytes,
		MaxPageSize:      parley.MaxLimit,
		MaxGroupDMOthers: parley.MaxGroupDMOthers,
		MaxBatchUsers:    parley.MaxBatchUsers,
	}
}
