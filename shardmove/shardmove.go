// Package shardmove moves a workspace online from one PostgreSQL shard to
// another (issue 17 item 5, docs/directory.md "Moving a workspace").
//
// A move is: BeginMove in the catalogue (moving); a copy of every row of
// the workspace from one REPEATABLE READ snapshot of the source, in
// batches, which never blocks the source's writers; catch-up rounds, each
// from a fresh snapshot, that bring the target up to date (the per-channel
// event log says which channels changed; their events are appended by
// seq, their messages, reactions and pins compared row by row; every other
// table of the workspace is compared whole), until a round changes few
// rows; Freeze (read_only: the routers refuse writes); a drain and a
// final catch-up; a check that both shards agree (per-channel last_seq,
// row counts per table, optionally checksums); CompleteMove (active on the
// target); and, in the background, the source's rows deleted in batches.
// Any failure before CompleteMove aborts: AbortMove and the target's copy
// deleted; the source stays the truth. A mover that crashed is recovered
// by running the move again (see Mover.Run).
//
// The tables are read from the shard's schema: a table with a workspace_id
// column is copied by it; the few without one are classified in
// schema.go, and a table the mover cannot attribute stops the move before
// it starts, so a new table is never left behind.
//
// The package must not serve or route requests, nor decide who may move a
// workspace: it is driven by `parley workspaces move` (an operator) and
// trusts the routers (issue 17 item 4) to refuse writes while the
// catalogue says read_only.
package shardmove

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx" driver
	"github.com/prometheus/client_golang/prometheus"

	"parley/internal/promutil"
	"parley/sqlstore"
	"parley/tenantdir"
)

// Defaults of Config's zero fields.
const (
	DefaultBatch      = 1000
	DefaultMaxRounds  = 10
	DefaultLagRows    = 200
	DefaultDrain      = 500 * time.Millisecond
	DefaultPurgeDelay = 2 * time.Second
)

// Config configures a Mover.
type Config struct {
	// Catalogue is the directory's write side; required.
	Catalogue *tenantdir.Catalogue
	// Batch is the most rows one copy read, write or delete takes
	// (default 1000).
	Batch int
	// MaxRounds bounds the catch-up rounds before the freeze (default 10);
	// LagRows: the freeze comes as soon as a round changed at most this
	// many rows (default 200).
	MaxRounds int
	LagRows   int
	// Drain is how long after the freeze the mover waits before the final
	// catch-up, so that every node has heard of read_only and writes
	// admitted just before it have committed (default 500 ms: two relay
	// polls of a catalogue changed by another process, plus the bus).
	// Part of the read-only window.
	Drain time.Duration
	// Checksums: the final check also compares a checksum of every table
	// (messages and events included) on both shards, not only row counts
	// and last_seq. Reads the whole workspace inside the read-only window.
	Checksums bool
	// PurgeDelay is how long after the switch the source's rows are kept
	// before the background purge starts (default 2 s); PurgePause is a
	// pause between its batches (default none).
	PurgeDelay time.Duration
	PurgePause time.Duration
	// Progress, when set, is told of each step.
	Progress func(Progress)
	// MigrateTarget runs the chat store's migrations on the target before
	// copying (default: yes; tests that craft schemas turn it off).
	NoMigrate  bool
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Progress is one step of a move, for progress output.
type Progress struct {
	Phase string // copy, catchup, freeze, final, verify, switch, purge, abort
	Table string
	Rows  int64 // rows so far in this phase
	Round int
	Lag   int64 // catch-up: events the target was behind at the round's start
	Note  string
}

// Summary is what a move did.
type Summary struct {
	Workspace string `json:"workspace"`
	From      string `json:"from"`
	To        string `json:"to"`
	// RowsCopied by the snapshot copy; RowsCaughtUp written or deleted by
	// the catch-up rounds (the final one included).
	RowsCopied   int64 `json:"rows_copied"`
	RowsCaughtUp int64 `json:"rows_caught_up"`
	// Rounds: catch-up rounds before the freeze; FinalRounds after it.
	Rounds      int           `json:"rounds"`
	FinalRounds int           `json:"final_rounds"`
	Copy        time.Duration `json:"copy_ns"`
	CatchUp     time.Duration `json:"catch_up_ns"`
	// ReadOnly is the read-only window: Freeze committed to CompleteMove
	// committed.
	ReadOnly time.Duration `json:"read_only_ns"`
	// Within it: Drain, the final catch-up (Final), the check (Verify);
	// the rest is the catalogue's Freeze and CompleteMove.
	Drain  time.Duration `json:"drain_ns"`
	Final  time.Duration `json:"final_ns"`
	Verify time.Duration `json:"verify_ns"`
	// Tables: rows of the workspace per table, equal on both shards at
	// the switch.
	Tables map[string]int64 `json:"tables"`
	// Purged is closed with the background purge's outcome (nil: the
	// source holds none of the workspace's rows any more).
	Purged <-chan error `json:"-"`
}

// Mover moves workspaces between shards.
type Mover struct {
	cfg Config
	log *slog.Logger
	m   *metrics
}

// New returns a Mover for cfg.
func New(cfg Config) (*Mover, error) {
	if cfg.Catalogue == nil {
		return nil, errors.New("shardmove: a catalogue is required")
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.MaxRounds <= 0 {
		cfg.MaxRounds = DefaultMaxRounds
	}
	if cfg.LagRows <= 0 {
		cfg.LagRows = DefaultLagRows
	}
	if cfg.Drain < 0 {
		cfg.Drain = 0
	} else if cfg.Drain == 0 {
		cfg.Drain = DefaultDrain
	}
	if cfg.PurgeDelay <= 0 {
		cfg.PurgeDelay = DefaultPurgeDelay
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Mover{cfg: cfg, log: cfg.Logger.With("component", "shardmove"), m: newMetrics(cfg.Registerer)}, nil
}

func (mv *Mover) progress(p Progress) {
	if mv.cfg.Progress != nil {
		mv.cfg.Progress(p)
	}
}

// openShard opens a shard's database.
func openShard(ctx context.Context, id, dsn string) (*sql.DB, error) {
	if dsn == "" {
		return nil, fmt.Errorf("shard %s has no DSN (a node's own database): the mover needs PostgreSQL shards with DSNs", id)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("open shard %s: %w", id, err)
	}
	db.SetMaxOpenConns(4)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open shard %s: %w", id, err)
	}
	return db, nil
}

// lockMove takes a session-level advisory lock on the source for ws on a
// connection of its own, so that two movers of one workspace never run at
// once; it is released by unlock, or by PostgreSQL when the mover's
// connection dies (a crash).
func lockMove(ctx context.Context, db *sql.DB, ws string) (unlock func(), err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock move: %w", err)
	}
	var ok bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(hashtextextended('parley shardmove ' || $1, 0))`, ws).Scan(&ok); err != nil {
		conn.Close()
		return nil, fmt.Errorf("lock move: %w", err)
	}
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("another mover is moving workspace %s", ws)
	}
	return func() {
		conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock(hashtextextended('parley shardmove ' || $1, 0))`, ws)
		conn.Close()
	}, nil
}

// Run moves workspace ws to shard to, and returns once the target serves
// it (CompleteMove); the source's rows are then deleted in the background
// (Summary.Purged). On an error before the switch the move is aborted: the
// workspace is active on its source and the target holds none of its rows.
//
// Run is safe to run again after a mover crashed at any point: a workspace
// found moving or read_only (a mover died mid-move) is first put back
// (AbortMove) and the dead mover's copy deleted, then moved from scratch;
// a workspace already active on to (a mover died after the switch) has
// its leftover rows on the region's other shards purged.
func (mv *Mover) Run(ctx context.Context, ws, to string) (*Summary, error) {
	cat := mv.cfg.Catalogue
	rec, err := cat.Workspace(ctx, ws)
	if err != nil {
		return nil, err
	}
	if rec.Status == tenantdir.StatusActive && rec.ShardID == to {
		return mv.sweep(ctx, rec)
	}
	src, err := openShard(ctx, rec.ShardID, rec.DSN)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	unlock, err := lockMove(ctx, src, ws)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// The source's fence (fence.go): lifted for ws if a move that failed
	// to lift it left it (the workspace is on this shard now, so its
	// writes belong here).
	if err := liftFence(ctx, src, ws); err != nil {
		return nil, err
	}
	if rec.TargetShard != "" {
		// A mover died mid-move: put the workspace back and clear its copy
		// (and its registration on the target).
		mv.log.Warn("resuming an interrupted move: aborting it first", "workspace", ws, "target", rec.TargetShard, "status", rec.Status)
		if _, err := cat.AbortMove(ctx, ws); err != nil {
			return nil, err
		}
		if err := mv.clearCopy(ctx, ws, rec.TargetShard, rec.TargetDSN); err != nil {
			return nil, fmt.Errorf("clear the interrupted move's copy: %w", err)
		}
	}
	if rec, err = cat.BeginMove(ctx, ws, to); err != nil {
		// A dead mover's registration on the source goes (the triggers
		// with it, if no other move needs them).
		if uerr := unregisterMove(context.WithoutCancel(ctx), src, ws, roleSource, false, mv.m); uerr != nil {
			mv.log.Warn("the source's fence triggers stay", "workspace", ws, "err", uerr)
		}
		return nil, err
	}
	mv.m.moves.WithLabelValues("started").Inc()
	sum := &Summary{Workspace: ws, From: rec.ShardID, To: to}
	tgt, err := openShard(ctx, to, rec.TargetDSN)
	if err != nil {
		mv.abort(ws, nil, nil, err)
		if uerr := unregisterMove(context.WithoutCancel(ctx), src, ws, roleSource, false, mv.m); uerr != nil {
			mv.log.Warn("the source's fence triggers stay", "workspace", ws, "err", uerr)
		}
		return nil, err
	}
	defer func() {
		if sum.Purged == nil {
			tgt.Close()
		}
	}()
	j := &job{mv: mv, ws: ws, src: src, tgt: tgt, sum: sum, users: map[string]bool{}}
	fail := func(err error) error {
		err = mv.abort(ws, tgt, j.s, err)
		// After AbortMove: the workspace is active on the source again,
		// and must take writes there; the fence is lifted, and the
		// triggers go unless another move has the shard as its source.
		lctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if ferr := unregisterMove(lctx, src, ws, roleSource, true, mv.m); ferr != nil {
			err = fmt.Errorf("%w (and the source's fence may still be up: run the move again, or delete %s's rows from %s and %s on %s: %v)",
				err, ws, fenceTable, movesTable, rec.ShardID, ferr)
		}
		if ferr := unregisterMove(lctx, tgt, ws, roleTarget, false, mv.m); ferr != nil {
			mv.log.Warn("the move's registration stays on the target", "workspace", ws, "shard", to, "err", ferr)
		}
		return err
	}
	// Before the copy, so that the DDL is not in the read-only window.
	if err := registerMove(ctx, src, ws, roleSource, mv.m); err != nil {
		return nil, fail(err)
	}
	if err := j.prepare(ctx, rec); err != nil {
		return nil, fail(err)
	}
	if err := j.copy(ctx); err != nil {
		return nil, fail(err)
	}
	if err := j.catchUp(ctx); err != nil {
		return nil, fail(err)
	}
	verified, err := j.switchOver(ctx)
	if err != nil {
		return nil, fail(err)
	}
	mv.m.moves.WithLabelValues("completed").Inc()
	mv.m.readOnly.Observe(sum.ReadOnly.Seconds())
	// The target's part is over: it serves the workspace.
	if err := unregisterMove(context.WithoutCancel(ctx), tgt, ws, roleTarget, false, mv.m); err != nil {
		mv.log.Warn("the move's registration stays on the target (run the move again to remove it)", "workspace", ws, "shard", to, "err", err)
	}
	done := make(chan error, 1)
	sum.Purged = done
	// The source connection pool is closed by Run's defer; the purge opens
	// its own.
	srcDSN := rec.DSN
	go func() {
		defer close(done)
		defer tgt.Close()
		defer func() {
			if p := recover(); p != nil {
				mv.log.Error("purge panicked", "workspace", ws, "panic", p, "stack", string(debug.Stack()))
				done <- fmt.Errorf("purge source %s: panic: %v (run the move again to finish it)", rec.ShardID, p)
			}
		}()
		done <- mv.purgeSource(ws, rec.ShardID, srcDSN, j.s, verified)
	}()
	return sum, nil
}

// abort puts the workspace back on its source and deletes the target's
// copy; it returns cause (with what went wrong while aborting).
func (mv *Mover) abort(ws string, tgt *sql.DB, s *schema, cause error) error {
	mv.m.moves.WithLabelValues("aborted").Inc()
	mv.log.Error("move failed: aborting", "workspace", ws, "err", cause)
	mv.progress(Progress{Phase: "abort", Note: cause.Error()})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var errs []error
	if _, err := mv.cfg.Catalogue.AbortMove(ctx, ws); err != nil {
		errs = append(errs, fmt.Errorf("abort move: %w", err))
	}
	if tgt != nil {
		if s == nil {
			var err error
			if s, err = loadSchema(ctx, tgt); err != nil {
				errs = append(errs, fmt.Errorf("clear the target: %w", err))
			}
		}
		if s != nil {
			if _, err := deleteWorkspace(ctx, tgt, s, ws, mv.cfg.Batch, 0, nil); err != nil {
				errs = append(errs, fmt.Errorf("clear the target: %w", err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("move %s: %w (and while aborting: %w)", ws, cause, errors.Join(errs...))
	}
	return fmt.Errorf("move %s aborted, the workspace stays on its source: %w", ws, cause)
}

// clearCopy deletes ws's rows from shard id.
func (mv *Mover) clearCopy(ctx context.Context, ws, id, dsn string) error {
	db, err := openShard(ctx, id, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	s, err := loadSchema(ctx, db)
	if err != nil {
		return err
	}
	if _, err = deleteWorkspace(ctx, db, s, ws, mv.cfg.Batch, 0, nil); err != nil {
		return err
	}
	return unregisterMove(ctx, db, ws, roleTarget, false, mv.m)
}

// sweep finishes a move whose mover died after the switch: every other
// shard of the region that still holds rows of ws is purged.
func (mv *Mover) sweep(ctx context.Context, rec tenantdir.Record) (*Summary, error) {
	// Under the move lock (on the shard that holds the workspace now), so
	// that a mover starting meanwhile does not have its copy swept.
	cur, err := openShard(ctx, rec.ShardID, rec.DSN)
	if err != nil {
		return nil, err
	}
	defer cur.Close()
	unlock, err := lockMove(ctx, cur, rec.WorkspaceID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if now, err := mv.cfg.Catalogue.Workspace(ctx, rec.WorkspaceID); err != nil {
		return nil, err
	} else if now.ShardID != rec.ShardID || now.TargetShard != "" {
		return nil, fmt.Errorf("workspace %s changed while sweeping (now %s on %s): run the move again", rec.WorkspaceID, now.Status, now.ShardID)
	}
	shards, err := mv.cfg.Catalogue.ListShards(ctx)
	if err != nil {
		return nil, err
	}
	sum := &Summary{Workspace: rec.WorkspaceID, From: rec.ShardID, To: rec.ShardID}
	var errs []error
	// The shard holding the workspace may still have the dead mover's
	// registration as its target.
	if err := unregisterMove(ctx, cur, rec.WorkspaceID, roleTarget, false, mv.m); err != nil {
		errs = append(errs, fmt.Errorf("shard %s: %w", rec.ShardID, err))
	}
	for _, sh := range shards {
		if sh.ID == rec.ShardID || sh.Region != rec.Region || sh.DSN == "" {
			continue
		}
		db, err := openShard(ctx, sh.ID, sh.DSN)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s, err := loadSchema(ctx, db)
		if err == nil {
			err = sameHistory(ctx, db, cur, s, rec.WorkspaceID)
		}
		if err == nil {
			var n int64
			n, err = deleteWorkspace(ctx, db, s, rec.WorkspaceID, mv.cfg.Batch, mv.cfg.PurgePause, nil)
			if n > 0 {
				mv.log.Info("purged leftover rows of a finished move", "workspace", rec.WorkspaceID, "shard", sh.ID, "rows", n)
				mv.progress(Progress{Phase: "purge", Rows: n, Note: "leftovers on " + sh.ID})
			}
		}
		if err == nil {
			// The dead mover's registration as the source, its fence row
			// and (if no other move needs them) the triggers go.
			err = unregisterMove(ctx, db, rec.WorkspaceID, roleSource, true, mv.m)
		}
		db.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("shard %s: %w", sh.ID, err))
		}
	}
	done := make(chan error, 1)
	done <- errors.Join(errs...)
	close(done)
	sum.Purged = done
	return sum, nil
}

// metrics are the mover's series (docs/metrics.md).
type metrics struct {
	moves    *prometheus.CounterVec
	rows     *prometheus.CounterVec
	readOnly prometheus.Histogram
	ddl      *prometheus.CounterVec
}

// fenceDDL counts one DDL statement of the fence's (nil-safe: tests call
// the fence's functions without a Mover).
func (m *metrics) fenceDDL(op, result string) {
	if m != nil {
		m.ddl.WithLabelValues(op, result).Inc()
	}
}

func newMetrics(reg prometheus.Registerer) *metrics {
	return &metrics{
		moves: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_shardmove_moves_total",
			Help: "Workspace moves between shards by outcome: started, completed, aborted.",
		}, []string{"result"})),
		rows: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_shardmove_rows_total",
			Help: "Rows a move wrote to the target (copy, catchup) or deleted from the source (purge).",
		}, []string{"phase"})),
		readOnly: promutil.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "parley_shardmove_read_only_seconds",
			Help:    "Read-only window of a move: freeze committed to switch committed.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		})),
		ddl: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_shardmove_fence_ddl_total",
			Help: "DDL statements of the source's fence (op: install, drop) by result: done, or lock_timeout (gave way to the table's writers, tried again).",
		}, []string{"op", "result"})),
	}
}

// ensureSchema runs the chat store's migrations on a shard (opening a
// store migrates it).
func ensureSchema(ctx context.Context, dsn string) error {
	st, err := sqlstore.Open(ctx, sqlstore.Config{PostgresURL: dsn, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("migrate target: %w", err)
	}
	return st.Close()
}

// sameHistory checks that every event of ws on the leftover shard old is
// in the current shard's log, the same: a write that reached the old
// source after the switch is never swept away unseen.
func sameHistory(ctx context.Context, old, cur *sql.DB, s *schema, ws string) error {
	t := s.byName["events"]
	if t == nil {
		return errors.New("the shard has no events table")
	}
	sc := scope{where: "workspace_id = $1", args: []any{ws}}
	have, err := checksums(ctx, old, t, sc)
	if err != nil {
		return err
	}
	got, err := checksums(ctx, cur, t, sc)
	if err != nil {
		return err
	}
	for k, r := range have {
		if g, ok := got[k]; !ok || g.sum != r.sum {
			return fmt.Errorf("event %v of workspace %s is on this shard but not in its current shard's log: not purged (an operator must look)", r.key, ws)
		}
	}
	return nil
}
