package shardstore

import (
	"context"
	"fmt"

	"parley"
	"parley/storeguard"
)

// parley.Importer and parley.ImportFileStore over the shards (`parley
// import`, docs/import.md). A workspace imported for the first time is
// created as CreateWorkspace creates one: its slug checked on every shard,
// placed by the catalogue, written on its shard. Its history goes to that
// shard. The accounts of its users are the control database's (matched by
// email or created there, unable to log in until claimed by a signup,
// which runs on the control database), copied to the shard before they
// become members; the import's mapping of source ids is the workspace's,
// on its shard. Imports are not under the shards' guards: a batch of
// thousands of messages is slow by design, which a breaker would count
// against the shard.

var (
	_ parley.Importer        = (*Router)(nil)
	_ parley.ImportFileStore = (*Router)(nil)
)

// ImportWorkspace returns the workspace with that slug, wherever it is
// (every shard is asked: no shard answering, none is created), or creates
// it through CreateWorkspace.
func (r *Router) ImportWorkspace(ctx context.Context, ownerID, name, slug string) (*parley.Workspace, bool, error) {
	if err := parley.ValidateSlug(slug); err != nil {
		return nil, false, err
	}
	id, err := r.scatterFind(ctx, "workspace "+slug, func(ctx context.Context, p *pool) (string, error) {
		id, _, err := p.s.WorkspaceOwner(ctx, slug)
		return id, err
	})
	switch {
	case parley.ErrorCode(err) == parley.ENOTFOUND:
		w, err := r.CreateWorkspace(ctx, ownerID, name, slug)
		if err != nil {
			return nil, false, fmt.Errorf("create workspace %q: %w", slug, err)
		}
		return w, true, nil
	case err != nil:
		return nil, false, fmt.Errorf("find workspace %q: %w", slug, err)
	}
	p, err := r.routeWrite(ctx, id)
	if err != nil {
		return nil, false, err
	}
	// The shard's ImportWorkspace checks that ownerID owns it.
	return p.s.ImportWorkspace(ctx, ownerID, name, slug)
}

// ImportUsers finds or creates the accounts of the users not mapped yet on
// the control database, copies them to the workspace's shard, and there
// maps them and makes every user a member (the shard matches each new
// account's copy by its email).
func (r *Router) ImportUsers(ctx context.Context, workspaceID, source string, users []parley.ImportUser) ([]parley.ImportedUser, error) {
	p, err := r.routeWrite(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	if p == r.def {
		return p.s.ImportUsers(ctx, workspaceID, source, users)
	}
	exts := make([]string, len(users))
	for i, u := range users {
		exts[i] = u.ExtID
	}
	known, err := p.s.ImportedUserIDs(ctx, workspaceID, source, exts)
	if err != nil {
		return nil, err
	}
	var fresh []parley.ImportUser
	var at []int // fresh[i] is users[at[i]]
	for i, u := range users {
		if _, ok := known[u.ExtID]; !ok {
			fresh, at = append(fresh, u), append(at, i)
		}
	}
	accts, err := r.def.s.ImportAccounts(ctx, workspaceID, source, fresh)
	if err != nil {
		return nil, fmt.Errorf("import accounts on the control database: %w", err)
	}
	onShard := append([]parley.ImportUser(nil), users...)
	for i, a := range accts {
		if err := r.ensureUser(ctx, p, a.UserID); err != nil {
			return nil, err
		}
		onShard[at[i]].Email = a.Email
	}
	out, err := p.s.ImportUsers(ctx, workspaceID, source, onShard)
	if err != nil {
		return nil, err
	}
	for i, a := range accts {
		o := &out[at[i]]
		if o.UserID != a.UserID {
			return nil, fmt.Errorf("import user %s: shard %s mapped it to %s, not its account %s", o.ExtID, p.id, o.UserID, a.UserID)
		}
		o.Created, o.Matched = a.Created, !a.Created
	}
	return out, nil
}

func (r *Router) ImportChannel(ctx context.Context, workspaceID, source string, ch parley.ImportChannel) (*parley.ImportedChannel, error) {
	p, err := r.routeWrite(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	return p.s.ImportChannel(ctx, workspaceID, source, ch)
}

func (r *Router) ImportMessages(ctx context.Context, workspaceID, source, channelID string, msgs []parley.ImportMessage) (*parley.ImportBatchResult, error) {
	p, err := r.routeWrite(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	return p.s.ImportMessages(ctx, workspaceID, source, channelID, msgs)
}

func (r *Router) ImportedMessages(ctx context.Context, workspaceID, source, channelID string) (map[string]bool, error) {
	p, _, err := r.route(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	return p.s.ImportedMessages(ctx, workspaceID, source, channelID)
}

func (r *Router) PendingImportFiles(ctx context.Context, workspaceID, afterMessage string, afterPosition, limit int) ([]parley.PendingImportFile, error) {
	p, _, err := r.route(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	return guarded(ctx, p, storeguard.Read, func(ctx context.Context) ([]parley.PendingImportFile, error) {
		return p.s.PendingImportFiles(ctx, workspaceID, afterMessage, afterPosition, limit)
	})
}

func (r *Router) AttachImportedFile(ctx context.Context, workspaceID string, pf parley.PendingImportFile, f parley.File, q parley.FileQuota) (*parley.File, error) {
	p, err := r.routeWrite(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	return guarded(ctx, p, storeguard.Write, func(ctx context.Context) (*parley.File, error) {
		return p.s.AttachImportedFile(ctx, workspaceID, pf, f, q)
	})
}
