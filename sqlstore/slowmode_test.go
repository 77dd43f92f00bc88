package sqlstore_test

import (
	"path/filepath"
	"testing"
	"time"

	"parley"
	"parley/internal/testpg"
	"parley/sqlstore"
	"parley/storetest"
)

func TestSQLiteSlowMode(t *testing.T) {
	storetest.RunSlowMode(t, func(tb testing.TB, pub parley.EventPublisher, now func() time.Time, live parley.LiveConfigSource) parley.Store {
		return mustOpen(tb, sqlstore.Config{Path: filepath.Join(tb.TempDir(), "parley.db"), Publisher: pub, Now: now, LiveConfig: live})
	})
}

func TestPostgresSlowMode(t *testing.T) {
	storetest.RunSlowMode(t, func(tb testing.TB, pub parley.EventPublisher, now func() time.Time, live parley.LiveConfigSource) parley.Store {
		return mustOpen(tb, sqlstore.Config{PostgresURL: testpg.New(tb), Publisher: pub, Now: now, LiveConfig: live})
	})
}

// TestPostgresSlowModeNoLanes: without group-commit lanes every post is its
// own transaction, so only the row's re-checked condition keeps one user's
// racing sessions to one post.
func TestPostgresSlowModeNoLanes(t *testing.T) {
	storetest.RunSlowMode(t, func(tb testing.TB, pub parley.EventPublisher, now func() time.Time, live parley.LiveConfigSource) parley.Store {
		return mustOpen(tb, sqlstore.Config{PostgresURL: testpg.New(tb), Publisher: pub, Now: now, LiveConfig: live, WriteLanes: -1})
	})
}
