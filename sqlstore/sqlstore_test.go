package sqlstore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"parley"
	"parley/internal/testpg"
	"parley/sqlstore"
	"parley/storetest"
)

// contractRelay is the outbox relay of the stores the contract suite runs
// on. The suite checks that a store publishes each committed event exactly
// once and, on SQLite, in seq order: the writers' own publishes. The relay
// publishes again, by design, what was not acknowledged within its grace
// (1 s by default), which a loaded machine running -race can pass; the
// gateways drop such duplicates by seq. So here its grace is far longer
// than any subtest, and the relay's own tests (outbox_test.go) run it fast.
var contractRelay = sqlstore.RelayConfig{Grace: 10 * time.Minute}

// openSQLite returns a fresh SQLite store in the test's temp dir.
func openSQLite(tb testing.TB, pub parley.EventPublisher) parley.Store {
	tb.Helper()
	return mustOpen(tb, sqlstore.Config{Path: filepath.Join(tb.TempDir(), "parley.db"), Publisher: pub, Relay: contractRelay})
}

// openPostgres returns a store on a fresh PostgreSQL database.
func openPostgres(tb testing.TB, pub parley.EventPublisher) parley.Store {
	tb.Helper()
	return mustOpen(tb, sqlstore.Config{PostgresURL: testpg.New(tb), Publisher: pub, Relay: contractRelay})
}

// openPostgresNoLanes is openPostgres without group-commit lanes: every
// write in its own transaction (the benchmarks' baseline).
func openPostgresNoLanes(tb testing.TB, pub parley.EventPublisher) parley.Store {
	tb.Helper()
	return mustOpen(tb, sqlstore.Config{PostgresURL: testpg.New(tb), Publisher: pub, WriteLanes: -1, Relay: contractRelay})
}

func mustOpen(tb testing.TB, cfg sqlstore.Config) *sqlstore.Store {
	tb.Helper()
	s, err := sqlstore.Open(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestSQLite(t *testing.T)   { storetest.Run(t, openSQLite) }
func TestPostgres(t *testing.T) { storetest.Run(t, openPostgres) }

func TestSQLiteCaps(t *testing.T) {
	storetest.RunCaps(t, func(tb testing.TB, caps parley.Caps) parley.Store {
		return mustOpen(tb, sqlstore.Config{Path: filepath.Join(tb.TempDir(), "parley.db"), Caps: caps})
	})
}

func TestPostgresCaps(t *testing.T) {
	storetest.RunCaps(t, func(tb testing.TB, caps parley.Caps) parley.Store {
		return mustOpen(tb, sqlstore.Config{PostgresURL: testpg.New(tb), Caps: caps})
	})
}

// TestPostgresCapsNoLanes races the caps without group-commit lanes: every
// write its own transaction, so only the row locks keep the counts exact.
func TestPostgresCapsNoLanes(t *testing.T) {
	storetest.RunCaps(t, func(tb testing.TB, caps parley.Caps) parley.Store {
		return mustOpen(tb, sqlstore.Config{PostgresURL: testpg.New(tb), Caps: caps, WriteLanes: -1})
	})
}
