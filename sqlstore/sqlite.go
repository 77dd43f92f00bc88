package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// SQLite settings: WAL so readers never block the writer, FULL sync so a
// committed message survives power loss (group commit pays one fsync per
// batch), a busy timeout for the rare checkpoint contention, and foreign keys
// on.
var sqlitePragmas = []string{
	"journal_mode(WAL)",
	"synchronous(FULL)",
	"busy_timeout(10000)",
	"foreign_keys(ON)",
	"temp_store(MEMORY)",
	"cache_size(-32000)",
}

func sqliteDSN(path string, readOnly bool) string {
	q := url.Values{}
	for _, p := range sqlitePragmas {
		q.Add("_pragma", p)
	}
	if readOnly {
		q.Add("_pragma", "query_only(ON)")
	} else {
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

func (s *Store) openSQLite(ctx context.Context, cfg Config) error {
	s.dialect = SQLite
	if cfg.Path == "" {
		return fmt.Errorf("open sqlite: no path given")
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o755); err != nil {
		return fmt.Errorf("open sqlite: %w", err)
	}
	wdb, err := sql.Open("sqlite", sqliteDSN(cfg.Path, false))
	if err != nil {
		return fmt.Errorf("open sqlite writer: %w", err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	if err := wdb.PingContext(ctx); err != nil {
		wdb.Close()
		return fmt.Errorf("open sqlite %s: %w", cfg.Path, err)
	}
	rdb, err := sql.Open("sqlite", sqliteDSN(cfg.Path, true))
	if err != nil {
		wdb.Close()
		return fmt.Errorf("open sqlite readers: %w", err)
	}
	n := cfg.ReadConns
	if n <= 0 {
		n = max(8, 2*runtime.GOMAXPROCS(0))
	}
	rdb.SetMaxOpenConns(n)
	rdb.SetMaxIdleConns(n)
	s.wdb, s.rdb = wdb, rdb
	s.rstmts = newReadStmts(rdb)
	batch := cfg.MaxBatch
	if batch <= 0 {
		batch = 256
	}
	s.gc = newGroupCommitter(wdb, batch, s.now, s.log, s.publisher(), s.ob != nil, newStmtCache(wdb, s.log), nil)
	return nil
}
