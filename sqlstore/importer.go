package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"parley"
)

// Imported history in bulk (parley.Importer, migration 00012,
// docs/import.md). Every write here goes through the store's writers like
// any other (SQLite's group commit, PostgreSQL's channel lanes), so that an
// import may run beside live traffic, but it writes a whole batch of a
// channel's messages in one transaction: the channel row is locked once,
// the seqs and unread ordinals are counted in memory, and the rows go in
// as multi-row INSERTs. Each message still gets its message.created event
// at its own seq, so the imported log is the same gap-free log a live
// channel has.
//
// Idempotency: every imported object has a row in import_map, keyed by
// the source's id and written in the object's own transaction; a batch
// skips what the map already holds, so a rerun after a crash picks up
// exactly where the last commit left off.

var _ parley.Importer = (*Store)(nil)

// importBatchMax bounds the messages of one ImportMessages call.
const importBatchMax = 10_000

// ImportWorkspace returns the workspace with that slug, creating it owned
// by ownerID when there is none. An existing workspace must be ownerID's.
func (s *Store) ImportWorkspace(ctx context.Context, ownerID, name, slug string) (*parley.Workspace, bool, error) {
	var id string
	err := s.rdb.QueryRowContext(ctx, `SELECT id FROM workspaces WHERE slug = $1`, slug).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		ws, err := s.CreateWorkspace(ctx, ownerID, name, slug)
		if err != nil {
			return nil, false, err
		}
		return ws, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("find workspace %q: %w", slug, err)
	}
	ws, err := loadWorkspace(ctx, s.rdb, ownerID, id)
	if err == nil && ws.Role != parley.RoleOwner {
		err = parley.Errorf(parley.EFORBIDDEN, "workspace %q is not owned by the given owner", slug)
	}
	if parley.ErrorCode(err) == parley.ENOTFOUND {
		err = parley.Errorf(parley.EFORBIDDEN, "workspace %q is not owned by the given owner", slug)
	}
	if err != nil {
		return nil, false, err
	}
	return ws, false, nil
}

// mapped returns the Parley id an earlier import gave ext, or "".
func mapped(ctx context.Context, q querier, workspaceID, source, kind, ext string) (string, error) {
	var id string
	err := q.QueryRowContext(ctx, `SELECT parley_id FROM import_map
		WHERE workspace_id = $1 AND source = $2 AND kind = $3 AND ext_id = $4`,
		workspaceID, source, kind, ext).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read import map: %w", err)
	}
	return id, nil
}

func (tx *Tx) mapImported(ctx context.Context, workspaceID, source, kind, ext, id string) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO import_map (workspace_id, source, kind, ext_id, parley_id)
		VALUES ($1, $2, $3, $4, $5)`, workspaceID, source, kind, ext, id); err != nil {
		return fmt.Errorf("write import map (%s %s): %w", kind, ext, err)
	}
	return nil
}

// ImportChannel finds the channel an earlier run made for ch, or a channel
// of the same name (imported history is added to it), or creates it as ch
// describes, dated ch.CreatedAt; then makes ch.Members members with
// everything read.
func (s *Store) ImportChannel(ctx context.Context, workspaceID, source string, ic parley.ImportChannel) (*parley.ImportedChannel, error) {
	if err := parley.ValidateChannelName(ic.Name); err != nil {
		return nil, err
	}
	if ic.Kind != parley.KindPublic && ic.Kind != parley.KindPrivate {
		return nil, parley.Errorf(parley.EINVALID, "only public and private channels are imported")
	}
	var out *parley.ImportedChannel
	err := s.write(ctx, "import channel", func(ctx context.Context, tx *Tx) error {
		out = &parley.ImportedChannel{}
		id, err := mapped(ctx, tx, workspaceID, source, "channel", ic.ExtID)
		if err != nil {
			return err
		}
		if id == "" {
			err := tx.QueryRowContext(ctx, `SELECT id FROM channels WHERE workspace_id = $1 AND name = $2 AND dm_key IS NULL`,
				workspaceID, ic.Name).Scan(&id)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("find channel %q: %w", ic.Name, err)
			}
			if id == "" {
				if id, err = tx.createImportedChannel(ctx, workspaceID, ic); err != nil {
					return err
				}
				out.Created = true
			} else if _, err := tx.ExecContext(ctx, // an existing #general takes the source's topic if it has none
				`UPDATE channels SET topic = CASE WHEN topic = '' THEN $1 ELSE topic END,
				   purpose = CASE WHEN purpose = '' THEN $2 ELSE purpose END WHERE workspace_id = $3 AND id = $4`,
				clip(ic.Topic, parley.MaxTopicLen), clip(ic.Purpose, parley.MaxPurposeLen), workspaceID, id); err != nil {
				return fmt.Errorf("import channel topic: %w", err)
			}
			if err := tx.mapImported(ctx, workspaceID, source, "channel", ic.ExtID, id); err != nil {
				return err
			}
		}
		out.ChannelID = id
		var last int64
		if err := tx.QueryRowContext(ctx, `SELECT last_seq FROM channels WHERE workspace_id = $1 AND id = $2`,
			workspaceID, id).Scan(&last); err != nil {
			return fmt.Errorf("read channel: %w", err)
		}
		ch := &parley.Channel{ID: id, WorkspaceID: workspaceID}
		for _, uid := range ic.Members {
			if _, err := tx.insertMember(ctx, ch, uid, last); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// createImportedChannel creates the channel as of ic.CreatedAt: its row,
// stats and channel.created (seq 1) carry the source's date.
func (tx *Tx) createImportedChannel(ctx context.Context, workspaceID string, ic parley.ImportChannel) (string, error) {
	now := tx.now
	if !ic.CreatedAt.IsZero() {
		tx.now = txTime(ic.CreatedAt)
	}
	defer func() { tx.now = now }()
	ch, err := tx.createChannel(ctx, newChannel{
		workspaceID: workspaceID,
		name:        ic.Name,
		kind:        ic.Kind,
		topic:       clip(ic.Topic, parley.MaxTopicLen),
		purpose:     clip(ic.Purpose, parley.MaxPurposeLen),
		creator:     ic.CreatedBy,
	})
	if err != nil {
		return "", err
	}
	if ic.ArchivedAt != nil {
		if _, err := tx.ExecContext(ctx, `UPDATE channels SET archived_at = $1 WHERE workspace_id = $2 AND id = $3`,
			micros(*ic.ArchivedAt), workspaceID, ch.ID); err != nil {
			return "", fmt.Errorf("archive imported channel: %w", err)
		}
	}
	return ch.ID, nil
}

// clip cuts s to at most n characters.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// ImportedMessages returns the ExtIDs of the messages already imported
// into the channel from source.
func (s *Store) ImportedMessages(ctx context.Context, workspaceID, source, channelID string) (map[string]bool, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT im.ext_id FROM import_map im
		JOIN messages m ON m.workspace_id = im.workspace_id AND m.id = im.parley_id
		WHERE im.workspace_id = $1 AND im.source = $2 AND im.kind = 'message' AND m.channel_id = $3`,
		workspaceID, source, channelID)
	if err != nil {
		return nil, fmt.Errorf("imported messages: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var ext string
		if err := rows.Scan(&ext); err != nil {
			return nil, fmt.Errorf("imported messages: %w", err)
		}
		out[ext] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("imported messages: %w", err)
	}
	// Membership notices: mapped to "<channel id>/<seq>".
	nrows, err := s.rdb.QueryContext(ctx, `SELECT ext_id FROM import_map
		WHERE workspace_id = $1 AND source = $2 AND kind = 'notice' AND parley_id LIKE $3`,
		workspaceID, source, channelID+"/%")
	if err != nil {
		return nil, fmt.Errorf("imported notices: %w", err)
	}
	defer nrows.Close()
	for nrows.Next() {
		var ext string
		if err := nrows.Scan(&ext); err != nil {
			return nil, fmt.Errorf("imported notices: %w", err)
		}
		out[ext] = true
	}
	return out, nrows.Err()
}

// importThread is what a batch adds to one thread.
type importThread struct {
	rootID, rootUser string
	replies          int
	last             int64 // micros
	participants     []string
}

// ImportMessages appends a batch of a channel's messages in one
// transaction. See the comment at the top of the file.
func (s *Store) ImportMessages(ctx context.Context, workspaceID, source, channelID string, msgs []parley.ImportMessage) (*parley.ImportBatchResult, error) {
	if len(msgs) > importBatchMax {
		return nil, parley.Errorf(parley.EINVALID, "at most %d messages per batch", importBatchMax)
	}
	for i := range msgs {
		m := &msgs[i]
		if m.ExtID == "" || m.UserID == "" || m.CreatedAt.IsZero() {
			return nil, parley.Errorf(parley.EINVALID, "imported message %d lacks an id, user or time", i)
		}
		if m.Notice != "" {
			if m.Notice != parley.EventMemberJoined && m.Notice != parley.EventMemberLeft {
				return nil, parley.Errorf(parley.EINVALID, "imported notice %s: %q is not a membership event", m.ExtID, m.Notice)
			}
			continue
		}
		if err := parley.CheckText("text", m.Text); err != nil {
			return nil, fmt.Errorf("message %s: %w", m.ExtID, err)
		}
		if !m.Deleted {
			if err := parley.ValidateMessageText(m.Text); err != nil {
				return nil, fmt.Errorf("message %s: %w", m.ExtID, err)
			}
		}
		for _, r := range m.Reactions {
			if err := parley.ValidateEmoji(r.Emoji); err != nil {
				return nil, fmt.Errorf("message %s: %w", m.ExtID, err)
			}
		}
	}
	// Bot profiles, checked and tidied as a live post's are, on a copy:
	// the caller's batch is left as it came. Imported history keeps the
	// profile whoever the author maps to (imported accounts are never
	// bots), unlike a live post (requireBot).
	var profiles []*parley.BotProfile
	for i := range msgs {
		if msgs[i].Notice != "" || msgs[i].BotProfile == nil {
			continue
		}
		p, err := parley.ValidateBotProfile(msgs[i].BotProfile)
		if err != nil {
			return nil, fmt.Errorf("message %s: bot profile: %w", msgs[i].ExtID, err)
		}
		if profiles == nil {
			profiles = make([]*parley.BotProfile, len(msgs))
		}
		profiles[i] = p
	}
	if profiles != nil {
		cp := slices.Clone(msgs)
		for i := range cp {
			cp[i].BotProfile = profiles[i]
		}
		msgs = cp
	}
	var res *parley.ImportBatchResult
	collapsed := s.live().CollapsedThreads
	err := s.writeChannel(ctx, "import messages", channelID, func(ctx context.Context, tx *Tx) error {
		var err error
		res, err = tx.importMessages(ctx, workspaceID, source, channelID, msgs, collapsed, s.dialect == SQLite)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (tx *Tx) importMessages(ctx context.Context, workspaceID, source, channelID string, msgs []parley.ImportMessage,
	collapsed, sqlite bool) (*parley.ImportBatchResult, error) {
	res := &parley.ImportBatchResult{}
	// The channel row, locked: its seq and ordinal counters are ours
	// until the commit.
	var lastSeq, msgCount int64
	if err := tx.QueryRowContext(ctx,
		`UPDATE channels SET last_seq = last_seq WHERE workspace_id = $1 AND id = $2 RETURNING last_seq, msg_count`,
		workspaceID, channelID).Scan(&lastSeq, &msgCount); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, parley.Errorf(parley.ENOTFOUND, "channel not found")
		}
		return nil, fmt.Errorf("lock channel: %w", err)
	}
	var memberCount int64
	if err := tx.QueryRowContext(ctx, `SELECT member_count FROM channel_stats WHERE workspace_id = $1 AND channel_id = $2`,
		workspaceID, channelID).Scan(&memberCount); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read member count: %w", err)
	}
	// What earlier runs imported: the batch's own ids and its roots.
	want := make([]string, 0, len(msgs))
	for _, m := range msgs {
		want = append(want, m.ExtID)
		if m.ThreadExtID != "" && m.ThreadExtID != m.ExtID {
			want = append(want, m.ThreadExtID)
		}
	}
	slices.Sort(want)
	want = slices.Compact(want)
	ids, err := tx.mappedMessages(ctx, workspaceID, source, want, sqlite)
	if err != nil {
		return nil, err
	}
	roots, err := tx.liveRoots(ctx, channelID, ids, sqlite)
	if err != nil {
		return nil, err
	}

	var (
		msgRows, evRows, mapRows, reactRows, pinRows, fileRows [][]any
		threads                                                = map[string]*importThread{}
		threadOrder                                            []string
		batchRoots                                             = map[string]string{} // root id → author, of this batch
		lastAt                                                 int64
	)
	for i := range msgs {
		im := &msgs[i]
		if _, done := ids[im.ExtID]; done {
			res.Skipped++
			continue
		}
		created := micros(im.CreatedAt)
		lastAt = max(lastAt, created)
		if im.Notice != "" {
			// A join or leave from the source: the event the live server
			// writes (membership rows come from the channel's member list,
			// the current state), at its place in the log. member_count is
			// the channel's now: the source does not say what it was then.
			lastSeq++
			raw, err := json.Marshal(parley.MemberEventData{ChannelID: channelID, Seq: lastSeq, UserID: im.UserID, MemberCount: memberCount})
			if err != nil {
				return nil, fmt.Errorf("encode imported notice: %w", err)
			}
			evRows = append(evRows, []any{workspaceID, channelID, lastSeq, im.Notice, string(raw), created})
			tx.events = append(tx.events, importedEvent(workspaceID, channelID, lastSeq, im.Notice, raw, created))
			id := channelID + "/" + strconv.FormatInt(lastSeq, 10)
			mapRows = append(mapRows, []any{workspaceID, source, "notice", im.ExtID, id})
			ids[im.ExtID] = id
			res.Notices++
			continue
		}
		m := &parley.Message{
			ID:          parley.NewIDAt(parley.PrefixMessage, im.CreatedAt),
			WorkspaceID: workspaceID,
			ChannelID:   channelID,
			UserID:      im.UserID,
			Text:        im.Text,
			CreatedAt:   fromMicros(created),
			EditedAt:    im.EditedAt,
			Reactions:   []parley.Reaction{},
			BotProfile:  im.BotProfile,
		}
		if m.EditedAt != nil {
			t := txTime(*m.EditedAt)
			m.EditedAt = &t
		}
		if im.Deleted {
			m.Text, m.EditedAt = "", nil
		}
		if im.ThreadExtID != "" && im.ThreadExtID != im.ExtID {
			rootID := ids[im.ThreadExtID]
			author, inBatch := batchRoots[rootID]
			if !inBatch {
				author = roots[rootID]
			}
			if rootID == "" || author == "" {
				res.Orphans++ // its root is not here: a message of its own
			} else {
				m.ThreadRootID = rootID
				th := threads[rootID]
				if th == nil {
					th = &importThread{rootID: rootID, rootUser: author}
					threads[rootID] = th
					threadOrder = append(threadOrder, rootID)
				}
				th.replies++
				th.last = max(th.last, created)
				if !slices.Contains(th.participants, m.UserID) {
					th.participants = append(th.participants, m.UserID)
				}
				res.Replies++
			}
		}
		if m.ThreadRootID == "" { // a deleted root too: it holds its replies
			batchRoots[m.ID] = m.UserID
		}
		ids[im.ExtID] = m.ID
		lastSeq++
		m.Seq = lastSeq
		var ord sql.NullInt64
		if countsInChannel(m, collapsed) {
			msgCount++
			ord = sql.NullInt64{Int64: msgCount, Valid: true}
		}
		// Reactions, in the order given; one per (emoji, user).
		seen := map[[2]string]bool{}
		for _, r := range im.Reactions {
			n := 0
			for _, u := range r.UserIDs {
				k := [2]string{r.Emoji, u}
				if seen[k] || im.Deleted {
					continue
				}
				seen[k] = true
				// A microsecond apart, so that the emoji keep their order.
				reactRows = append(reactRows, []any{workspaceID, m.ID, r.Emoji, u, created + int64(len(seen))})
				n++
			}
			if n > 0 {
				m.Reactions = append(m.Reactions, parley.Reaction{Emoji: r.Emoji, Count: n})
				res.Reactions += n
			}
		}
		if im.PinnedBy != "" && !im.Deleted {
			at := im.PinnedAt
			if at.IsZero() {
				at = im.CreatedAt
			}
			pinRows = append(pinRows, []any{workspaceID, channelID, m.ID, im.PinnedBy, micros(at)})
			m.Pinned = true
			res.Pins++
		}
		for pos, f := range im.Files {
			fileRows = append(fileRows, []any{workspaceID, m.ID, f.ExtID, pos, f.Name, f.Title, f.MimeType, f.Size, f.URL})
			res.Files++
		}
		var deletedAt sql.NullInt64
		if im.Deleted {
			deletedAt = sql.NullInt64{Int64: created, Valid: true}
		}
		if im.Deleted {
			m.BotProfile = nil
		}
		profile, err := botProfileJSON(m.BotProfile)
		if err != nil {
			return nil, fmt.Errorf("imported message %s: %w", im.ExtID, err)
		}
		msgRows = append(msgRows, []any{workspaceID, m.ID, channelID, m.Seq, m.UserID, m.Text,
			nullString(m.ThreadRootID), created, nullMicros(m.EditedAt), deletedAt, ord, profile})
		raw, err := json.Marshal(parley.MessageEventData{ChannelID: channelID, Seq: m.Seq, Message: m})
		if err != nil {
			return nil, fmt.Errorf("encode imported message: %w", err)
		}
		evRows = append(evRows, []any{workspaceID, channelID, m.Seq, parley.EventMessageCreated, string(raw), created})
		tx.events = append(tx.events, importedEvent(workspaceID, channelID, m.Seq, parley.EventMessageCreated, raw, created))
		if im.Deleted {
			lastSeq++
			raw, err := json.Marshal(parley.MessageDeletedData{ChannelID: channelID, Seq: lastSeq, MessageID: m.ID,
				ThreadRootID: m.ThreadRootID, UserID: m.UserID})
			if err != nil {
				return nil, fmt.Errorf("encode imported deletion: %w", err)
			}
			evRows = append(evRows, []any{workspaceID, channelID, lastSeq, parley.EventMessageDeleted, string(raw), created})
			tx.events = append(tx.events, importedEvent(workspaceID, channelID, lastSeq, parley.EventMessageDeleted, raw, created))
		}
		mapRows = append(mapRows, []any{workspaceID, source, "message", im.ExtID, m.ID})
		res.Messages++
	}
	if res.Messages == 0 && res.Notices == 0 {
		return res, nil
	}
	inserts := []struct {
		table string
		cols  string
		rows  [][]any
	}{
		{"import_map", "workspace_id, source, kind, ext_id, parley_id", mapRows},
		{"messages", "workspace_id, id, channel_id, seq, user_id, text, thread_root_id, created_at, edited_at, deleted_at, ord, bot_profile", msgRows},
		{"events", "workspace_id, channel_id, seq, type, data, created_at", evRows},
		{"reactions", "workspace_id, message_id, emoji, user_id, created_at", reactRows},
		{"pins", "workspace_id, channel_id, message_id, pinned_by, pinned_at", pinRows},
		{"import_files", "workspace_id, message_id, ext_id, position, name, title, mimetype, size, url", fileRows},
	}
	for _, in := range inserts {
		if err := tx.bulkInsert(ctx, in.table, in.cols, in.rows, sqlite, ""); err != nil {
			return nil, err
		}
	}
	if err := tx.importThreads(ctx, workspaceID, channelID, threads, threadOrder, collapsed, sqlite); err != nil {
		return nil, err
	}
	// The channel's counters, and everyone has read the imported history.
	if _, err := tx.ExecContext(ctx,
		`UPDATE channels SET last_seq = $1, msg_count = $2, updated_at = $3 WHERE workspace_id = $4 AND id = $5`,
		lastSeq, msgCount, micros(tx.now), workspaceID, channelID); err != nil {
		return nil, fmt.Errorf("count imported messages: %w", err)
	}
	if _, err := tx.ExecContext(ctx,
		`UPDATE channel_members SET last_read_seq = $1, read_ord = $2 WHERE workspace_id = $3 AND channel_id = $4`,
		lastSeq, msgCount, workspaceID, channelID); err != nil {
		return nil, fmt.Errorf("mark imported history read: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM mentions WHERE workspace_id = $1 AND channel_id = $2 AND seq <= $3`,
		workspaceID, channelID, lastSeq); err != nil {
		return nil, fmt.Errorf("mark imported history read: %w", err)
	}
	return res, nil
}

// importedEvent is the published form of an imported event.
func importedEvent(workspaceID, channelID string, seq int64, typ string, raw []byte, at int64) parley.Event {
	return parley.Event{WorkspaceID: workspaceID, ChannelID: channelID, Seq: seq, Type: typ, Data: raw,
		CreatedAt: fromMicros(at), Topics: []string{parley.TopicChannel(channelID)}}
}

// mappedMessages returns the Parley ids of those exts that are imported.
//
// On PostgreSQL the ids go in as an array joined to the map, so that each
// is one lookup of the whole key: with IN (…) the planner, whose
// statistics of a table filled by this very import are stale, took the
// key's first three columns for selective enough and filtered every
// message of the workspace, once per batch.
func (tx *Tx) mappedMessages(ctx context.Context, workspaceID, source string, exts []string, sqlite bool) (map[string]string, error) {
	out := make(map[string]string, len(exts))
	for chunk := range slices.Chunk(exts, 500) {
		args := []any{workspaceID, source}
		query := `SELECT m.ext_id, m.parley_id FROM unnest($3::text[]) AS e(ext_id)
			JOIN import_map m ON m.workspace_id = $1 AND m.source = $2 AND m.kind IN ('message', 'notice') AND m.ext_id = e.ext_id`
		if sqlite {
			for _, e := range chunk {
				args = append(args, e)
			}
			query = `SELECT ext_id, parley_id FROM import_map
			WHERE workspace_id = $1 AND source = $2 AND kind IN ('message', 'notice') AND ext_id IN (` + inClause(3, len(chunk)) + `)`
		} else {
			args = append(args, chunk)
		}
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return nil, fmt.Errorf("read import map: %w", err)
		}
		for rows.Next() {
			var e, id string
			if err := rows.Scan(&e, &id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read import map: %w", err)
			}
			out[e] = id
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read import map: %w", err)
		}
	}
	return out, nil
}

// liveRoots returns, of the messages ids names, those that can be thread
// roots in the channel (top-level messages of it), with their authors.
func (tx *Tx) liveRoots(ctx context.Context, channelID string, ids map[string]string, sqlite bool) (map[string]string, error) {
	all := make([]string, 0, len(ids))
	for _, id := range ids {
		all = append(all, id)
	}
	out := map[string]string{}
	for chunk := range slices.Chunk(all, 500) {
		args := []any{channelID}
		query := `SELECT m.id, m.user_id FROM unnest($2::text[]) AS r(id)
			JOIN messages m ON m.id = r.id WHERE m.channel_id = $1 AND m.thread_root_id IS NULL`
		if sqlite {
			for _, id := range chunk {
				args = append(args, id)
			}
			query = `SELECT id, user_id FROM messages
			WHERE channel_id = $1 AND thread_root_id IS NULL AND id IN (` + inClause(2, len(chunk)) + `)`
		} else {
			args = append(args, chunk)
		}
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return nil, fmt.Errorf("find thread roots: %w", err)
		}
		for rows.Next() {
			var id, user string
			if err := rows.Scan(&id, &user); err != nil {
				rows.Close()
				return nil, fmt.Errorf("find thread roots: %w", err)
			}
			out[id] = user
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("find thread roots: %w", err)
		}
	}
	return out, nil
}

// importThreads counts a batch's replies on their roots and, with
// collapsed threads on, in the threads rows; the root's author and every
// replier follow the thread with everything read. A few statements per
// batch, whatever the number of threads: each is a round trip on
// PostgreSQL.
func (tx *Tx) importThreads(ctx context.Context, workspaceID, channelID string, threads map[string]*importThread,
	order []string, collapsed, sqlite bool) error {
	counts := make(map[string]int, len(order))
	parts := make(map[string]string, len(order))
	for chunk := range slices.Chunk(order, 500) {
		args := []any{workspaceID}
		var vals strings.Builder
		for i, id := range chunk {
			th := threads[id]
			if i > 0 {
				vals.WriteByte(',')
			}
			n := len(args)
			fmt.Fprintf(&vals, "(CAST($%d AS TEXT), CAST($%d AS BIGINT), CAST($%d AS BIGINT))", n+1, n+2, n+3)
			args = append(args, id, th.replies, th.last)
		}
		// A VALUES list joined by the whole key: both dialects take it,
		// and neither can mistake it for a scan.
		rows, err := tx.QueryContext(ctx, `UPDATE messages SET reply_count = messages.reply_count + v.n,
			   last_reply_at = CASE WHEN messages.last_reply_at IS NULL OR messages.last_reply_at < v.lastr
			     THEN v.lastr ELSE messages.last_reply_at END
			 FROM (SELECT column1 AS rid, column2 AS n, column3 AS lastr FROM (VALUES `+vals.String()+`) AS x) AS v
			 WHERE messages.workspace_id = $1 AND messages.id = v.rid
			 RETURNING id, reply_count`, args...)
		if err != nil {
			return fmt.Errorf("count imported replies: %w", err)
		}
		if err := scanPairs(rows, func(id string, n int64) { counts[id] = int(n) }); err != nil {
			return fmt.Errorf("count imported replies: %w", err)
		}
		if !collapsed {
			continue
		}
		args = []any{workspaceID}
		vals.Reset()
		for i, id := range chunk {
			if i > 0 {
				vals.WriteByte(',')
			}
			fmt.Fprintf(&vals, "(CAST($%d AS TEXT))", len(args)+1)
			args = append(args, id)
		}
		rows, err = tx.QueryContext(ctx, `SELECT t.root_id, t.participants
			FROM (SELECT column1 AS rid FROM (VALUES `+vals.String()+`) AS x) AS v
			JOIN threads t ON t.workspace_id = $1 AND t.root_id = v.rid`, args...)
		if err != nil {
			return fmt.Errorf("read threads: %w", err)
		}
		for rows.Next() {
			var id, p string
			if err := rows.Scan(&id, &p); err != nil {
				rows.Close()
				return fmt.Errorf("read threads: %w", err)
			}
			parts[id] = p
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read threads: %w", err)
		}
	}
	if !collapsed {
		return nil
	}
	var threadRows, followRows [][]any
	for _, rootID := range order {
		th := threads[rootID]
		ps := splitIDs(parts[rootID])
		for _, p := range th.participants {
			if !slices.Contains(ps, p) {
				ps = append(ps, p)
			}
		}
		threadRows = append(threadRows, []any{workspaceID, rootID, channelID, counts[rootID], th.last, strings.Join(ps, ",")})
		followers := append([]string{th.rootUser}, th.participants...)
		slices.Sort(followers)
		for _, u := range slices.Compact(followers) {
			followRows = append(followRows, []any{workspaceID, u, rootID, channelID, 1, th.last, 0, 0, th.last})
		}
	}
	if err := tx.bulkInsert(ctx, "threads", "workspace_id, root_id, channel_id, reply_count, last_reply_at, participants", threadRows, sqlite,
		` ON CONFLICT (workspace_id, root_id) DO UPDATE SET reply_count = excluded.reply_count,
		   last_reply_at = CASE WHEN threads.last_reply_at < excluded.last_reply_at THEN excluded.last_reply_at ELSE threads.last_reply_at END,
		   participants = excluded.participants`); err != nil {
		return err
	}
	return tx.bulkInsert(ctx, "thread_memberships", "workspace_id, user_id, root_id, channel_id, following, "+
		"last_viewed_at, unread_replies, unread_mentions, last_update_at", followRows, sqlite,
		` ON CONFLICT (workspace_id, root_id, user_id) DO UPDATE SET
		   last_viewed_at = CASE WHEN thread_memberships.last_viewed_at < excluded.last_viewed_at
		     THEN excluded.last_viewed_at ELSE thread_memberships.last_viewed_at END,
		   last_update_at = CASE WHEN thread_memberships.last_update_at < excluded.last_update_at
		     THEN excluded.last_update_at ELSE thread_memberships.last_update_at END`)
}

// scanPairs reads (text, integer) rows.
func scanPairs(rows *sql.Rows, fn func(string, int64)) error {
	defer rows.Close()
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			return err
		}
		fn(s, n)
	}
	return rows.Err()
}

// bulkParams bounds the parameters of one multi-row INSERT (SQLite's
// default limit is 32766, PostgreSQL's 65535).
const bulkParams = 8000

// bulkInsert inserts rows (each with one value per column of cols) in
// multi-row INSERTs, each followed by suffix (an ON CONFLICT clause). SQLite
// gets anonymous ? parameters: it looks numbered ones ($n) up by name, in
// time that grows with the square of their number.
func (tx *Tx) bulkInsert(ctx context.Context, table, cols string, rows [][]any, sqlite bool, suffix string) error {
	if len(rows) == 0 {
		return nil
	}
	width := len(rows[0])
	per := max(1, bulkParams/width)
	var b strings.Builder
	for chunk := range slices.Chunk(rows, per) {
		b.Reset()
		b.WriteString("INSERT INTO " + table + " (" + cols + ") VALUES ")
		args := make([]any, 0, len(chunk)*width)
		for i, r := range chunk {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('(')
			if sqlite {
				b.WriteString(strings.Repeat("?,", width-1) + "?")
			} else {
				b.WriteString(inClause(len(args)+1, width))
			}
			b.WriteByte(')')
			args = append(args, r...)
		}
		b.WriteString(suffix)
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return fmt.Errorf("import %s: %w", table, err)
		}
	}
	return nil
}

// WorkspaceOwner returns the id of the workspace with that slug and of its
// owner (the command line's export acts as the owner).
func (s *Store) WorkspaceOwner(ctx context.Context, slug string) (workspaceID, ownerID string, err error) {
	err = s.rdb.QueryRowContext(ctx, `SELECT w.id, wm.user_id FROM workspaces w
		JOIN workspace_members wm ON wm.workspace_id = w.id AND wm.role = 'owner'
		WHERE w.slug = $1 ORDER BY wm.joined_at LIMIT 1`, slug).Scan(&workspaceID, &ownerID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", parley.Errorf(parley.ENOTFOUND, "no workspace %q", slug)
	}
	if err != nil {
		return "", "", fmt.Errorf("find workspace %q: %w", slug, err)
	}
	return workspaceID, ownerID, nil
}
