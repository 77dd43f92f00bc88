package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"parley"
	"parley/internal/testpg"
	"parley/storetest"
)

// Boot must not scale with the number of messages: it reads maintained
// counters. These tests count the queries a boot runs as messages grow
// tenfold, and on SQLite check that no query scans a message, mention or
// event table.

// countingQuerier records every query run through it.
type countingQuerier struct {
	q querier

	mu      sync.Mutex
	queries []recordedQuery // guarded by mu
}

type recordedQuery struct {
	sql  string
	args []any
}

func (c *countingQuerier) record(query string, args []any) {
	c.mu.Lock()
	c.queries = append(c.queries, recordedQuery{query, args})
	c.mu.Unlock()
}

func (c *countingQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	c.record(query, args)
	return c.q.ExecContext(ctx, query, args...)
}

func (c *countingQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	c.record(query, args)
	return c.q.QueryContext(ctx, query, args...)
}

func (c *countingQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	c.record(query, args)
	return c.q.QueryRowContext(ctx, query, args...)
}

// bootQueries boots as actor through a counting querier and returns the
// queries run.
func bootQueries(t *testing.T, s *Store, actor string, q parley.BootQuery) []recordedQuery {
	t.Helper()
	cq := &countingQuerier{q: s.reads()}
	if _, err := s.boot(context.Background(), cq, actor, q); err != nil {
		t.Fatalf("boot: %v", err)
	}
	return cq.queries
}

func TestBootDoesNotScaleWithMessages(t *testing.T) {
	for _, d := range []Dialect{SQLite, Postgres} {
		t.Run(string(d), func(t *testing.T) {
			cfg := Config{Path: filepath.Join(t.TempDir(), "parley.db")}
			if d == Postgres {
				cfg = Config{PostgresURL: testpg.New(t)}
			}
			s, err := Open(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			testBootScaling(t, s)
		})
	}
}

func testBootScaling(t *testing.T, s *Store) {
	ctx := context.Background()
	owner := storetest.MustUser(t, s, "owner")
	bob := storetest.MustUser(t, s, "bob")
	ws := storetest.MustWorkspace(t, s, owner)
	storetest.MustJoinWorkspace(t, s, ws, owner, bob)
	var chans []*parley.Channel
	for i := range 5 {
		ch := storetest.MustChannel(t, s, ws, owner, fmt.Sprintf("c%d", i), parley.KindPublic)
		if _, err := s.JoinChannel(ctx, bob.ID, ch.ID); err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	dm, _, err := s.OpenDM(ctx, owner.ID, ws.ID, []string{bob.ID})
	if err != nil {
		t.Fatal(err)
	}
	chans = append(chans, dm)
	post := func(n int) {
		for _, ch := range chans {
			for i := range n {
				text := fmt.Sprintf("message %d", i)
				switch i % 10 {
				case 0:
					text += " @" + bob.Handle
				case 1:
					text += " @channel"
				}
				m := storetest.MustPost(t, s, owner, ch, text)
				if i%7 == 3 {
					if err := s.DeleteMessage(ctx, owner.ID, m.ID); err != nil {
						t.Fatal(err)
					}
				}
				if i%9 == 0 {
					if _, _, err := s.PostMessage(ctx, owner.ID, ch.ID, parley.NewMessage{Text: "reply @" + bob.Handle, ThreadRootID: m.ID}); err != nil && parley.ErrorCode(err) != parley.EINVALID {
						t.Fatal(err)
					}
				}
			}
		}
	}
	full := parley.BootQuery{WorkspaceID: ws.ID}
	one := parley.BootQuery{WorkspaceID: ws.ID, ChannelID: chans[0].ID}

	post(10)
	fullBefore, oneBefore := bootQueries(t, s, bob.ID, full), bootQueries(t, s, bob.ID, one)
	post(100) // ten times as many
	fullAfter, oneAfter := bootQueries(t, s, bob.ID, full), bootQueries(t, s, bob.ID, one)
	// Workspace, self, channels, and the threads summary (threads.go).
	if len(fullBefore) != len(fullAfter) || len(fullAfter) != 4 {
		t.Errorf("full boot: %d queries with 10 messages per channel, %d with 110; want 4 both times", len(fullBefore), len(fullAfter))
	}
	if len(oneBefore) != len(oneAfter) {
		t.Errorf("one-channel boot: %d queries, then %d", len(oneBefore), len(oneAfter))
	}
	b, err := s.Boot(ctx, bob.ID, full)
	if err != nil {
		t.Fatal(err)
	}
	if r := b.Channels[0]; r.UnreadCount == 0 || r.MentionCount == 0 {
		t.Fatalf("expected something unread and mentioned: %+v", r)
	}

	if s.Dialect() != SQLite {
		return
	}
	// No table scan of messages, mentions or events: every query of a boot
	// seeks by index, so its cost follows the caller's channels and their
	// unread mentions and deletions, not the messages.
	for _, q := range slices.Concat(fullAfter, oneAfter) {
		rows, err := s.rdb.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q.sql, q.args...)
		if err != nil {
			t.Fatalf("explain %s: %v", q.sql, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN ") && !strings.HasPrefix(step, "SCAN CONSTANT") {
				t.Errorf("boot query scans a table (%s):\n%s\nplan: %q", step, q.sql, plan)
			}
		}
	}
}
