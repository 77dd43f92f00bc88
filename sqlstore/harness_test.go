package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"parley"
	"parley/internal/testpg"
	"parley/sqlstore"
	"parley/storetest"
)

// The storetest Harness on both databases: stores opened with a live
// configuration, and row writes counted by triggers that the test adds to
// the store's own database through a connection of its own, so that the
// count is the database's, not the store's word.

// sideDBs maps each store opened through a harness to that connection.
var sideDBs sync.Map // parley.Store → *sql.DB

func harness(d sqlstore.Dialect) storetest.Harness {
	return storetest.Harness{
		Open: func(tb testing.TB, pub parley.EventPublisher, live parley.LiveConfigSource) parley.Store {
			tb.Helper()
			cfg := sqlstore.Config{Publisher: pub, LiveConfig: live}
			driver, dsn := "pgx", ""
			if d == sqlstore.Postgres {
				cfg.PostgresURL = testpg.New(tb)
				dsn = cfg.PostgresURL
			} else {
				cfg.Path = filepath.Join(tb.TempDir(), "parley.db")
				driver, dsn = "sqlite", "file:"+cfg.Path+"?_pragma=busy_timeout(10000)"
			}
			s := mustOpen(tb, cfg)
			side, err := sql.Open(driver, dsn)
			if err != nil {
				tb.Fatalf("open side connection: %v", err)
			}
			side.SetMaxOpenConns(1)
			tb.Cleanup(func() { side.Close(); sideDBs.Delete(parley.Store(s)) })
			sideDBs.Store(parley.Store(s), side)
			return s
		},
		SetPresence: func(tb testing.TB, s parley.Store, p parley.PresenceSnapshot) {
			s.(*sqlstore.Store).SetPresence(p)
		},
		RowWrites: func(tb testing.TB, s parley.Store, table string) func() int64 {
			tb.Helper()
			db := side(tb, s)
			ctx := context.Background()
			var stmts []string
			if d == sqlstore.Postgres {
				stmts = []string{
					`CREATE TABLE IF NOT EXISTS test_row_writes (tbl TEXT PRIMARY KEY, n BIGINT NOT NULL)`,
					`CREATE OR REPLACE FUNCTION test_count_row_write() RETURNS trigger LANGUAGE plpgsql AS $$
					 BEGIN UPDATE test_row_writes SET n = n + 1 WHERE tbl = TG_TABLE_NAME; RETURN NULL; END $$`,
					fmt.Sprintf(`CREATE OR REPLACE TRIGGER test_count_%[1]s AFTER INSERT OR UPDATE ON %[1]s
					 FOR EACH ROW EXECUTE FUNCTION test_count_row_write()`, table),
				}
			} else {
				stmts = []string{
					`CREATE TABLE IF NOT EXISTS test_row_writes (tbl TEXT PRIMARY KEY, n BIGINT NOT NULL)`,
					fmt.Sprintf(`CREATE TRIGGER IF NOT EXISTS test_count_ins_%[1]s AFTER INSERT ON %[1]s
					 BEGIN UPDATE test_row_writes SET n = n + 1 WHERE tbl = '%[1]s'; END`, table),
					fmt.Sprintf(`CREATE TRIGGER IF NOT EXISTS test_count_upd_%[1]s AFTER UPDATE ON %[1]s
					 BEGIN UPDATE test_row_writes SET n = n + 1 WHERE tbl = '%[1]s'; END`, table),
				}
			}
			stmts = append(stmts, `INSERT INTO test_row_writes (tbl, n) VALUES ('`+table+`', 0)
				ON CONFLICT (tbl) DO UPDATE SET n = 0`)
			for _, q := range stmts {
				if _, err := db.ExecContext(ctx, q); err != nil {
					tb.Fatalf("count row writes of %s: %v", table, err)
				}
			}
			return func() int64 {
				var n int64
				if err := db.QueryRowContext(ctx, `SELECT n FROM test_row_writes WHERE tbl = $1`, table).Scan(&n); err != nil {
					tb.Fatalf("read row writes of %s: %v", table, err)
				}
				return n
			}
		},
		Rows: func(tb testing.TB, s parley.Store, table string) int64 {
			tb.Helper()
			var n int64
			if err := side(tb, s).QueryRowContext(context.Background(), `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
				tb.Fatalf("count rows of %s: %v", table, err)
			}
			return n
		},
	}
}

func side(tb testing.TB, s parley.Store) *sql.DB {
	tb.Helper()
	db, ok := sideDBs.Load(s)
	if !ok {
		tb.Fatal("store was not opened through the harness")
	}
	return db.(*sql.DB)
}

func TestSQLiteHarness(t *testing.T)   { storetest.RunHarness(t, harness(sqlstore.SQLite)) }
func TestPostgresHarness(t *testing.T) { storetest.RunHarness(t, harness(sqlstore.Postgres)) }
