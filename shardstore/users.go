package shardstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"parley"
	"parley/storeguard"
)

// Accounts and sessions: the control database (the default shard) is
// their truth. A user's row is copied to a shard when they first join a
// workspace there (CreateWorkspace, AcceptInvite), because the shard's
// memberships refer to it; a profile, status or deactivation change is
// made on the default shard first and then on every other shard, where a
// shard without the user's copy answers ENOTFOUND and is skipped. Each
// shard's call tells that shard's workspaces (user.updated…), so every
// workspace hears the change once.

// ensureUser copies userID's row from the control database to p's shard
// if it is not there yet.
func (r *Router) ensureUser(ctx context.Context, p *pool, userID string) error {
	if p == r.def {
		return nil
	}
	key := p.id + "/" + userID
	if _, ok := r.copies.Load(key); ok {
		return nil
	}
	err := p.g.Run(ctx, storeguard.Write, func(ctx context.Context) error {
		has, err := p.s.HasUser(ctx, userID)
		if err != nil || has {
			return err
		}
		var u, uerr = r.def.s.ReadUserCopy(ctx, userID)
		if uerr != nil {
			return uerr
		}
		r.m.userCopies.WithLabelValues(p.id).Inc()
		return p.s.PutUserCopy(ctx, u)
	})
	if err != nil {
		return fmt.Errorf("copy user %s to shard %s: %w", userID, p.id, err)
	}
	r.copies.Store(key, struct{}{})
	return nil
}

// everywhere makes a user change on the default shard, then on every other
// shard holding a copy of the user. The default shard's answer is the
// call's; another shard that fails is logged and counted (its copy is
// stale until the next change reaches it).
func (r *Router) everywhere(ctx context.Context, op string, fn func(context.Context, *pool) (*parley.User, error)) (*parley.User, error) {
	u, err := fn(ctx, r.def)
	if err != nil {
		return nil, err
	}
	r.others(ctx, op, func(ctx context.Context, p *pool) error {
		_, err := fn(ctx, p)
		return err
	})
	return u, nil
}

// others runs fn on every shard but the default, at once; ENOTFOUND (no
// copy of the user there) is no failure.
func (r *Router) others(ctx context.Context, op string, fn func(context.Context, *pool) error) {
	ps, failed := r.allPools(ctx)
	errs := make([]error, len(ps))
	done := make(chan struct{}, len(ps))
	for i, p := range ps[1:] {
		go func() {
			errs[i+1] = fn(ctx, p)
			done <- struct{}{}
		}()
	}
	for range ps[1:] {
		<-done
	}
	for i, err := range errs {
		if err != nil && parley.ErrorCode(err) != parley.ENOTFOUND {
			failed = append(failed, ps[i].id)
			r.log.Warn("user change not made on a shard", "op", op, "shard", ps[i].id, "err", err)
		}
	}
	for _, id := range failed {
		r.m.userSyncFailures.WithLabelValues(id).Inc()
		r.repairLater(id, userOf(ctx))
	}
}

// userKey carries the user a change made everywhere is about, for
// repairLater.
type userKey struct{}

func withUser(ctx context.Context, userID string) context.Context {
	return context.WithValue(ctx, userKey{}, userID)
}

func userOf(ctx context.Context) string {
	id, _ := ctx.Value(userKey{}).(string)
	return id
}

// repairLater brings a shard's copy of a user's row up to date from the
// control database after a change could not be made there: retried with
// backoff (1 s doubling, for about ten minutes) until the shard answers.
// Only an existing copy is updated. The workspaces of that shard do not
// get the change's event, only the right row.
func (r *Router) repairLater(shardID, userID string) {
	if userID == "" {
		return
	}
	r.later("repair "+shardID+"/"+userID, func(ctx context.Context) error {
		err := r.repair(ctx, shardID, userID)
		if err != nil {
			r.log.Debug("user copy not repaired yet", "shard", shardID, "user", userID, "err", err)
			return err
		}
		r.m.userRepairs.WithLabelValues(shardID).Inc()
		return nil
	}, func() { r.log.Warn("user copy left stale", "shard", shardID, "user", userID) })
}

func (r *Router) repair(ctx context.Context, shardID, userID string) error {
	p, err := r.poolByID(ctx, shardID)
	if err != nil {
		return err
	}
	return p.g.Run(ctx, storeguard.Write, func(ctx context.Context) error {
		has, err := p.s.HasUser(ctx, userID)
		if err != nil || !has {
			return err
		}
		u, err := r.def.s.ReadUserCopy(ctx, userID)
		if err != nil {
			return err
		}
		return p.s.PutUserCopy(ctx, u)
	})
}

// CreateUser signs up on the control database. A signup may claim an
// account an import created (docs/import.md, "Users and claims"), whose
// copies on the shards of the imported workspaces are then brought up to
// date (active, the signup's handle and name); a new account has no copy,
// and each shard says so.
func (r *Router) CreateUser(ctx context.Context, nu parley.NewUser) (*parley.User, error) {
	u, err := r.def.g.CreateUser(ctx, nu)
	if err != nil {
		return nil, err
	}
	r.others(withUser(ctx, u.ID), "claim imported account", func(ctx context.Context, p *pool) error {
		return r.repair(ctx, p.id, u.ID)
	})
	return u, nil
}

func (r *Router) UserCredentials(ctx context.Context, email string) (*parley.User, string, error) {
	return r.def.g.UserCredentials(ctx, email)
}

func (r *Router) CreateSession(ctx context.Context, s parley.Session) error {
	return r.def.g.CreateSession(ctx, s)
}

func (r *Router) SessionByToken(ctx context.Context, tokenHash string) (*parley.Session, error) {
	return r.def.g.SessionByToken(ctx, tokenHash)
}

func (r *Router) RevokeSession(ctx context.Context, tokenHash string) error {
	return r.def.g.RevokeSession(ctx, tokenHash)
}

func (r *Router) GetMe(ctx context.Context, actor string) (*parley.User, error) {
	return r.def.g.GetMe(ctx, actor)
}

func (r *Router) UpdateMe(ctx context.Context, actor string, p parley.UserPatch) (*parley.User, error) {
	return r.everywhere(withUser(ctx, actor), "update me", func(ctx context.Context, s *pool) (*parley.User, error) {
		return s.g.UpdateMe(ctx, actor, p)
	})
}

func (r *Router) SetStatus(ctx context.Context, actor string, st parley.Status) (*parley.User, error) {
	return r.everywhere(withUser(ctx, actor), "set status", func(ctx context.Context, s *pool) (*parley.User, error) {
		return s.g.SetStatus(ctx, actor, st)
	})
}

// UsersBatch asks every shard for the users among ids who share one of
// its workspaces with actor, and merges the answers in the order of ids.
func (r *Router) UsersBatch(ctx context.Context, actor string, ids []string) ([]parley.User, error) {
	if len(ids) > parley.MaxBatchUsers {
		return nil, parley.Errorf(parley.EINVALID, "at most %d user ids per batch", parley.MaxBatchUsers)
	}
	parts, err := each(r, ctx, "users batch", func(ctx context.Context, p *pool) ([]parley.User, error) {
		return p.g.UsersBatch(ctx, actor, ids)
	})
	if err != nil {
		return nil, err
	}
	found := map[string]parley.User{}
	for _, part := range parts { // the default shard's copy first
		for _, u := range part {
			if _, ok := found[u.ID]; !ok {
				found[u.ID] = u
			}
		}
	}
	out := []parley.User{}
	for _, id := range ids {
		if u, ok := found[id]; ok {
			out = append(out, u)
			delete(found, id)
		}
	}
	return out, nil
}

func (r *Router) ListWorkspaceUsers(ctx context.Context, actor, workspaceID string, q parley.UserQuery) (*parley.UserPage, error) {
	p, _, err := r.route(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	return p.g.ListWorkspaceUsers(ctx, actor, workspaceID, q)
}

// ListWorkspaces merges every shard's list of actor's workspaces, by name
// then id as one database orders them. A shard that does not answer is
// left out (counted in parley_shardstore_partial_total).
func (r *Router) ListWorkspaces(ctx context.Context, actor string) ([]parley.Workspace, error) {
	parts, err := each(r, ctx, "list workspaces", func(ctx context.Context, p *pool) ([]parley.Workspace, error) {
		return p.g.ListWorkspaces(ctx, actor)
	})
	if err != nil {
		return nil, err
	}
	out := []parley.Workspace{}
	seen := map[string]bool{}
	for _, part := range parts {
		for _, w := range part {
			if !seen[w.ID] { // a workspace mid-move is on two shards
				seen[w.ID] = true
				out = append(out, w)
			}
		}
	}
	slices.SortFunc(out, func(a, b parley.Workspace) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// DeactivateUser is authorised on the workspace's shard, then made on
// every other shard (the control database's sessions revoked).
func (r *Router) DeactivateUser(ctx context.Context, actor, workspaceID, userID string) (*parley.User, error) {
	return r.setDeactivated(ctx, actor, workspaceID, userID, true)
}

func (r *Router) ReactivateUser(ctx context.Context, actor, workspaceID, userID string) (*parley.User, error) {
	return r.setDeactivated(ctx, actor, workspaceID, userID, false)
}

func (r *Router) setDeactivated(ctx context.Context, actor, workspaceID, userID string, deactivated bool) (*parley.User, error) {
	p, err := r.routeWrite(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	if err := r.checkAccountAdmin(ctx, p, actor, userID); err != nil {
		return nil, err
	}
	var u *parley.User
	if deactivated {
		u, err = p.g.DeactivateUser(ctx, actor, workspaceID, userID)
	} else {
		u, err = p.g.ReactivateUser(ctx, actor, workspaceID, userID)
	}
	if err != nil {
		return nil, err
	}
	if err := r.syncDeactivated(ctx, p, userID, deactivated); err != nil {
		return nil, err
	}
	return u, nil
}

// checkAccountAdmin does, for the user's workspaces on the shards other
// than p's, what the shard's own check does for its workspaces: an account
// is the server's, so actor must outrank the user in every workspace the
// user is in.
func (r *Router) checkAccountAdmin(ctx context.Context, p *pool, actor, userID string) error {
	theirs, err := r.ListWorkspaces(ctx, userID)
	if err != nil {
		return err
	}
	mine, err := r.ListWorkspaces(ctx, actor)
	if err != nil {
		return err
	}
	roles := map[string]parley.Role{}
	for _, w := range mine {
		roles[w.ID] = w.Role
	}
	for _, w := range theirs {
		if q, _, err := r.route(ctx, w.ID); err != nil || q == p {
			continue // p's shard checks its own
		}
		if w.Role == parley.RoleOwner {
			return parley.Errorf(parley.EFORBIDDEN, "a workspace owner cannot be deactivated; transfer the ownership first")
		}
		if !roles[w.ID].Outranks(w.Role) {
			return parley.Errorf(parley.EFORBIDDEN,
				"the account is also in a workspace you do not administer; ask the server operator")
		}
	}
	return nil
}

// syncDeactivated makes a deactivation, done on done's shard, on every
// other shard, the control database first: its sessions are the ones that
// matter.
func (r *Router) syncDeactivated(ctx context.Context, done *pool, userID string, deactivated bool) error {
	sync := func(ctx context.Context, p *pool) error {
		if p == done {
			return nil
		}
		return p.g.Run(ctx, storeguard.Write, func(ctx context.Context) error {
			_, err := p.s.SyncDeactivated(ctx, userID, deactivated)
			return err
		})
	}
	if err := sync(ctx, r.def); err != nil {
		// The sessions live there: the caller must hear it failed (made
		// again, the workspace's shard has nothing left to do and this
		// step runs again).
		r.m.userSyncFailures.WithLabelValues(r.def.id).Inc()
		r.log.Error("deactivation not made in the control database", "user", userID, "err", err)
		return fmt.Errorf("deactivation in the control database: %w", err)
	}
	r.others(withUser(ctx, userID), "sync deactivated", sync)
	return nil
}

// OperatorSetDeactivated refuses to deactivate the owner of a workspace on
// any shard, then makes the change everywhere.
func (r *Router) OperatorSetDeactivated(ctx context.Context, userID string, deactivated bool) (*parley.User, error) {
	if deactivated {
		ws, err := each(r, ctx, "operator deactivate", func(ctx context.Context, p *pool) ([]parley.Workspace, error) {
			return p.g.ListWorkspaces(ctx, userID)
		})
		if err != nil {
			return nil, err
		}
		for _, part := range ws {
			for _, w := range part {
				if w.Role == parley.RoleOwner {
					return nil, parley.Errorf(parley.EFORBIDDEN, "a workspace owner cannot be deactivated; transfer the ownership first")
				}
			}
		}
	}
	u, err := r.def.g.OperatorSetDeactivated(ctx, userID, deactivated)
	if err != nil {
		return nil, err
	}
	if err := r.syncDeactivated(ctx, r.def, userID, deactivated); err != nil {
		return nil, err
	}
	return u, nil
}
