package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"parley"
)

// Directory answers the directory queries (parley.DirectoryQueries) from
// the store, for tests and tools that run without the query cache. Its
// answers are the cache's (querycache's contract tests compare the two):
// the same matching tiers, ranking, visibility and limits. Each query is a
// fixed number of statements whatever the workspace's size (the access
// check and one read per list); the candidates are filtered in SQL by a
// pattern that every tier implies, then ranked here.
type Directory struct{ s *Store }

var _ parley.DirectoryQueries = (*Directory)(nil)

// Directory returns the store's directory queries.
func (s *Store) Directory() *Directory { return &Directory{s: s} }

// Directory pages the workspace's directory (ListWorkspaceUsers).
func (d *Directory) Directory(ctx context.Context, actor, workspaceID string, q parley.UserQuery) (*parley.UserPage, error) {
	return d.s.ListWorkspaceUsers(ctx, actor, workspaceID, q)
}

// UsersBatch is the store's UsersBatch.
func (d *Directory) UsersBatch(ctx context.Context, actor string, ids []string) ([]parley.User, error) {
	return d.s.UsersBatch(ctx, actor, ids)
}

// Users is the store's WorkspaceUsers.
func (d *Directory) Users(ctx context.Context, workspaceID string, ids []string) ([]parley.User, error) {
	return d.s.WorkspaceUsers(ctx, workspaceID, ids)
}

// UsersByHandle reads the workspace's users with these handles in one
// query, returned in the order given.
func (d *Directory) UsersByHandle(ctx context.Context, workspaceID string, handles []string) ([]parley.User, error) {
	handles = dedupe(handles, "")
	out := make([]parley.User, 0, len(handles))
	if len(handles) == 0 {
		return out, nil
	}
	args := make([]any, 0, len(handles)+1)
	args = append(args, workspaceID)
	for _, h := range handles {
		args = append(args, h)
	}
	rows, err := d.s.reads().QueryContext(ctx, `SELECT `+userColumns+` FROM users u
		JOIN workspace_members wm ON wm.user_id = u.id AND wm.workspace_id = $1
		WHERE u.handle IN (`+inClause(2, len(handles))+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("users by handle: %w", err)
	}
	defer rows.Close()
	now := d.s.now()
	found := make(map[string]parley.User, len(handles))
	for rows.Next() {
		u, err := scanUser(rows, now)
		if err != nil {
			return nil, fmt.Errorf("users by handle: %w", err)
		}
		found[u.Handle] = *u
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("users by handle: %w", err)
	}
	for _, h := range handles {
		if u, ok := found[h]; ok {
			out = append(out, u)
		}
	}
	return out, nil
}

// ChannelHeader reads the channel as actor sees it, then its first active
// members by handle.
func (d *Directory) ChannelHeader(ctx context.Context, actor, channelID string) (*parley.ChannelHeader, error) {
	a, err := loadChannel(ctx, d.s.rdb, actor, channelID)
	if err != nil {
		return nil, err
	}
	ch := a.ch
	rows, err := d.s.rdb.QueryContext(ctx, `SELECT `+userColumns+`
		FROM channel_members m JOIN users u ON u.id = m.user_id
		WHERE m.workspace_id = $1 AND m.channel_id = $2 AND u.deactivated_at IS NULL
		ORDER BY u.handle LIMIT $3`, ch.WorkspaceID, ch.ID, parley.MembersPreviewSize)
	if err != nil {
		return nil, fmt.Errorf("channel header: %w", err)
	}
	defer rows.Close()
	h := &parley.ChannelHeader{Channel: *ch, MemberCount: ch.MemberCount, Topic: ch.Topic,
		Purpose: ch.Purpose, MembersPreview: []parley.User{}}
	now := d.s.now()
	for rows.Next() {
		u, err := scanUser(rows, now)
		if err != nil {
			return nil, fmt.Errorf("channel header: %w", err)
		}
		h.MembersPreview = append(h.MembersPreview, *u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("channel header: %w", err)
	}
	return h, nil
}

// Switcher finds the channels actor can see (not archived, not DMs) and
// the active users of the workspace matching q; DM partners rank first
// among users of a tier, by the activity of their latest DM with actor.
func (d *Directory) Switcher(ctx context.Context, actor, workspaceID, q string, limit int) (*parley.SwitcherResult, error) {
	role, err := workspaceRole(ctx, d.s.rdb, workspaceID, actor)
	if err != nil {
		return nil, err
	}
	raw := strings.TrimSpace(q)
	fq := parley.FoldQuery(raw)
	k := parley.ClampLimit(limit)
	res := &parley.SwitcherResult{Channels: []parley.Channel{}, Users: []parley.User{}}
	if !strings.HasPrefix(raw, "@") {
		if res.Channels, err = d.switcherChannels(ctx, actor, workspaceID, role, fq, k); err != nil {
			return nil, err
		}
	}
	if !strings.HasPrefix(raw, "#") {
		// DM partners and the latest activity of their DMs with actor.
		pref := `(SELECT MAX(c.updated_at) FROM channel_members m1
			JOIN channels c ON c.workspace_id = m1.workspace_id AND c.id = m1.channel_id
			JOIN channel_members m2 ON m2.workspace_id = c.workspace_id AND m2.channel_id = c.id
			WHERE m1.workspace_id = $1 AND m1.user_id = $4 AND m2.user_id = u.id AND m2.user_id <> $4
			  AND c.kind IN ('dm', 'group_dm'))`
		hits, err := d.matchUsers(ctx, "switcher", pref, workspaceID, fq, k, actor)
		if err != nil {
			return nil, err
		}
		for _, h := range hits {
			res.Users = append(res.Users, h.user)
		}
	}
	return res, nil
}

func (d *Directory) switcherChannels(ctx context.Context, actor, workspaceID string, role parley.Role, q string, k int) ([]parley.Channel, error) {
	guest := 0
	if role == parley.RoleGuest {
		guest = 1
	}
	rows, err := d.s.rdb.QueryContext(ctx, `SELECT `+channelColumns+channelFrom+`
		WHERE c.workspace_id = $2 AND c.kind IN ('public', 'private') AND c.archived_at IS NULL
		  AND (m.user_id IS NOT NULL OR (c.kind = 'public' AND $3 = 0))
		  AND c.name LIKE $4 ESCAPE '\'`, actor, workspaceID, guest, subsequencePattern(q))
	if err != nil {
		return nil, fmt.Errorf("switcher channels: %w", err)
	}
	defer rows.Close()
	type hit struct {
		ch   *parley.Channel
		tier uint8
	}
	var hits []hit
	for rows.Next() {
		ch, err := scanChannel(rows)
		if err != nil {
			return nil, fmt.Errorf("switcher channels: %w", err)
		}
		if tier, ok := parley.MatchChannel(ch.Name, q); ok {
			hits = append(hits, hit{ch, tier})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("switcher channels: %w", err)
	}
	slices.SortFunc(hits, func(a, b hit) int {
		switch {
		case a.tier != b.tier:
			return int(a.tier) - int(b.tier)
		case a.ch.IsMember != b.ch.IsMember:
			if a.ch.IsMember {
				return -1
			}
			return 1
		case !a.ch.UpdatedAt.Equal(b.ch.UpdatedAt):
			return b.ch.UpdatedAt.Compare(a.ch.UpdatedAt)
		}
		return strings.Compare(a.ch.Name, b.ch.Name)
	})
	out := make([]parley.Channel, 0, min(k, len(hits)))
	for _, h := range hits[:min(k, len(hits))] {
		out = append(out, *h.ch)
	}
	return out, nil
}

// MentionSuggestions checks that actor may see the channel, then ranks the
// workspace's active users matching q, the channel's members first among
// equals.
func (d *Directory) MentionSuggestions(ctx context.Context, actor, channelID, q string, limit int) ([]parley.MentionSuggestion, error) {
	a, err := loadChannel(ctx, d.s.rdb, actor, channelID)
	if err != nil {
		return nil, err
	}
	pref := `(SELECT 0 FROM channel_members m
		WHERE m.workspace_id = $1 AND m.channel_id = $4 AND m.user_id = u.id)`
	hits, err := d.matchUsers(ctx, "mention suggestions", pref, a.ch.WorkspaceID, parley.FoldQuery(q), parley.ClampLimit(limit), channelID)
	if err != nil {
		return nil, err
	}
	out := make([]parley.MentionSuggestion, len(hits))
	for i, h := range hits {
		out[i] = parley.MentionSuggestion{User: h.user, InChannel: h.pref}
	}
	return out, nil
}

// userHit is one user matched, with what ranks it.
type userHit struct {
	user      parley.User
	tier, sub uint8
	pref      bool
	act       int64
	key       string
}

// matchUsers reads the workspace's active users whose handle has q as a
// subsequence or whose name contains q (every tier implies one of these),
// with prefExpr (NULL: not preferred; else the preference's activity), and
// returns the best k by tier, preference, activity, handle-before-name and
// key. The statement's arguments are $1 the workspace, $2 and $3 the
// patterns, then $4 arg (for prefExpr).
func (d *Directory) matchUsers(ctx context.Context, op, prefExpr, workspaceID, q string, k int, arg any) ([]userHit, error) {
	args := []any{workspaceID, subsequencePattern(q), "%" + escapeLike(q) + "%", arg}
	rows, err := d.s.rdb.QueryContext(ctx, `SELECT `+userColumns+`, `+prefExpr+`
		FROM workspace_members wm JOIN users u ON u.id = wm.user_id
		WHERE wm.workspace_id = $1 AND u.deactivated_at IS NULL
		  AND (u.handle LIKE $2 ESCAPE '\' OR LOWER(u.name) LIKE $3 ESCAPE '\')`, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer rows.Close()
	now := d.s.now()
	var hits []userHit
	for rows.Next() {
		var act sql.NullInt64
		u, err := scanUser(scanFunc(func(dest ...any) error {
			return rows.Scan(append(dest, &act)...)
		}), now)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		tier, sub, key, ok := matchUserKeys(u.Handle, strings.ToLower(u.Name), q)
		if !ok {
			continue
		}
		hits = append(hits, userHit{user: *u, tier: tier, sub: sub, key: key, pref: act.Valid, act: act.Int64})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	slices.SortFunc(hits, func(a, b userHit) int {
		switch {
		case a.tier != b.tier:
			return int(a.tier) - int(b.tier)
		case a.pref != b.pref:
			if a.pref {
				return -1
			}
			return 1
		case a.act != b.act:
			if a.act > b.act {
				return -1
			}
			return 1
		case a.sub != b.sub:
			return int(a.sub) - int(b.sub)
		case a.key != b.key:
			return strings.Compare(a.key, b.key)
		}
		return strings.Compare(a.user.Handle, b.user.Handle)
	})
	return hits[:min(k, len(hits))], nil
}

// The matching rules are the root's (parley.MatchUser, parley.MatchChannel),
// the same as the query cache's.
const (
	tierFuzzy = parley.MatchFuzzy
	subName   = parley.MatchName
)

// subsequencePattern is a LIKE pattern matching every string that has q's
// bytes in order: "%a%b%".
func subsequencePattern(q string) string {
	var b strings.Builder
	b.WriteByte('%')
	for i := 0; i < len(q); i++ {
		b.WriteString(escapeLike(q[i : i+1]))
		b.WriteByte('%')
	}
	return b.String()
}

// matchUserKeys rates how a user (handle, folded name) matches q, and the
// key that orders them within the tier: the handle, or the name from the
// word that matched.
func matchUserKeys(handle, name, q string) (tier, sub uint8, key string, ok bool) {
	tier, sub, ok = parley.MatchUser(handle, name, q)
	switch {
	case !ok:
		return 0, 0, "", false
	case sub == subName && tier != tierFuzzy:
		return tier, sub, name[max(0, parley.WordPrefix(name, q)):], true
	}
	return tier, sub, handle, true
}
