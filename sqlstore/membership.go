package sqlstore

import (
	"context"
	"fmt"

	"parley"
)

// Channel creation and membership changes, shared by the channel, DM and
// workspace operations. Each keeps channel_stats.member_count in step in the
// same transaction and writes the matching durable event.

// newChannel describes a channel to insert.
type newChannel struct {
	workspaceID string
	name        string
	kind        parley.ChannelKind
	topic       string
	purpose     string
	creator     string
	dmKey       string   // dm and group_dm only
	members     []string // joined at creation, creator included
}

// userTopics are the user topics of members: where a channel's lifecycle
// events go besides the channel's own topic, so that sessions not yet
// following the channel (its creator, the members of a new DM or private
// channel) learn of it. A public channel's later lifecycle and membership
// events reach no one else: its members follow its topic, and the caches
// read the directory topic (parley.IsDirectoryEvent).
func userTopics(members []string) []string {
	topics := make([]string, len(members))
	for i, m := range members {
		topics[i] = parley.TopicUser(m)
	}
	return topics
}

// createChannel inserts the channel, its stats row and its first members,
// and appends channel.created (seq 1). Members start with everything read.
func (tx *Tx) createChannel(ctx context.Context, nc newChannel) (*parley.Channel, error) {
	prefix := parley.PrefixChannel
	if nc.kind.IsDM() {
		prefix = parley.PrefixDM
	}
	now := micros(tx.now)
	ch := &parley.Channel{
		ID:          parley.NewID(prefix),
		WorkspaceID: nc.workspaceID,
		Name:        nc.name,
		Kind:        nc.kind,
		Topic:       nc.topic,
		Purpose:     nc.purpose,
		CreatedBy:   nc.creator,
		MemberCount: int64(len(nc.members)),
		CreatedAt:   tx.now,
		UpdatedAt:   tx.now,
		IsMember:    true,
	}
	if nc.dmKey != "" {
		ch.DMUserIDs = splitDMKey(nc.dmKey)
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO channels (workspace_id, id, name, kind, topic, purpose, created_by, dm_key, last_seq, created_at, updated_at)
		 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, $9, $9)`,
		ch.WorkspaceID, ch.ID, ch.Name, string(ch.Kind), ch.Topic, ch.Purpose, ch.CreatedBy,
		nullString(nc.dmKey), now); err != nil {
		if isUniqueViolation(err) {
			return nil, parley.Errorf(parley.ECONFLICT, "a channel named %q already exists", nc.name)
		}
		return nil, fmt.Errorf("insert channel: %w", err)
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO channel_stats (workspace_id, channel_id, member_count) VALUES ($1, $2, $3)`,
		ch.WorkspaceID, ch.ID, len(nc.members)); err != nil {
		return nil, fmt.Errorf("insert channel stats: %w", err)
	}
	seq, err := tx.appendEvent(ctx, ch.WorkspaceID, ch.ID, parley.EventChannelCreated, func(seq int64) any {
		c := *ch
		c.LastSeq = seq
		c.IsMember, c.LastReadSeq = false, 0 // the payload is the same for every reader
		return parley.ChannelEventData{ChannelID: ch.ID, Seq: seq, Channel: &c, UserID: nc.creator}
	}, userTopics(nc.members)...)
	if err != nil {
		return nil, err
	}
	ch.LastSeq, ch.LastReadSeq = seq, seq
	for _, u := range nc.members {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO channel_members (workspace_id, channel_id, user_id, joined_at, last_read_seq)
			 VALUES ($1, $2, $3, $4, $5)`, ch.WorkspaceID, ch.ID, u, now, seq); err != nil {
			return nil, fmt.Errorf("insert channel member: %w", err)
		}
	}
	return ch, nil
}

// addMember makes userID a member of ch (no-op if already one), bumps the
// member count and appends member.joined. The new member's read marker is the
// join event's own seq: nothing is unread on join. actor is who added them
// (userID itself for a join). ch is updated in place.
func (tx *Tx) addMember(ctx context.Context, ch *parley.Channel, userID, actor string) (bool, error) {
	if added, err := tx.insertMember(ctx, ch, userID, 0); err != nil || !added {
		return false, err
	}
	topics := []string{parley.TopicUser(userID)}
	seq, err := tx.appendEvent(ctx, ch.WorkspaceID, ch.ID, parley.EventMemberJoined, func(seq int64) any {
		return parley.MemberEventData{ChannelID: ch.ID, Seq: seq, UserID: userID, ActorID: actorUnlessSelf(actor, userID), MemberCount: ch.MemberCount}
	}, topics...)
	if err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx,
		`UPDATE channel_members SET last_read_seq = $1,
		   read_ord = (SELECT msg_count FROM channels WHERE workspace_id = $2 AND id = $3)
		 WHERE workspace_id = $2 AND channel_id = $3 AND user_id = $4`,
		seq, ch.WorkspaceID, ch.ID, userID); err != nil {
		return false, fmt.Errorf("set read marker on join: %w", err)
	}
	ch.LastSeq = seq
	if userID == actor {
		ch.IsMember, ch.LastReadSeq = true, seq
	}
	return true, nil
}

// insertMember makes userID a member of ch with everything up to readSeq
// read, and counts them (ch.MemberCount is updated); false if they were a
// member already. It writes no event: addMember does, joinGeneral does not.
func (tx *Tx) insertMember(ctx context.Context, ch *parley.Channel, userID string, readSeq int64) (bool, error) {
	res, err := tx.ExecContext(ctx,
		`INSERT INTO channel_members (workspace_id, channel_id, user_id, joined_at, last_read_seq, read_ord)
		 VALUES ($1, $2, $3, $4, $5, (SELECT msg_count FROM channels WHERE workspace_id = $1 AND id = $2))
		 ON CONFLICT DO NOTHING`,
		ch.WorkspaceID, ch.ID, userID, micros(tx.now), readSeq)
	if err != nil {
		return false, fmt.Errorf("insert channel member: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	if err := tx.QueryRowContext(ctx,
		`UPDATE channel_stats SET member_count = member_count + 1
		 WHERE workspace_id = $1 AND channel_id = $2 RETURNING member_count`,
		ch.WorkspaceID, ch.ID).Scan(&ch.MemberCount); err != nil {
		return false, fmt.Errorf("count member: %w", err)
	}
	return true, nil
}

// removeMember ends userID's membership of ch (no-op if not a member),
// lowers the member count and appends member.left. The event also goes to
// the user's own topic so that their sessions stop following the channel.
func (tx *Tx) removeMember(ctx context.Context, ch *parley.Channel, userID, actor string) (bool, error) {
	res, err := tx.ExecContext(ctx,
		`DELETE FROM channel_members WHERE workspace_id = $1 AND channel_id = $2 AND user_id = $3`,
		ch.WorkspaceID, ch.ID, userID)
	if err != nil {
		return false, fmt.Errorf("delete channel member: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	if err := tx.clearMentions(ctx, ch.WorkspaceID, ch.ID, userID, -1); err != nil {
		return false, err
	}
	if err := tx.QueryRowContext(ctx,
		`UPDATE channel_stats SET member_count = member_count - 1
		 WHERE workspace_id = $1 AND channel_id = $2 RETURNING member_count`,
		ch.WorkspaceID, ch.ID).Scan(&ch.MemberCount); err != nil {
		return false, fmt.Errorf("uncount member: %w", err)
	}
	topics := []string{parley.TopicUser(userID)}
	seq, err := tx.appendEvent(ctx, ch.WorkspaceID, ch.ID, parley.EventMemberLeft, func(seq int64) any {
		return parley.MemberEventData{ChannelID: ch.ID, Seq: seq, UserID: userID, ActorID: actorUnlessSelf(actor, userID), MemberCount: ch.MemberCount}
	}, topics...)
	if err != nil {
		return false, err
	}
	ch.LastSeq = seq
	if userID == actor {
		ch.IsMember, ch.LastReadSeq = false, 0
	}
	return true, nil
}

func actorUnlessSelf(actor, userID string) string {
	if actor == userID {
		return ""
	}
	return actor
}
