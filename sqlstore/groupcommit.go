package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"parley"
)

// groupCommitter is a writer goroutine that commits in batches. Concurrent
// writes queue up while a commit is in flight and are then run together in
// one transaction, each inside its own savepoint so that one failing write
// does not undo the others. One fsync (and on PostgreSQL one lock hold of a
// channel row) then covers the whole batch.
//
// SQLite has exactly one, its only writer. PostgreSQL has several lanes,
// one per hash of the channel a write is about (Store.writeChannel): every
// write to one channel goes through one lane, so a hot channel's posts share
// commits instead of queueing one by one on the channel row's lock, and its
// events are published in seq order.
type groupCommitter struct {
	db       *sql.DB
	reqs     chan *writeReq
	maxBatch int
	now      func() time.Time
	log      *slog.Logger
	publish  func([]parley.Event) // publishes a commit's events; nil: none
	outbox   bool                 // write the outbox rows of a commit's events (outbox.go)
	stmts    *stmtCache           // SQLite only (nil on PostgreSQL); used by the run goroutine and its writes
	retry    func(error) bool     // may a write that failed this way run again in the batch? nil: never
	quit     chan struct{}
	done     chan struct{} // closed when run returns
}

type writeReq struct {
	ctx    context.Context
	key    string // the channel whose row the write locks ("" when none in particular)
	fn     func(context.Context, *Tx) error
	events []parley.Event
	err    error
	done   chan struct{}
}

func newGroupCommitter(db *sql.DB, maxBatch int, now func() time.Time, log *slog.Logger, publish func([]parley.Event),
	outbox bool, stmts *stmtCache, retry func(error) bool) *groupCommitter {
	g := &groupCommitter{
		db:       db,
		reqs:     make(chan *writeReq, maxBatch),
		maxBatch: maxBatch,
		now:      now,
		log:      log,
		publish:  publish,
		outbox:   outbox,
		stmts:    stmts,
		retry:    retry,
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go g.run()
	return g
}

// do queues fn and waits for its batch to commit and its events to be
// published. key names the channel whose row fn locks ("" when none): a
// batch runs its writes in key order (see lockOrder). If ctx ends first, do
// returns ctx's error, but a write already queued may still commit.
func (g *groupCommitter) do(ctx context.Context, key string, fn func(context.Context, *Tx) error) error {
	r := &writeReq{ctx: ctx, key: key, fn: fn, done: make(chan struct{})}
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
	if g.stmts != nil {
		defer g.stmts.close()
	}
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
		if len(batch) == 1 && g.stmts == nil {
			g.commitOne(batch[0])
		} else {
			lockOrder(batch)
			g.commit(batch)
		}
		if g.stmts != nil {
			g.stmts.preparePending(context.Background())
		}
		clear(batch)
	}
}

// lockOrder sorts a batch by the channel each write locks, keeping the
// order of the writes to one channel (their seqs follow it). A lane's batch
// holds every channel row it locked until its COMMIT; two nodes whose lanes
// batched channels A and B in opposite orders would each hold one row and
// wait for the other's (PostgreSQL's deadlock_detected, 40P01, which the
// chaos runs met as failed posts). In one order for every node they queue
// instead.
func lockOrder(batch []*writeReq) {
	slices.SortStableFunc(batch, func(a, b *writeReq) int { return strings.Compare(a.key, b.key) })
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

// commitOne runs a lone write in a transaction of its own, without the two
// savepoint round trips a batch needs (PostgreSQL; on SQLite savepoints are
// local calls and every batch takes the common path).
func (g *groupCommitter) commitOne(r *writeReq) {
	defer close(r.done)
	if r.err = r.ctx.Err(); r.err != nil {
		return
	}
	for attempt := 1; ; attempt++ {
		r.events, r.err = runTx(context.Background(), g.db, txTime(g.now()), r.ctx, r.fn, g.outbox)
		if r.err == nil || g.retry == nil || !g.retry(r.err) || attempt == maxWriteAttempts {
			break
		}
		countRetry(r.err)
	}
	if r.err == nil && g.publish != nil && len(r.events) > 0 {
		g.publish(r.events)
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
		for attempt := 1; ; attempt++ {
			if _, err := base.ExecContext(ctx, "SAVEPOINT w"); err != nil {
				sqlTx.Rollback()
				finish(fmt.Errorf("savepoint: %w", err))
				return
			}
			tx := &Tx{Tx: sqlTx, now: now, stmts: g.stmts}
			err := r.fn(r.ctx, tx)
			if err == nil {
				r.err, r.events = nil, tx.events
			} else {
				r.err = err
				if _, rbErr := base.ExecContext(ctx, "ROLLBACK TO SAVEPOINT w"); rbErr != nil {
					sqlTx.Rollback()
					finish(fmt.Errorf("rollback to savepoint: %w", rbErr))
					return
				}
			}
			if _, err := base.ExecContext(ctx, "RELEASE SAVEPOINT w"); err != nil {
				sqlTx.Rollback()
				finish(fmt.Errorf("release savepoint: %w", err))
				return
			}
			if err == nil || g.retry == nil || !g.retry(err) || attempt == maxWriteAttempts {
				break
			}
			countRetry(err)
		}
	}
	var events []parley.Event
	for _, r := range batch {
		if r.err == nil {
			events = append(events, r.events...)
		}
	}
	if g.outbox {
		// The outbox rows commit with the events (outbox.go).
		if err := writeOutbox(ctx, base, now, events); err != nil {
			sqlTx.Rollback()
			finish(err)
			return
		}
	}
	if err := sqlTx.Commit(); err != nil {
		g.log.Error("group commit failed", "batch", len(batch), "err", err)
		finish(fmt.Errorf("commit: %w", err))
		return
	}
	// Publishing here, in batch order, before anyone is answered, keeps the
	// bus in commit order: a channel's events leave this node in seq order.
	if g.publish != nil && len(events) > 0 {
		g.publish(events)
	}
	finish(nil)
}
