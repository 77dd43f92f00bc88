package shardstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"parley"
	"parley/storeguard"
)

// parley.NotifyStore over the shards (docs/email.md, docs/directory.md
// "Store routing"). A user's preference and notifier state (the send claim,
// when the last email went) are account rows: the control database's, so
// that one node at a time emails a user however many shards hold their
// workspaces. What is unread lives with each workspace: its mentions, DM
// channels and notify_sent rows (how far emails covered each channel) are
// on its shard. A shard that does not answer is left out of a scan (counted
// as a partial answer); its items stay unmarked and go in a later email.

var _ parley.NotifyStore = (*Router)(nil)

func (r *Router) NotifyPrefs(ctx context.Context, userID string) (parley.NotifyPrefs, error) {
	return guarded(ctx, r.def, storeguard.Read, func(ctx context.Context) (parley.NotifyPrefs, error) {
		return r.def.s.NotifyPrefs(ctx, userID)
	})
}

func (r *Router) SetNotifyPrefs(ctx context.Context, userID string, p parley.NotifyPrefs) (parley.NotifyPrefs, error) {
	return guarded(ctx, r.def, storeguard.Write, func(ctx context.Context) (parley.NotifyPrefs, error) {
		return r.def.s.SetNotifyPrefs(ctx, userID, p)
	})
}

// notifyPage is how many pending user ids one query to a shard returns.
const notifyPage = 1000

// NotifyRecipients asks every shard which users have something pending
// there (all of them, by pages: a limit per shard would let the same users,
// not due yet, hide the others), then the control database for those who
// want email, emailed longest ago first, at most limit.
func (r *Router) NotifyRecipients(ctx context.Context, limit int) ([]parley.NotifyRecipient, error) {
	parts, err := each(r, ctx, "notify recipients", func(ctx context.Context, p *pool) ([]string, error) {
		var ids []string
		after := ""
		for {
			page, err := guarded(ctx, p, storeguard.Read, func(ctx context.Context) ([]string, error) {
				return p.s.NotifyPending(ctx, after, notifyPage)
			})
			if err != nil {
				return nil, fmt.Errorf("pending notifications on shard %s: %w", p.id, err)
			}
			ids = append(ids, page...)
			if len(page) < notifyPage {
				return ids, nil
			}
			after = page[len(page)-1]
		}
	})
	if err != nil {
		return nil, err
	}
	ids := slices.Concat(parts...)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) == 0 {
		return nil, nil
	}
	return guarded(ctx, r.def, storeguard.Read, func(ctx context.Context) ([]parley.NotifyRecipient, error) {
		return r.def.s.NotifyRecipientsOf(ctx, ids, limit)
	})
}

// MissedItems merges every shard's items, oldest first, at most limit. An
// item found on two shards (a workspace between the copy and the clean-up
// of a move) is one.
func (r *Router) MissedItems(ctx context.Context, userID string, limit int) ([]parley.MissedItem, error) {
	parts, err := each(r, ctx, "missed items", func(ctx context.Context, p *pool) ([]parley.MissedItem, error) {
		return guarded(ctx, p, storeguard.Read, func(ctx context.Context) ([]parley.MissedItem, error) {
			return p.s.MissedItems(ctx, userID, limit)
		})
	})
	if err != nil {
		return nil, err
	}
	type key struct {
		ch  string
		seq int64
	}
	seen := map[key]int{}
	var out []parley.MissedItem
	for _, part := range parts {
		for _, it := range part {
			k := key{it.ChannelID, it.Seq}
			if i, ok := seen[k]; ok {
				out[i].Mention = out[i].Mention || it.Mention
				continue
			}
			seen[k] = len(out)
			out = append(out, it)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// ClaimNotify takes the user's claim on the control database: one sender
// per user in the cluster.
func (r *Router) ClaimNotify(ctx context.Context, userID, node string, now, until time.Time) (bool, time.Time, error) {
	var ok bool
	var last time.Time
	err := r.def.g.Run(ctx, storeguard.Write, func(ctx context.Context) (err error) {
		ok, last, err = r.def.s.ClaimNotify(ctx, userID, node, now, until)
		return err
	})
	return ok, last, err
}

// NotifySent marks each item on its workspace's shard (one transaction per
// shard), then records the email and releases the claim on the control
// database, whatever the shards said: the email went. A shard that failed
// keeps its items unmarked, and they go again in a later email (at least
// once, as when the notifier's own record is lost).
func (r *Router) NotifySent(ctx context.Context, userID, node string, items []parley.MissedItem, sentAt time.Time) error {
	byPool := map[*pool][]parley.MissedItem{}
	owner := map[string]*pool{} // workspace id -> its shard's pool
	var errs []error
	for _, it := range items {
		p, ok := owner[it.WorkspaceID]
		if !ok {
			var err error
			// Not routeWrite: a read-only window refuses users' writes,
			// and this is the record of an email already sent.
			p, _, err = r.route(ctx, it.WorkspaceID)
			if err != nil {
				errs = append(errs, fmt.Errorf("notify sent: workspace %s: %w", it.WorkspaceID, err))
			}
			owner[it.WorkspaceID] = p
		}
		if p != nil {
			byPool[p] = append(byPool[p], it)
		}
	}
	for p, its := range byPool {
		if p == r.def {
			continue // with the state, below
		}
		if err := p.g.Run(ctx, storeguard.Write, func(ctx context.Context) error {
			return p.s.MarkNotified(ctx, userID, its)
		}); err != nil {
			errs = append(errs, fmt.Errorf("notify sent on shard %s: %w", p.id, err))
		}
	}
	if err := r.def.g.Run(ctx, storeguard.Write, func(ctx context.Context) error {
		return r.def.s.NotifySent(ctx, userID, node, byPool[r.def], sentAt)
	}); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (r *Router) ReleaseNotify(ctx context.Context, userID, node string) error {
	return r.def.g.Run(ctx, storeguard.Write, func(ctx context.Context) error {
		return r.def.s.ReleaseNotify(ctx, userID, node)
	})
}
