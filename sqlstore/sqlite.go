package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"parley"

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
	s.gc = newGroupCommitter(wdb, batch, s.now, s.log, s.pub)
	return nil
}

// groupCommitter is SQLite's single writer. Concurrent writes queue up while
// a commit is in flight and are then run together in one transaction, each
// inside its own savepoint so that one failing write does not undo the
// others. One fsync then covers the whole batch.
type groupCommitter struct {
	db       *sql.DB
	reqs     chan *writeReq
	maxBatch int
	now      func() time.Time
	log      *slog.Logger
	pub      parley.EventPublisher // may be nil
	stmts    *stmtCache            // used only by the run goroutine and the writes it runs
	quit     chan struct{}
	done     chan struct{} // closed when run returns
}

type writeReq struct {
	ctx    context.Context
	fn     func(context.Context, *Tx) error
	events []parley.Event
	err    error
	done   chan struct{}
}

func newGroupCommitter(db *sql.DB, maxBatch int, now func() time.Time, log *slog.Logger, pub parley.EventPublisher) *groupCommitter {
	g := &groupCommitter{
		db:       db,
		reqs:     make(chan *writeReq, maxBatch),
		maxBatch: maxBatch,
		now:      now,
		log:      log,
		pub:      pub,
		stmts:    newStmtCache(db, log),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go g.run()
	return g
}

// do queues fn and waits for its batch to commit and its events to be
// published. If ctx ends first, do returns ctx's error, but a write already
// queued may still commit.
func (g *groupCommitter) do(ctx context.Context, fn func(context.Context, *Tx) error) error {
	r := &writeReq{ctx: ctx, fn: fn, done: make(chan struct{})}
	select {
	case g.reqs <- r:
	case <-g.quit:
		return parley.Errorf(parley.EUNAVAILABLE, "store is shutting down")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *groupCommitter) close() {
	select {
	case <-g.quit:
	default:
		close(g.quit)
	}
	<-g.done
}

func (g *groupCommitter) run() {
	defer close(g.done)
	defer g.stmts.close()
	batch := make([]*writeReq, 0, g.maxBatch)
	for {
		select {
		case r := <-g.reqs:
			batch = append(batch[:0], r)
		case <-g.quit:
			g.failPending()
			return
		}
	fill:
		for len(batch) < g.maxBatch {
			select {
			case r := <-g.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		g.commit(batch)
		g.stmts.preparePending(context.Background())
		clear(batch)
	}
}

// failPending answers the writes still queued at shutdown.
func (g *groupCommitter) failPending() {
	for {
		select {
		case r := <-g.reqs:
			r.err = parley.Errorf(parley.EUNAVAILABLE, "store is shutting down")
			close(r.done)
		default:
			return
		}
	}
}

func (g *groupCommitter) commit(batch []*writeReq) {
	finish := func(err error) {
		for _, r := range batch {
			if err != nil && r.err == nil {
				r.err, r.events = err, nil
			}
			close(r.done)
		}
	}
	// Background context: a batch must not be torn by one caller leaving.
	ctx := context.Background()
	sqlTx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		finish(fmt.Errorf("begin: %w", err))
		return
	}
	now := txTime(g.now())
	base := &Tx{Tx: sqlTx, stmts: g.stmts} // savepoints, prepared once
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			continue
		}
		if _, err := base.ExecContext(ctx, "SAVEPOINT w"); err != nil {
			sqlTx.Rollback()
			finish(fmt.Errorf("savepoint: %w", err))
			return
		}
		tx := &Tx{Tx: sqlTx, now: now, stmts: g.stmts}
		if err := r.fn(r.ctx, tx); err != nil {
			r.err = err
			if _, rbErr := base.ExecContext(ctx, "ROLLBACK TO w"); rbErr != nil {
				sqlTx.Rollback()
				finish(fmt.Errorf("rollback to savepoint: %w", rbErr))
				return
			}
		} else {
			r.events = tx.events
		}
		if _, err := base.ExecContext(ctx, "RELEASE w"); err != nil {
			sqlTx.Rollback()
			finish(fmt.Errorf("release savepoint: %w", err))
			return
		}
	}
	if err := sqlTx.Commit(); err != nil {
		g.log.Error("sqlite group commit failed", "batch", len(batch), "err", err)
		finish(fmt.Errorf("commit: %w", err))
		return
	}
	// Publishing here, in batch order, before anyone is answered, keeps the
	// bus in commit order: a channel's events leave this node in seq order.
	if g.pub != nil {
		var events []parley.Event
		for _, r := range batch {
			events = append(events, r.events...)
		}
		if len(events) > 0 {
			g.pub.Publish(events)
		}
	}
	finish(nil)
}
