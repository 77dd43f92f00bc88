package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"

	"parley"
)

// Boot (POST /boot): the caller, the workspace, the caller's channels and
// DMs with read state and counts, in three queries whatever the number of
// messages; or one channel first with its latest messages.
//
// The version is exact rather than a clock reading: a fingerprint of every
// channel row the caller got, that is of (channel id, last_seq,
// last_read_seq). Everything a boot row shows changes one of the two seqs
// (every change to a channel appends to its log; the caller's read state is
// the marker), so a later boot returns exactly the rows whose fingerprint is
// not in the version, with no window for commits in flight and no trust in
// clocks. It costs 6 bytes per channel in the version string.

// versionFormat is the first byte of every version.
const versionFormat = 1

const (
	versionScopeLen = 4 // bytes of the hash of (workspace, user)
	fingerprintLen  = 6 // bytes per channel
)

// Boot returns actor's boot of q.WorkspaceID (see parley.BootService).
func (s *Store) Boot(ctx context.Context, actor string, q parley.BootQuery) (*parley.Boot, error) {
	return s.boot(ctx, s.reads(), actor, q)
}

// boot runs every query of a boot on rq, so that tests can count them.
func (s *Store) boot(ctx context.Context, rq querier, actor string, q parley.BootQuery) (*parley.Boot, error) {
	switch {
	case q.WorkspaceID == "":
		return nil, parley.Errorf(parley.EINVALID, "workspace_id is required")
	case q.Since != "" && q.ChannelID != "":
		return nil, parley.Errorf(parley.EINVALID, "give since or channel_id, not both")
	}
	scope := versionScope(q.WorkspaceID, actor)
	var since map[uint64]bool
	if q.Since != "" {
		var err error
		if since, err = decodeVersion(q.Since, scope); err != nil {
			return nil, err
		}
	}
	ws, err := loadWorkspace(ctx, rq, actor, q.WorkspaceID)
	if err != nil {
		return nil, err
	}
	self, err := loadUser(ctx, rq, actor, s.now(), true)
	if err != nil {
		return nil, err
	}
	b := &parley.Boot{
		Self:      self,
		Workspace: ws,
		Channels:  []parley.BootChannel{},
		DMs:       []parley.BootChannel{},
		Prefs:     map[string]any{},
	}
	if q.ChannelID != "" {
		return b, bootChannel(ctx, rq, actor, ws.ID, q, b, !s.live().CollapsedThreads)
	}

	rows, err := rq.QueryContext(ctx, `SELECT c.id, c.name, c.kind, c.topic, c.dm_key, c.last_seq,
			c.updated_at, c.archived_at, st.member_count, m.last_read_seq, `+unreadExpr+`, `+mentionExpr+`
		FROM channel_members m
		JOIN channels c ON c.workspace_id = m.workspace_id AND c.id = m.channel_id
		JOIN channel_stats st ON st.workspace_id = m.workspace_id AND st.channel_id = m.channel_id
		WHERE m.user_id = $1 AND m.workspace_id = $2`, actor, ws.ID)
	if err != nil {
		return nil, fmt.Errorf("boot channels: %w", err)
	}
	defer rows.Close()
	version := make([]byte, 0, 1+versionScopeLen+64*fingerprintLen)
	version = append(version, versionFormat)
	version = binary.BigEndian.AppendUint32(version, scope)
	var all []string
	for rows.Next() {
		var c parley.BootChannel
		var kind string
		var dmKey sql.NullString
		var updated int64
		var archived sql.NullInt64
		if err := rows.Scan(&c.ID, &c.Name, &kind, &c.Topic, &dmKey, &c.LastSeq, &updated, &archived,
			&c.MemberCount, &c.LastReadSeq, &c.UnreadCount, &c.MentionCount); err != nil {
			return nil, fmt.Errorf("boot channels: %w", err)
		}
		c.Kind = parley.ChannelKind(kind)
		c.UpdatedAt, c.ArchivedAt = fromMicros(updated), timePtr(archived)
		c.UnreadCount = max(c.UnreadCount, 0)
		if dmKey.Valid {
			c.DMUserIDs = splitDMKey(dmKey.String)
		}
		fp := fingerprint(c.ID, c.LastSeq, c.LastReadSeq)
		version = appendFingerprint(version, fp)
		all = append(all, c.ID)
		if since[fp] {
			continue
		}
		if c.Kind.IsDM() {
			b.DMs = append(b.DMs, c)
		} else {
			b.Channels = append(b.Channels, c)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("boot channels: %w", err)
	}
	slices.SortFunc(b.Channels, func(x, y parley.BootChannel) int {
		return cmp.Or(cmp.Compare(x.Name, y.Name), cmp.Compare(x.ID, y.ID))
	})
	slices.SortFunc(b.DMs, func(x, y parley.BootChannel) int {
		return cmp.Or(y.UpdatedAt.Compare(x.UpdatedAt), cmp.Compare(x.ID, y.ID))
	})
	b.Version = base64.RawURLEncoding.EncodeToString(version)
	// With collapsed threads off replies count in their channels and
	// thread reads are refused: unread threads left from before could not
	// be cleared, so none are reported (the memberships stay for later).
	b.Threads = &parley.ThreadsSummary{}
	if s.live().CollapsedThreads {
		if b.Threads, err = threadsSummary(ctx, rq, actor, ws.ID); err != nil {
			return nil, err
		}
	}
	if since != nil {
		slices.Sort(all)
		b.ChannelIDs = append([]string{}, all...)
	}
	return b, nil
}

// bootChannel fills in a one-channel-first boot: the channel (any the
// caller may see in the workspace, joined or not), its latest messages and
// the users they reference.
// With inline set (collapsed threads off) replies are among the messages,
// as in ListMessages.
func bootChannel(ctx context.Context, rq querier, actor, workspaceID string, q parley.BootQuery, b *parley.Boot, inline bool) error {
	a, err := loadChannel(ctx, rq, actor, q.ChannelID)
	if err != nil {
		return err
	}
	ch := a.ch
	if ch.WorkspaceID != workspaceID {
		return parley.Errorf(parley.ENOTFOUND, "channel not found")
	}
	if err := fillCounts(ctx, rq, actor, ch); err != nil {
		return err
	}
	b.Channel = ch
	b.Channels = []parley.BootChannel{{
		ID: ch.ID, Name: ch.Name, Kind: ch.Kind, Topic: ch.Topic, MemberCount: ch.MemberCount,
		LastSeq: ch.LastSeq, LastReadSeq: ch.LastReadSeq, UnreadCount: ch.UnreadCount,
		MentionCount: ch.MentionCount, UpdatedAt: ch.UpdatedAt, ArchivedAt: ch.ArchivedAt, DMUserIDs: ch.DMUserIDs,
	}}
	top := ` AND msg.thread_root_id IS NULL`
	if inline {
		top = ``
	}
	msgs, err := queryMessages(ctx, rq, `SELECT `+messageColumns+` FROM messages msg
		WHERE msg.channel_id = $1`+top+` AND msg.deleted_at IS NULL
		ORDER BY msg.seq DESC LIMIT $2`, ch.ID, parley.ClampLimit(q.Limit))
	if err != nil {
		return fmt.Errorf("boot messages: %w", err)
	}
	slices.Reverse(msgs)
	if err := decorate(ctx, rq, actor, msgs); err != nil {
		return err
	}
	b.Messages = msgs
	b.UserIDs, err = referencedUsers(ctx, rq, workspaceID, msgs)
	return err
}

// referencedUsers returns the ids of the users msgs reference: their
// authors, then the workspace members they @mention, each once.
func referencedUsers(ctx context.Context, rq querier, workspaceID string, msgs []parley.Message) ([]string, error) {
	ids := []string{}
	seen := map[string]bool{}
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	var handles []string
	seenHandle := map[string]bool{}
	for _, m := range msgs {
		add(m.UserID)
		for _, h := range parley.Mentions(m.Text) {
			switch {
			case parley.IsBroadcastMention(h), seenHandle[h]:
			case len(handles) < maxMentionHandles:
				seenHandle[h] = true
				handles = append(handles, h)
			}
		}
	}
	if len(handles) == 0 {
		return ids, nil
	}
	n := padded(len(handles))
	args := make([]any, 0, n+1)
	args = append(args, workspaceID)
	for i := range n {
		args = append(args, handles[min(i, len(handles)-1)])
	}
	rows, err := rq.QueryContext(ctx, `SELECT u.id, u.handle FROM users u
		JOIN workspace_members wm ON wm.user_id = u.id AND wm.workspace_id = $1
		WHERE u.handle IN (`+inClause(2, n)+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("mentioned users: %w", err)
	}
	defer rows.Close()
	byHandle := map[string]string{}
	for rows.Next() {
		var id, h string
		if err := rows.Scan(&id, &h); err != nil {
			return nil, fmt.Errorf("mentioned users: %w", err)
		}
		byHandle[h] = id
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mentioned users: %w", err)
	}
	for _, h := range handles {
		if id, ok := byHandle[h]; ok {
			add(id)
		}
	}
	return ids, nil
}

// WorkspaceUsers returns the members of the workspace among ids, in the
// order of ids, each once (see parley.BootService).
func (s *Store) WorkspaceUsers(ctx context.Context, workspaceID string, ids []string) ([]parley.User, error) {
	ids = dedupe(ids, "")
	found := make(map[string]*parley.User, len(ids))
	now := s.now()
	const chunk = 256
	for start := 0; start < len(ids); start += chunk {
		part := ids[start:min(start+chunk, len(ids))]
		n := padded(len(part))
		args := make([]any, 0, n+1)
		args = append(args, workspaceID)
		for i := range n {
			args = append(args, part[min(i, len(part)-1)])
		}
		rows, err := s.reads().QueryContext(ctx, `SELECT `+userColumns+` FROM users u
			JOIN workspace_members wm ON wm.user_id = u.id AND wm.workspace_id = $1
			WHERE u.id IN (`+inClause(2, n)+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("workspace users: %w", err)
		}
		for rows.Next() {
			u, err := scanUser(rows, now)
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("workspace users: %w", err)
			}
			found[u.ID] = u
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("workspace users: %w", err)
		}
	}
	out := make([]parley.User, 0, len(found))
	for _, id := range ids {
		if u, ok := found[id]; ok {
			out = append(out, *u)
		}
	}
	return out, nil
}

// versionScope ties a version to one user's boot of one workspace.
func versionScope(workspaceID, userID string) uint32 {
	h := fnv.New64a()
	h.Write([]byte(workspaceID))
	h.Write([]byte{0})
	h.Write([]byte(userID))
	return uint32(h.Sum64() >> 32)
}

// fingerprint is a boot row's identity and state, in fingerprintLen bytes
// (the low bytes of the uint64 are zero).
func fingerprint(channelID string, lastSeq, lastReadSeq int64) uint64 {
	h := fnv.New64a()
	h.Write([]byte(channelID))
	var b [1 + 2*binary.MaxVarintLen64]byte
	n := binary.PutVarint(b[1:], lastSeq) + 1
	n += binary.PutVarint(b[n:], lastReadSeq)
	h.Write(b[:n])
	return h.Sum64() &^ (1<<(64-8*fingerprintLen) - 1)
}

func appendFingerprint(b []byte, fp uint64) []byte {
	var full [8]byte
	binary.BigEndian.PutUint64(full[:], fp)
	return append(b, full[:fingerprintLen]...)
}

// decodeVersion reads the fingerprints of a version made for scope.
func decodeVersion(v string, scope uint32) (map[uint64]bool, error) {
	bad := func(why string) error { return parley.Errorf(parley.EINVALID, "since is not a boot version: %s", why) }
	raw, err := base64.RawURLEncoding.DecodeString(v)
	switch {
	case err != nil:
		return nil, bad("not base64url")
	case len(raw) < 1+versionScopeLen || raw[0] != versionFormat || (len(raw)-1-versionScopeLen)%fingerprintLen != 0:
		return nil, bad("unknown format")
	case binary.BigEndian.Uint32(raw[1:]) != scope:
		return nil, bad("made for another user or workspace")
	}
	raw = raw[1+versionScopeLen:]
	fps := make(map[uint64]bool, len(raw)/fingerprintLen)
	for i := 0; i < len(raw); i += fingerprintLen {
		var full [8]byte
		copy(full[:], raw[i:i+fingerprintLen])
		fps[binary.BigEndian.Uint64(full[:])] = true
	}
	return fps, nil
}
