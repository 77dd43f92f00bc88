package main

import (
	"context"
	"sync"

	"parley"
	"parley/gateway"
	"parley/sqlstore"
)

// storeUsers is the gateway's user directory (just-in-time users) read from
// the store, for when no query cache serves it: users by id through
// WorkspaceUsers, handles through the workspace directory listing.
//
// The listing needs a member of the workspace to act as; the gateway looks
// up a message's author by id before it looks up the handles the message
// mentions, so the last member found by id in each workspace is remembered
// for that.
type storeUsers struct {
	store *sqlstore.Store

	mu     sync.Mutex
	member map[string]string // workspace → a member found by Users; guarded by mu
}

var _ gateway.UserDirectory = (*storeUsers)(nil)

// maxRemembered bounds storeUsers.member; past it the map starts over.
const maxRemembered = 10_000

func newStoreUsers(s *sqlstore.Store) *storeUsers {
	return &storeUsers{store: s, member: map[string]string{}}
}

func (d *storeUsers) Users(ctx context.Context, workspaceID string, ids []string) ([]parley.User, error) {
	users, err := d.store.WorkspaceUsers(ctx, workspaceID, ids)
	if err == nil && len(users) > 0 {
		d.mu.Lock()
		if len(d.member) >= maxRemembered {
			clear(d.member)
		}
		d.member[workspaceID] = users[0].ID
		d.mu.Unlock()
	}
	return users, err
}

func (d *storeUsers) UsersByHandle(ctx context.Context, workspaceID string, handles []string) ([]parley.User, error) {
	d.mu.Lock()
	actor := d.member[workspaceID]
	d.mu.Unlock()
	if actor == "" {
		return nil, nil
	}
	var out []parley.User
	for _, h := range handles {
		// The listing matches a prefix of the handle or of the name, in
		// handle order: the exact handle, if any, is on the first pages.
		q := parley.UserQuery{Q: h, Limit: parley.MaxLimit}
		for range 3 {
			page, err := d.store.ListWorkspaceUsers(ctx, actor, workspaceID, q)
			if err != nil {
				return out, err
			}
			found, past := false, false
			for _, u := range page.Users {
				if u.Handle == h {
					out = append(out, u)
					found = true
				}
				past = past || u.Handle > h
			}
			if found || past || page.NextCursor == "" {
				break
			}
			q.Cursor = page.NextCursor
		}
	}
	return out, nil
}

// userDirectory is what the gateway resolves message users with: the
// query cache once it has both lookups (Users and UsersByHandle), else the
// store. The check is at run time so that either side can land first.
func (n *node) userDirectory() gateway.UserDirectory {
	if n.cache != nil {
		if d, ok := any(n.cache).(gateway.UserDirectory); ok {
			n.log.Info("gateway: just-in-time users from the query cache")
			return d
		}
	}
	n.log.Info("gateway: just-in-time users from the store")
	return newStoreUsers(n.store)
}
