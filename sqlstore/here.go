package sqlstore

import (
	"context"
	"fmt"
	"slices"

	"parley"
)

// @here reaches only the members who are active when the message is
// written (parley.PresenceSnapshot): the write asks the snapshot about the
// channel's other members (in a thread, its followers) and records a
// mention, and sends a mention event, for those it names active, besides
// any members named by @handle. @channel and @everyone reach every member
// regardless, and win when the text has both.
//
// Without a snapshot source (tools, tests without presence, a node before
// its gateway starts) @here reaches every member as @channel does: of the
// two ways to be wrong, an extra notification is cheaper than a missed
// one, and it is what every deployment did before presence was consulted.

// presenceHolder holds the store's snapshot source; cmd/parley sets it once
// the presence tracker exists, which is after the store opens.
type presenceHolder struct{ p parley.PresenceSnapshot }

// SetPresence sets (or, with nil, clears) the source @here asks who is
// active. Safe to call while the store serves writes.
func (s *Store) SetPresence(p parley.PresenceSnapshot) {
	if p == nil {
		s.presence.Store(nil)
		return
	}
	s.presence.Store(&presenceHolder{p})
}

// hereFilter returns the active subset of ids, or ids unchanged when no
// snapshot source is set.
type hereFilter func(ctx context.Context, ids []string) []string

// here returns the store's @here filter as of now.
func (s *Store) here() hereFilter {
	h := s.presence.Load()
	if h == nil {
		return func(_ context.Context, ids []string) []string { return ids }
	}
	return func(ctx context.Context, ids []string) []string {
		if len(ids) == 0 {
			return nil
		}
		return h.p.ActiveUsers(ctx, ids)
	}
}

// mentionScope is what a message's text mentions.
type mentionScope struct {
	all     bool     // @channel or @everyone: every member
	here    bool     // @here (without @channel or @everyone): the active members
	handles []string // named @handles, at most maxMentionHandles
}

// broadcast reports whether the text has any broadcast mention.
func (ms mentionScope) broadcast() bool { return ms.all || ms.here }

// scopeOf reads the mentions of text.
func scopeOf(text string) mentionScope {
	var ms mentionScope
	for _, h := range parley.Mentions(text) {
		switch {
		case h == parley.MentionHere:
			ms.here = true
		case parley.IsBroadcastMention(h):
			ms.all = true
		case len(ms.handles) < maxMentionHandles:
			ms.handles = append(ms.handles, h)
		}
	}
	if ms.all {
		ms.here = false
	}
	return ms
}

// hereChunk bounds the ids bound in one statement (SQLite allows 32766
// parameters, PostgreSQL 65535).
const hereChunk = 500

// recordHere records the mentions of a message with @here: the channel's
// other members that the snapshot says are active, and the members named by
// handle. It returns their ids.
func (tx *Tx) recordHere(ctx context.Context, m *parley.Message, handles []string, here hereFilter) ([]string, error) {
	members, err := queryIDs(ctx, tx,
		`SELECT user_id FROM channel_members WHERE workspace_id = $1 AND channel_id = $2 AND user_id <> $3`,
		m.WorkspaceID, m.ChannelID, m.UserID)
	if err != nil {
		return nil, fmt.Errorf("record here mention: %w", err)
	}
	named, err := tx.namedMembers(ctx, m.WorkspaceID, m.ChannelID, m.UserID, handles)
	if err != nil {
		return nil, err
	}
	ids := dedupe(slices.Concat(here(ctx, members), named), "")
	var out []string
	for len(ids) > 0 {
		part := ids[:min(len(ids), hereChunk)]
		ids = ids[len(part):]
		args := make([]any, 0, len(part)+4)
		args = append(args, m.WorkspaceID, m.ChannelID, m.UserID, m.Seq)
		for _, id := range part {
			args = append(args, id)
		}
		// Re-checked against channel_members: the snapshot may name
		// anyone it was asked about, and nobody else.
		got, err := queryIDs(ctx, tx,
			`INSERT INTO mentions (workspace_id, user_id, channel_id, seq)
			 SELECT workspace_id, user_id, channel_id, $4 FROM channel_members
			 WHERE workspace_id = $1 AND channel_id = $2 AND user_id <> $3
			   AND user_id IN (`+inClause(5, len(part))+`)
			 RETURNING user_id`, args...)
		if err != nil {
			return nil, fmt.Errorf("record here mention: %w", err)
		}
		out = append(out, got...)
	}
	return out, nil
}

// namedMembers returns the ids of the channel's members, author excepted,
// whose handles are among handles.
func (tx *Tx) namedMembers(ctx context.Context, workspaceID, channelID, authorID string, handles []string) ([]string, error) {
	if len(handles) == 0 {
		return nil, nil
	}
	n := padded(len(handles))
	args := make([]any, 0, n+3)
	args = append(args, workspaceID, channelID, authorID)
	for i := range n { // repeats are harmless in IN (…)
		args = append(args, handles[min(i, len(handles)-1)])
	}
	ids, err := queryIDs(ctx, tx,
		`SELECT cm.user_id FROM users u JOIN channel_members cm ON cm.user_id = u.id
		 WHERE cm.workspace_id = $1 AND cm.channel_id = $2 AND cm.user_id <> $3
		   AND u.handle IN (`+inClause(4, n)+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("mentioned members: %w", err)
	}
	return ids, nil
}

// activeFollowers returns those of a thread's followers who would count
// this reply (following, able to see it, not its author) and whom the
// snapshot says are active: @here in a thread.
func (tx *Tx) activeFollowers(ctx context.Context, m *parley.Message, rootID string, here hereFilter) ([]string, error) {
	ids, err := queryIDs(ctx, tx,
		`SELECT tm.user_id FROM thread_memberships tm
		 JOIN channels c ON c.workspace_id = tm.workspace_id AND c.id = tm.channel_id
		 WHERE tm.workspace_id = $1 AND tm.root_id = $2 AND tm.following = 1 AND tm.user_id <> $3
		   AND `+followerVisible,
		m.WorkspaceID, rootID, m.UserID)
	if err != nil {
		return nil, fmt.Errorf("thread followers for here: %w", err)
	}
	return here(ctx, ids), nil
}
