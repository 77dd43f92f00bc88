package sqlstore

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"parley"
	"parley/internal/testpg"
)

// Fuzz targets for the parsers of what clients send the store: search
// queries and paging cursors. Their seeds (testdata/fuzz/<Name>/) run as
// ordinary tests; `make fuzz` explores further.

// ftsChecker runs an FTS5 MATCH expression against a table built with the
// tokenizer of migrations/sqlite/00004_search.sql, so a rendered query is
// checked by the engine itself rather than by reading it.
func ftsChecker(tb testing.TB) func(q string) error {
	tb.Helper()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		tb.Fatal(err)
	}
	db.SetMaxOpenConns(1) // one connection: one in-memory database
	tb.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE VIRTUAL TABLE t USING fts5(text, tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3 4');
		INSERT INTO t (text) VALUES ('deploy failed again'), ('héllo wörld ½ 日本語')`); err != nil {
		tb.Fatal(err)
	}
	return func(q string) error {
		var n int
		return db.QueryRow(`SELECT count(*) FROM t WHERE t MATCH ?`, q).Scan(&n)
	}
}

// tsChecker runs a to_tsquery input on PostgreSQL (a database of the test's
// own, from internal/testpg).
func tsChecker(tb testing.TB) func(q string) error {
	tb.Helper()
	db, err := sql.Open("pgx", testpg.New(tb))
	if err != nil {
		tb.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	tb.Cleanup(func() { db.Close() })
	return func(q string) error {
		var s string
		return db.QueryRow(`SELECT to_tsquery('simple', $1)::text`, q).Scan(&s)
	}
}

func FuzzSearchQuery(f *testing.F) {
	for _, s := range []string{
		"deploy", "deploy failed ", `"deploy failed" now`, `"unclosed`, `foo-bar a.b`,
		`NEAR(a b)`, `a OR b NOT c`, `col:val`, `^start`, `a AND`, `*`, `"`, `""`, `" "`,
		`'`, `\`, `a:*`, `!a & (b | c)`, `a <-> b`, `a <2> b`, `'quoted'`, `\'`,
		"héllo wörld", "日本語", "x\u0301", "\u0301", "½ ⅔ ²", "a\x00b", "\xff\xfe",
		strings.Repeat("a ", 20), strings.Repeat(`"a b" `, 17), `"` + strings.Repeat("w ", 40) + `"`,
		strings.Repeat("é", 513), "\u200b\u200d", "ǅ", "İ", "ß",
	} {
		f.Add(s)
	}
	fts, ts := ftsChecker(f), tsChecker(f)
	f.Fuzz(func(t *testing.T, q string) {
		terms, err := parseSearchQuery(q)
		if err != nil {
			if parley.ErrorCode(err) != parley.EINVALID {
				t.Fatalf("parse %q: %v, want a bad_request", q, err)
			}
			return
		}
		if !utf8.ValidString(q) {
			t.Fatalf("parse %q: accepted invalid UTF-8", q)
		}
		if len(terms) > maxSearchTerms {
			t.Fatalf("parse %q: %d terms", q, len(terms))
		}
		for _, term := range terms {
			if len(term.tokens) == 0 || len(term.tokens) > maxPhraseTokens {
				t.Fatalf("parse %q: a term of %d tokens", q, len(term.tokens))
			}
			for _, tok := range term.tokens {
				for _, r := range tok {
					if !isTokenRune(r) {
						t.Fatalf("parse %q: token %q holds %q", q, tok, r)
					}
				}
			}
		}
		if len(terms) == 0 {
			return // nothing to match: the store answers an empty page
		}
		if err := fts(fts5Query(terms)); err != nil {
			t.Fatalf("query %q: FTS5 refuses %q: %v", q, fts5Query(terms), err)
		}
		if err := ts(tsQuery(terms)); err != nil {
			t.Fatalf("query %q: to_tsquery refuses %q: %v", q, tsQuery(terms), err)
		}
	})
}

// cursorStore is a SQLite store with one user, workspace and channel, for
// feeding cursors to every method that takes one.
type cursorStore struct {
	s        *Store
	user, ws string
	channel  string
}

func newCursorStore(tb testing.TB) *cursorStore {
	tb.Helper()
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: filepath.Join(tb.TempDir(), "parley.db")})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	u, err := s.CreateUser(ctx, parley.NewUser{Email: "c@example.com", Name: "C", Handle: "cursor", PasswordHash: "x"})
	if err != nil {
		tb.Fatal(err)
	}
	ws, err := s.CreateWorkspace(ctx, u.ID, "Team", "team")
	if err != nil {
		tb.Fatal(err)
	}
	ch, err := s.CreateChannel(ctx, u.ID, ws.ID, parley.NewChannel{Name: "fuzz", Kind: parley.KindPublic})
	if err != nil {
		tb.Fatal(err)
	}
	if _, _, err := s.PostMessage(ctx, u.ID, ch.ID, parley.NewMessage{Text: "deploy failed"}); err != nil {
		tb.Fatal(err)
	}
	return &cursorStore{s: s, user: u.ID, ws: ws.ID, channel: ch.ID}
}

func FuzzDecodeCursor(f *testing.F) {
	for _, s := range []string{
		"", encodeCursor("general"), encodeCursor("01J0000000000000000000000"), encodeCursor("msg_01J00000000000000000000"),
		encodeCursor("17:msg_x"), encodeCursor("-1:x"), encodeCursor("99999999999999999999:x"), encodeCursor(":"),
		encodeCursor("a\x00b"), encodeCursor("\xff"), "====", "!!", "a", "ab=", "Zm9v\n", "Zm9v+/",
		encodeCursor(strings.Repeat("z", 4096)), encodeCursor("' OR 1=1 --"),
	} {
		f.Add(s)
	}
	cs := newCursorStore(f)
	f.Fuzz(func(t *testing.T, cursor string) {
		key, err := decodeCursor(cursor)
		if err != nil {
			if parley.ErrorCode(err) != parley.EINVALID {
				t.Fatalf("decode %q: %v, want a bad_request", cursor, err)
			}
		} else if cursor != "" {
			if key == "" || !utf8.ValidString(key) || strings.IndexByte(key, 0) >= 0 {
				t.Fatalf("decode %q: accepted key %q", cursor, key)
			}
			if again, err := decodeCursor(encodeCursor(key)); err != nil || again != key {
				t.Fatalf("key %q does not survive encode and decode: %q, %v", key, again, err)
			}
		}
		// Every method that pages by cursor answers a page or a
		// bad_request: a cursor is client input, never an internal error.
		ctx := context.Background()
		check := func(what string, err error) {
			if c := parley.ErrorCode(err); c != "" && c != parley.EINVALID {
				t.Fatalf("%s with cursor %q: %v", what, cursor, err)
			}
		}
		_, err = cs.s.ListMembers(ctx, cs.user, cs.channel, cursor, 10)
		check("ListMembers", err)
		_, err = cs.s.ListChannels(ctx, cs.user, cs.ws, parley.ChannelQuery{Cursor: cursor})
		check("ListChannels", err)
		_, err = cs.s.ListWorkspaceUsers(ctx, cs.user, cs.ws, parley.UserQuery{Cursor: cursor})
		check("ListWorkspaceUsers", err)
		_, err = cs.s.ListThreads(ctx, cs.user, cs.ws, parley.ThreadQuery{Cursor: cursor})
		check("ListThreads", err)
		_, err = cs.s.Search(ctx, cs.user, cs.ws, parley.SearchQuery{Q: "deploy", Cursor: cursor})
		check("Search", err)
	})
}
