package sqlstore

import (
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"parley"
)

// Times are stored as unix microseconds.

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func nullMicros(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMicro(), Valid: true}
}

func timePtr(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromMicros(n.Int64)
	return &t
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

type scanner interface{ Scan(dest ...any) error }

// userColumns and scanUser read a parley.User (without email). Use with
// "SELECT " + userColumns + " FROM users u".
const userColumns = `u.id, u.handle, u.name, u.title, u.avatar_hash, u.status_emoji, u.status_text,
	u.status_expires_at, u.deactivated_at, u.created_at, u.updated_at, u.is_bot`

func scanUser(sc scanner, now time.Time) (*parley.User, error) {
	var u parley.User
	var emoji, text string
	var expires, deactivated sql.NullInt64
	var created, updated int64
	if err := sc.Scan(&u.ID, &u.Handle, &u.Name, &u.Title, &u.AvatarHash, &emoji, &text,
		&expires, &deactivated, &created, &updated, &u.IsBot); err != nil {
		return nil, err
	}
	// An expired status reads as no status; nothing needs to clear it.
	if (emoji != "" || text != "") && (!expires.Valid || expires.Int64 > now.UnixMicro()) {
		u.Status = &parley.Status{Emoji: emoji, Text: text, ExpiresAt: timePtr(expires)}
	}
	u.Deactivated = deactivated.Valid
	u.CreatedAt, u.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &u, nil
}

// channelColumns and scanChannel read a parley.Channel with its member count
// and the caller's membership. Use with
//
//	"SELECT " + channelColumns + " FROM channels c
//	   JOIN channel_stats st ON st.workspace_id = c.workspace_id AND st.channel_id = c.id
//	   LEFT JOIN channel_members m ON m.workspace_id = c.workspace_id
//	     AND m.channel_id = c.id AND m.user_id = $1"
//
// (see channelFrom).
const channelColumns = `c.id, c.workspace_id, c.name, c.kind, c.topic, c.purpose, c.created_by, c.dm_key,
	c.last_seq, c.created_at, c.updated_at, c.archived_at, st.member_count, m.user_id, m.last_read_seq,
	c.slow_mode_seconds, c.post_limit_per_minute`

// channelFrom is the FROM clause that goes with channelColumns; $1 is the
// caller's user id.
const channelFrom = ` FROM channels c
	JOIN channel_stats st ON st.workspace_id = c.workspace_id AND st.channel_id = c.id
	LEFT JOIN channel_members m ON m.workspace_id = c.workspace_id AND m.channel_id = c.id AND m.user_id = $1`

func scanChannel(sc scanner) (*parley.Channel, error) {
	var c parley.Channel
	var kind string
	var dmKey, memberID sql.NullString
	var lastRead sql.NullInt64
	var created, updated int64
	var archived sql.NullInt64
	if err := sc.Scan(&c.ID, &c.WorkspaceID, &c.Name, &kind, &c.Topic, &c.Purpose, &c.CreatedBy, &dmKey,
		&c.LastSeq, &created, &updated, &archived, &c.MemberCount, &memberID, &lastRead,
		&c.SlowModeSeconds, &c.PostLimitPerMinute); err != nil {
		return nil, err
	}
	c.Kind = parley.ChannelKind(kind)
	if dmKey.Valid {
		c.DMUserIDs = splitDMKey(dmKey.String)
	}
	c.CreatedAt, c.UpdatedAt, c.ArchivedAt = fromMicros(created), fromMicros(updated), timePtr(archived)
	c.IsMember = memberID.Valid
	c.LastReadSeq = lastRead.Int64
	return &c, nil
}

// messageColumns and scanMessage read a parley.Message without reactions or
// pin state (see decorateMessages). Use with "FROM messages msg".
const messageColumns = `msg.id, msg.workspace_id, msg.channel_id, msg.seq, msg.user_id, msg.text, msg.client_msg_id,
	msg.thread_root_id, msg.reply_count, msg.last_reply_at, msg.created_at, msg.edited_at, msg.deleted_at, msg.files, msg.bot_profile`

func scanMessage(sc scanner) (*parley.Message, bool, error) {
	var m parley.Message
	var clientID, root, files, profile sql.NullString
	var lastReply, edited, deleted sql.NullInt64
	var created int64
	if err := sc.Scan(&m.ID, &m.WorkspaceID, &m.ChannelID, &m.Seq, &m.UserID, &m.Text, &clientID,
		&root, &m.ReplyCount, &lastReply, &created, &edited, &deleted, &files, &profile); err != nil {
		return nil, false, err
	}
	if profile.Valid && profile.String != "" { // a bot's name and icon (botprofile.go)
		if err := json.Unmarshal([]byte(profile.String), &m.BotProfile); err != nil {
			return nil, false, fmt.Errorf("message %s: bot_profile: %w", m.ID, err)
		}
	}
	if files.Valid && files.String != "" { // the attachments, as posted (files.go)
		if err := json.Unmarshal([]byte(files.String), &m.Files); err != nil {
			return nil, false, fmt.Errorf("message %s: files: %w", m.ID, err)
		}
	}
	m.ClientMsgID, m.ThreadRootID = clientID.String, root.String
	m.LastReplyAt, m.EditedAt = timePtr(lastReply), timePtr(edited)
	m.CreatedAt = fromMicros(created)
	m.Reactions = []parley.Reaction{}
	return &m, deleted.Valid, nil
}

// Cursors are opaque to clients: the key of the last row of the previous
// page, base64url-encoded.

func encodeCursor(key string) string { return base64.RawURLEncoding.EncodeToString([]byte(key)) }

// decodeCursor returns the key in cursor ("" for no cursor), or EINVALID.
func decodeCursor(cursor string) (string, error) {
	if cursor == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	// Cursors are compared with text columns: bytes PostgreSQL's text
	// cannot hold (invalid UTF-8, NUL) would fail there as an internal
	// error while SQLite took them, so both refuse them here.
	if err != nil || len(b) == 0 || parley.CheckText("cursor", string(b)) != nil {
		return "", parley.Errorf(parley.EINVALID, "invalid cursor")
	}
	return string(b), nil
}
