package gateway

import (
	"context"
	"time"

	"parley"
)

// Presence is only for users a session may see. The rule is the
// directory's: the members of the session's workspace (guests see the
// whole directory too, so there is nothing narrower for them). It is a
// subset of what POST /users/batch answers (anyone sharing any workspace
// with the caller), which is enough because a session lives in one
// workspace and its client only shows that workspace's users. Ids outside
// it are dropped from a presence_sub without an error: the client gets no
// presence.changed for them, exactly as for an id that names nobody, so
// the answer tells it nothing the directory does not.

// userLookup finds the members of a workspace among ids. A UserDirectory
// (the query cache, from memory) is one; so is a store with WorkspaceUsers.
type userLookup interface {
	Users(ctx context.Context, workspaceID string, ids []string) ([]parley.User, error)
}

// storeMembers is what a Store offers when Config.Users is nil:
// *sqlstore.Store has it.
type storeMembers interface {
	WorkspaceUsers(ctx context.Context, workspaceID string, ids []string) ([]parley.User, error)
}

type storeLookup struct{ s storeMembers }

func (l storeLookup) Users(ctx context.Context, workspaceID string, ids []string) ([]parley.User, error) {
	return l.s.WorkspaceUsers(ctx, workspaceID, ids)
}

// newUserLookup picks where visibility is checked: the user directory, else
// the store, else nowhere (nil: presence_sub then watches nobody, which
// never leaks).
func newUserLookup(cfg *Config) userLookup {
	if cfg.Users != nil {
		return cfg.Users
	}
	if sm, ok := cfg.Store.(storeMembers); ok {
		return storeLookup{sm}
	}
	return nil
}

// visibleTimeout bounds the membership check of one presence_sub (a warm
// query cache answers from memory; a cold one loads the workspace).
const visibleTimeout = 2 * time.Second

// visibleUsers returns the ids among ids that s may see, in their order.
// When the check cannot be made, it returns none: presence fails closed.
func (g *Gateway) visibleUsers(s *session, ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	if g.users == nil {
		g.metrics.presenceHidden.Add(float64(len(ids)))
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), visibleTimeout)
	defer cancel()
	users, err := g.users.Users(ctx, s.workspaceID, ids)
	if err != nil {
		g.log.Warn("gateway presence_sub: membership check failed", "workspace_id", s.workspaceID, "err", err)
		g.metrics.presenceHidden.Add(float64(len(ids)))
		return nil
	}
	pending := make(map[string]bool, len(users)) // member ids not yet in out
	for i := range users {
		pending[users[i].ID] = true
	}
	out := make([]string, 0, len(users))
	hidden := 0
	for _, id := range ids {
		p, member := pending[id]
		switch {
		case !member:
			hidden++
		case p:
			out = append(out, id)
			pending[id] = false
		}
	}
	if hidden > 0 {
		g.metrics.presenceHidden.Add(float64(hidden))
	}
	return out
}
