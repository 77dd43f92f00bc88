package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"parley"
	"parley/internal/testpg"
)

func TestParseSearchQuery(t *testing.T) {
	for _, c := range []struct{ q, fts, ts string }{
		{"deploy", `"deploy"*`, `('deploy':*)`},
		{"deploy ", `"deploy"`, `('deploy')`},
		{"Deploy failed", `"Deploy" "failed"*`, `('Deploy') & ('failed':*)`},
		{`"deploy failed"`, `"deploy failed"`, `('deploy' <-> 'failed')`},
		{`"deploy failed" now`, `"deploy failed" "now"*`, `('deploy' <-> 'failed') & ('now':*)`},
		{`"unclosed phrase`, `"unclosed phrase"`, `('unclosed' <-> 'phrase')`},
		{`alice@example.com`, `"alice example com"*`, `('alice' <-> 'example' <-> 'com':*)`},
		{`NEAR(a b) OR c:* -d`, `"NEAR a" "b" "OR" "c" "d"*`, `('NEAR' <-> 'a') & ('b') & ('OR') & ('c') & ('d':*)`},
		{`it's 'x' \ ;`, `"it s" "x"`, `('it' <-> 's') & ('x')`},
		{`東京 café`, `"東京" "café"*`, `('東京') & ('café':*)`},
		{`"" () * -`, ``, ``},
	} {
		terms, err := parseSearchQuery(c.q)
		if err != nil {
			t.Fatalf("parse %q: %v", c.q, err)
		}
		if got := fts5Query(terms); got != c.fts {
			t.Errorf("fts5Query(%q) = %q, want %q", c.q, got, c.fts)
		}
		if got := tsQuery(terms); got != c.ts {
			t.Errorf("tsQuery(%q) = %q, want %q", c.q, got, c.ts)
		}
	}
}

func TestRestoreHighlight(t *testing.T) {
	s, e := parley.HighlightStart, parley.HighlightEnd
	for _, c := range []struct{ text, hl, want string }{
		{"mail alice@example.com", "mail alice " + s + "example" + e + " com", "mail alice@" + s + "example" + e + ".com"},
		{"café, 東京!", s + "café" + e + "  東京 ", s + "café" + e + ", 東京!"},
		{"a\ue000b", "a b", "a\ue000b"},         // markers in the text were blanked
		{"short", "longer text", "short"},       // disagreement: unmarked
		{"longer text", "short", "longer text"}, // disagreement: unmarked
	} {
		if got := restoreHighlight(c.text, c.hl); got != c.want {
			t.Errorf("restoreHighlight(%q, %q) = %q, want %q", c.text, c.hl, got, c.want)
		}
	}
}

func TestWalkByRecency(t *testing.T) {
	freq := map[string]float64{"deploy": 0.01, "failed": 0.01, "the": 0.5}
	parse := func(q string) []searchTerm {
		terms, err := parseSearchQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		return terms
	}
	for _, c := range []struct {
		q    string
		rows float64
		want bool
	}{
		{`"deploy failed"`, 1e6, true},  // a page within ~4,000 rows, 10,000 matches
		{`"deploy failed"`, 1e4, false}, // 100 matches: the index is cheaper
		{`the `, 1e6, true},
		{`the deploy `, 1e6, true},
		{`the rare `, 1e6, false}, // an uncommon word: the planner decides
		{`the`, 1e6, false},       // a prefix: the planner decides
	} {
		if got := walkByRecency(parse(c.q), freq, c.rows, 20); got != c.want {
			t.Errorf("walkByRecency(%q, %g rows) = %v, want %v", c.q, c.rows, got, c.want)
		}
	}
	if walkByRecency(parse("the "), nil, 1e6, 20) {
		t.Error("walk without statistics")
	}
}

// TestSearchPostgresWalk: once ANALYZE has seen a phrase's words go
// together, the search walks the newest messages, and finds the same pages
// as through the index.
func TestSearchPostgresWalk(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Config{PostgresURL: testpg.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	owner, err := s.CreateUser(ctx, parley.NewUser{Email: "o@example.com", Name: "O", Handle: "owner-walk", PasswordHash: "x"})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := s.CreateWorkspace(ctx, owner.ID, "W", "w-walk")
	if err != nil {
		t.Fatal(err)
	}
	ch, err := s.CreateChannel(ctx, owner.ID, ws.ID, parley.NewChannel{Name: "ops", Kind: parley.KindPublic})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 300 {
		text := fmt.Sprintf("note %d", i)
		if i%3 == 0 {
			text = fmt.Sprintf("deploy failed again %d", i)
			want = append([]string{text}, want...)
		}
		if _, _, err := s.PostMessage(ctx, owner.ID, ch.ID, parley.NewMessage{Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.rdb.ExecContext(ctx, `ANALYZE messages`); err != nil {
		t.Fatal(err)
	}
	freq, rows := s.termFrequencies(ctx)
	terms, _ := parseSearchQuery(`"deploy failed"`)
	if !walkByRecency(terms, freq, rows, 7) {
		t.Fatalf("no walk for a phrase in a third of the messages: rows %g, freq %v", rows, freq)
	}
	var got []string
	q := parley.SearchQuery{Q: `"deploy failed"`, Limit: 7}
	for {
		page, err := s.Search(ctx, owner.ID, ws.ID, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Results {
			got = append(got, r.Message.Text)
			if !strings.HasPrefix(r.Highlight, parley.HighlightStart+"deploy") {
				t.Fatalf("highlight %q", r.Highlight)
			}
		}
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("walked search found %d messages %q…, want %d", len(got), got[:min(3, len(got))], len(want))
	}
}
