package sqlstore

import (
	"context"
	"fmt"

	"parley"
)

// Caps (parley.Caps) are checked inside the write that would pass them,
// after taking the lock of the row that every competing write takes too:
// the message row for reactions, the channel row for pins, the channel's
// stats row for members, the workspace row for channels and invites. On
// SQLite the single writer already serialises them; on PostgreSQL the lock
// makes the count exact, so concurrent writes cannot overshoot.

// capsFor returns the caps of a write about workspaceID: the store's, with
// the workspace's overrides from ctx's lookup (parley.WithLimitsLookup)
// applied. It is called before the write's transaction: the lookup may ask
// the directory, which must not hold a lock or a group-commit lane.
func (s *Store) capsFor(ctx context.Context, workspaceID string) parley.Caps {
	return parley.LimitsFor(ctx, workspaceID).Apply(s.caps)
}

func limitReached(format string, args ...any) error {
	return parley.Errorf(parley.ELIMIT, format, args...)
}

// checkReactionCap refuses a new distinct emoji on a message that already
// has the most allowed. The message row is locked (visibleMessage).
func (s *Store) checkReactionCap(ctx context.Context, tx *Tx, m *parley.Message, emoji string) error {
	var distinct, has int64
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(DISTINCT emoji), COALESCE(MAX(CASE WHEN emoji = $3 THEN 1 ELSE 0 END), 0)
		FROM reactions WHERE workspace_id = $1 AND message_id = $2`, m.WorkspaceID, m.ID, emoji).Scan(&distinct, &has); err != nil {
		return fmt.Errorf("count reactions: %w", err)
	}
	if has == 0 && distinct >= int64(s.caps.ReactionsPerMessage) {
		return limitReached("a message can have at most %d different reactions", s.caps.ReactionsPerMessage)
	}
	return nil
}

// checkPinCap refuses a new pin in a channel that already has the most
// allowed. It locks the channel row first: every pin of the channel does,
// whichever message it is about (and appending the pin's event would take
// the same lock anyway, after the message row's, so the order is unchanged).
func (s *Store) checkPinCap(ctx context.Context, tx *Tx, m *parley.Message) error {
	if err := lockChannelRow(ctx, tx, m.WorkspaceID, m.ChannelID); err != nil {
		return err
	}
	var pins, has int64
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(MAX(CASE WHEN message_id = $3 THEN 1 ELSE 0 END), 0)
		FROM pins WHERE workspace_id = $1 AND channel_id = $2`, m.WorkspaceID, m.ChannelID, m.ID).Scan(&pins, &has); err != nil {
		return fmt.Errorf("count pins: %w", err)
	}
	if has == 0 && pins >= int64(s.caps.PinsPerChannel) {
		return limitReached("a channel can have at most %d pinned messages", s.caps.PinsPerChannel)
	}
	return nil
}

// checkMemberCap refuses a private channel past its member cap. It runs
// after members were added (only then: a cap lowered below a channel's
// size must not refuse a no-op): ch.MemberCount then comes from the stats
// row each addition updated under its lock, so it is exact, and returning
// the error undoes the additions.
func (s *Store) checkMemberCap(ch *parley.Channel) error {
	if ch.Kind == parley.KindPrivate && ch.MemberCount > int64(s.caps.PrivateChannelMembers) {
		return limitReached("a private channel can have at most %d members", s.caps.PrivateChannelMembers)
	}
	return nil
}

// checkChannelCap refuses a new channel in a workspace that has the most
// active public and private channels allowed.
func checkChannelCap(ctx context.Context, tx *Tx, caps parley.Caps, workspaceID string) error {
	if err := lockWorkspaceRow(ctx, tx, workspaceID); err != nil {
		return err
	}
	var n int64
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM channels
		WHERE workspace_id = $1 AND dm_key IS NULL AND archived_at IS NULL`, workspaceID).Scan(&n); err != nil {
		return fmt.Errorf("count channels: %w", err)
	}
	if n >= int64(caps.ChannelsPerWorkspace) {
		return limitReached("a workspace can have at most %d active channels", caps.ChannelsPerWorkspace)
	}
	return nil
}

// checkInviteCap refuses a new invite in a workspace that has the most
// outstanding (live, not used up) invites allowed.
func checkInviteCap(ctx context.Context, tx *Tx, caps parley.Caps, workspaceID string) error {
	if err := lockWorkspaceRow(ctx, tx, workspaceID); err != nil {
		return err
	}
	var n int64
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM invites
		WHERE workspace_id = $1 AND expires_at > $2 AND (max_uses = 0 OR uses < max_uses)`,
		workspaceID, micros(tx.now)).Scan(&n); err != nil {
		return fmt.Errorf("count invites: %w", err)
	}
	if n >= int64(caps.InvitesPerWorkspace) {
		return limitReached("a workspace can have at most %d outstanding invites", caps.InvitesPerWorkspace)
	}
	return nil
}

// checkWorkspaceMemberCap refuses a workspace's new person past
// caps.WorkspaceMembers (0: no bound). It runs after the membership row
// was inserted, under the workspace row's lock that every other join's
// check takes too, so the count is exact; returning the error undoes the
// insert. Bots are not counted: they are the workspace's tools, not its
// people.
func checkWorkspaceMemberCap(ctx context.Context, tx *Tx, caps parley.Caps, workspaceID string) error {
	if caps.WorkspaceMembers <= 0 {
		return nil
	}
	if err := lockWorkspaceRow(ctx, tx, workspaceID); err != nil {
		return err
	}
	var n int64
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM workspace_members wm JOIN users u ON u.id = wm.user_id
		WHERE wm.workspace_id = $1 AND NOT u.is_bot`, workspaceID).Scan(&n); err != nil {
		return fmt.Errorf("count workspace members: %w", err)
	}
	if n > int64(caps.WorkspaceMembers) {
		return limitReached("a workspace can have at most %d members", caps.WorkspaceMembers)
	}
	return nil
}

// lockChannelRow takes a channel row's write lock with a no-op UPDATE that
// both dialects understand.
func lockChannelRow(ctx context.Context, tx *Tx, workspaceID, channelID string) error {
	if _, err := tx.ExecContext(ctx, `UPDATE channels SET last_seq = last_seq WHERE workspace_id = $1 AND id = $2`,
		workspaceID, channelID); err != nil {
		return fmt.Errorf("lock channel: %w", err)
	}
	return nil
}

// lockWorkspaceRow takes a workspace row's write lock likewise. It leaves
// the key alone, so on PostgreSQL it does not wait for the key-share locks
// that inserts referencing the workspace take: only other cap checks.
func lockWorkspaceRow(ctx context.Context, tx *Tx, workspaceID string) error {
	if _, err := tx.ExecContext(ctx, `UPDATE workspaces SET updated_at = updated_at WHERE id = $1`, workspaceID); err != nil {
		return fmt.Errorf("lock workspace: %w", err)
	}
	return nil
}
