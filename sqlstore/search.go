package sqlstore

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"parley"
)

// Search: full-text search over message text, one method on two engines.
// SQLite keeps an FTS5 index and PostgreSQL a generated tsvector column,
// both maintained by the database itself on every insert, edit and delete
// (migrations 00004_search.sql), so the write paths know nothing of it.
// Results are the live messages of the channels actor may read, newest
// first, paged by a keyset cursor; see docs/search.md.

var _ parley.SearchService = (*Store)(nil)

// Search returns one page of the messages of the workspace that match q and
// that actor may read: in the workspace's public channels (archived ones
// included; for a guest none but those they are in) and in every channel
// actor belongs to. A workspace actor is not in is ENOTFOUND; a blank q or a
// bad cursor EINVALID.
func (s *Store) Search(ctx context.Context, actor, workspaceID string, sq parley.SearchQuery) (*parley.SearchPage, error) {
	terms, err := parseSearchQuery(sq.Q)
	if err != nil {
		return nil, err
	}
	key, err := decodeCursor(sq.Cursor)
	if err != nil {
		return nil, err
	}
	role, err := workspaceRole(ctx, s.reads(), workspaceID, actor)
	if err != nil {
		return nil, err
	}
	page := &parley.SearchPage{Results: []parley.SearchResult{}}
	if len(terms) == 0 {
		return page, nil // only punctuation: nothing can match
	}
	limit := parley.SearchLimit(sq.Limit)
	var last string // the key of the page's last result
	if s.dialect == Postgres {
		last, err = s.searchPostgres(ctx, page, actor, workspaceID, role, terms, key, limit)
	} else {
		last, err = s.searchSQLite(ctx, page, actor, workspaceID, role, terms, key, limit)
	}
	if err != nil {
		if parley.ErrorCode(err) != parley.EINTERNAL {
			return nil, err
		}
		return nil, fmt.Errorf("search: %w", err)
	}
	msgs := make([]parley.Message, len(page.Results))
	for i := range page.Results {
		msgs[i] = page.Results[i].Message
	}
	if err := decorate(ctx, s.reads(), actor, msgs); err != nil {
		return nil, err
	}
	for i := range msgs {
		page.Results[i].Message = msgs[i]
	}
	if last != "" {
		page.NextCursor = encodeCursor(last)
	}
	return page, nil
}

// visibleChannels is a subquery of the ids of the channels of workspace
// $ws that user $user may read; guests do not see public channels they are
// not in.
func visibleChannels(ws, user string, role parley.Role) string {
	members := `SELECT cm.channel_id FROM channel_members cm WHERE cm.workspace_id = ` + ws + ` AND cm.user_id = ` + user
	if role == parley.RoleGuest {
		return members
	}
	return `SELECT c.id FROM channels c WHERE c.workspace_id = ` + ws + ` AND c.kind = 'public' UNION ` + members
}

// searchSQLite walks the FTS5 index by descending document number (newest
// first, see the migration) and stops after limit+1 visible matches, so a
// page costs about a page whatever the term's frequency. The key is the
// document number.
func (s *Store) searchSQLite(ctx context.Context, page *parley.SearchPage, actor, workspaceID string, role parley.Role,
	terms []searchTerm, key string, limit int) (string, error) {
	before := int64(math.MaxInt64)
	if key != "" {
		n, err := strconv.ParseInt(strings.TrimPrefix(key, "d"), 10, 64)
		if err != nil || !strings.HasPrefix(key, "d") {
			return "", parley.Errorf(parley.EINVALID, "invalid cursor")
		}
		before = n
	}
	rows, err := s.reads().QueryContext(ctx, `SELECT `+messageColumns+`,
			highlight(message_search, 0, $1, $2), f.rowid
		FROM message_search f
		JOIN message_search_docs d ON d.doc = f.rowid
		JOIN messages msg ON msg.id = d.message_id
		WHERE message_search MATCH $3 AND f.rowid < $4 AND msg.deleted_at IS NULL
		  AND d.channel_id IN (`+visibleChannels("$5", "$6", role)+`)
		ORDER BY f.rowid DESC LIMIT $7`,
		parley.HighlightStart, parley.HighlightEnd, fts5Query(terms), before, workspaceID, actor, limit+1)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var docs []int64
	for rows.Next() {
		var hl string
		var doc int64
		m, _, err := scanMessage(scanFunc(func(dest ...any) error {
			return rows.Scan(append(dest, &hl, &doc)...)
		}))
		if err != nil {
			return "", err
		}
		page.Results = append(page.Results, parley.SearchResult{Message: *m, Highlight: hl})
		docs = append(docs, doc)
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if len(page.Results) <= limit {
		return "", nil
	}
	page.Results = page.Results[:limit]
	return "d" + strconv.FormatInt(docs[limit-1], 10), nil
}

// pgPunct is the ASCII punctuation the search column turns into spaces
// (postgres/00004_search.sql) and pgPunctSpaces its replacement; the
// highlighter also blanks the highlight markers, so that every marker in
// ts_headline's answer is one it put there.
const pgPunct = `!"#$%&'()*+,-./:;<=>?@[\]^_` + "`{|}~" + parley.HighlightStart + parley.HighlightEnd

var pgPunctSpaces = strings.Repeat(" ", utf8.RuneCountInString(pgPunct))

// searchPostgres finds the page with the GIN index (rare terms) or by
// walking the workspace's messages newest first (common terms), as the
// planner judges from the terms' frequencies, then highlights only the
// page. Newest first is by id: ids are time-ordered (ULIDs), so the primary
// key (workspace_id, id) serves the walk. The key is the id.
func (s *Store) searchPostgres(ctx context.Context, page *parley.SearchPage, actor, workspaceID string, role parley.Role,
	terms []searchTerm, key string, limit int) (string, error) {
	// Planned afresh for each query (an unnamed statement, not pgx's cached
	// prepared one): a generic plan, chosen once for every term, would walk
	// for rare terms or sort every match of common ones.
	args := []any{pgx.QueryExecModeExec, workspaceID, actor, tsQuery(terms), limit + 1, pgPunct, pgPunctSpaces,
		"HighlightAll=true, StartSel=" + parley.HighlightStart + ", StopSel=" + parley.HighlightEnd}
	cond := ""
	if key != "" {
		if !strings.HasPrefix(key, parley.PrefixMessage) {
			return "", parley.Errorf(parley.EINVALID, "invalid cursor")
		}
		cond = ` AND msg.id < $8`
		args = append(args, key)
	}
	match := `msg.search @@ to_tsquery('simple', $3)`
	if freq, rows := s.termFrequencies(ctx); walkByRecency(terms, freq, rows, limit) {
		// Not a condition the GIN index can take (searchstats.go): the
		// planner walks the primary key newest first and stops after a page.
		match = `COALESCE(` + match + `, false)`
	}
	inner := `SELECT ` + messageColumns + ` FROM messages msg
		WHERE msg.workspace_id = $1 AND msg.deleted_at IS NULL
		  AND ` + match + `
		  AND msg.channel_id IN (` + visibleChannels("$1", "$2", role) + `)` + cond + `
		ORDER BY msg.id DESC LIMIT $4`
	outer := strings.ReplaceAll(messageColumns, "msg.", "p.")
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+outer+`,
			ts_headline('simple', translate(p.text, $5, $6), to_tsquery('simple', $3), $7)
		FROM (`+inner+`) p ORDER BY p.id DESC`, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	for rows.Next() {
		var hl string
		m, _, err := scanMessage(scanFunc(func(dest ...any) error {
			return rows.Scan(append(dest, &hl)...)
		}))
		if err != nil {
			return "", err
		}
		page.Results = append(page.Results, parley.SearchResult{Message: *m, Highlight: restoreHighlight(m.Text, hl)})
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if len(page.Results) <= limit {
		return "", nil
	}
	page.Results = page.Results[:limit]
	return page.Results[limit-1].Message.ID, nil
}

// restoreHighlight puts the markers of hl, ts_headline's answer over the
// text with its punctuation blanked one character for one, back into the
// original text. Should the two ever disagree, the text goes unmarked
// rather than garbled.
func restoreHighlight(text, hl string) string {
	var b strings.Builder
	b.Grow(len(hl))
	rest := text
	for _, r := range hl {
		if string(r) == parley.HighlightStart || string(r) == parley.HighlightEnd {
			b.WriteRune(r)
			continue
		}
		if rest == "" {
			return text
		}
		o, n := utf8.DecodeRuneInString(rest)
		b.WriteRune(o)
		rest = rest[n:]
	}
	if rest != "" {
		return text
	}
	return b.String()
}
