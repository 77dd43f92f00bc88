package sqlstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"parley"
	"parley/internal/testpg"
	"parley/sqlstore"
	"parley/storetest"
)

// openSQLite returns a fresh SQLite store in the test's temp dir.
func openSQLite(tb testing.TB, pub parley.EventPublisher) parley.Store {
	tb.Helper()
	return mustOpen(tb, sqlstore.Config{Path: filepath.Join(tb.TempDir(), "parley.db"), Publisher: pub})
}

// openPostgres returns a store on a fresh PostgreSQL database.
func openPostgres(tb testing.TB, pub parley.EventPublisher) parley.Store {
	tb.Helper()
	return mustOpen(tb, sqlstore.Config{PostgresURL: testpg.New(tb), Publisher: pub})
}

// openPostgresNoLanes is openPostgres without group-commit lanes: every
// write in its own transaction (the benchmarks' baseline).
func openPostgresNoLanes(tb testing.TB, pub parley.EventPublisher) parley.Store {
	tb.Helper()
	return mustOpen(tb, sqlstore.Config{PostgresURL: testpg.New(tb), Publisher: pub, WriteLanes: -1})
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
