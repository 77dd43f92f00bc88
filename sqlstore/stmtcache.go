package sqlstore

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
)

// stmtCache keeps the prepared statements of SQLite's single writer
// connection, so that a write does not parse its SQL again every time:
// parsing was the largest single cost of a post on the writer goroutine (see
// docs/benchmarks.md). PostgreSQL needs none: pgx caches prepared statements
// per connection by itself.
//
// A statement cannot be prepared on the writer's *sql.DB while a
// transaction holds its only connection, so a query seen for the first time
// runs unprepared and is prepared after the batch commits (preparePending,
// called by the writer goroutine between batches).
type stmtCache struct {
	db  *sql.DB
	log *slog.Logger

	mu      sync.Mutex
	stmts   map[string]*sql.Stmt // guarded by mu; nil value: could not prepare
	pending map[string]struct{}  // guarded by mu
}

// maxCachedStmts bounds the cache: queries built with a variable number of
// placeholders would otherwise grow it without end.
const maxCachedStmts = 512

func newStmtCache(db *sql.DB, log *slog.Logger) *stmtCache {
	return &stmtCache{db: db, log: log, stmts: map[string]*sql.Stmt{}, pending: map[string]struct{}{}}
}

// lookup returns the prepared statement for query, or nil (then noting it
// for preparePending).
func (c *stmtCache) lookup(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.stmts[query]
	if !ok && len(c.stmts)+len(c.pending) < maxCachedStmts {
		c.pending[query] = struct{}{}
	}
	return st
}

// preparePending prepares the queries noted since the last call. It must
// run while no transaction is open on the writer.
func (c *stmtCache) preparePending(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q := range c.pending {
		st, err := c.db.PrepareContext(ctx, q)
		if err != nil {
			c.log.Debug("sqlite: not caching statement", "err", err)
			st = nil
		}
		c.stmts[q] = st
	}
	clear(c.pending)
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.stmts {
		if st != nil {
			st.Close()
		}
	}
	clear(c.stmts)
}

// The methods below shadow those of the embedded *sql.Tx so that every
// query of a write, whoever wrote it, uses the cache when there is one.

func (tx *Tx) prepared(ctx context.Context, query string) *sql.Stmt {
	if tx.stmts == nil {
		return nil
	}
	st := tx.stmts.lookup(query)
	if st == nil {
		return nil
	}
	return tx.Tx.StmtContext(ctx, st)
}

// ExecContext runs query in the transaction.
func (tx *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := tx.prepared(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return tx.Tx.ExecContext(ctx, query, args...)
}

// QueryContext runs query in the transaction.
func (tx *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := tx.prepared(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return tx.Tx.QueryContext(ctx, query, args...)
}

// QueryRowContext runs query in the transaction.
func (tx *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := tx.prepared(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return tx.Tx.QueryRowContext(ctx, query, args...)
}

// readStmts keeps prepared statements for SQLite's reader pool, for the
// same reason as stmtCache: a history page spent over a third of its time
// parsing. A statement prepared on the pool is prepared again, once, on each
// connection that runs it (database/sql does that by itself).
type readStmts struct {
	db *sql.DB

	mu    sync.RWMutex
	stmts map[string]*sql.Stmt // guarded by mu; nil value: could not prepare
}

var _ querier = (*readStmts)(nil)

func newReadStmts(db *sql.DB) *readStmts {
	return &readStmts{db: db, stmts: map[string]*sql.Stmt{}}
}

// reads returns what read-only queries outside a write should run on: the
// reader pool, through prepared statements on SQLite.
func (s *Store) reads() querier {
	if s.rstmts != nil {
		return s.rstmts
	}
	return s.rdb
}

func (c *readStmts) stmt(ctx context.Context, query string) *sql.Stmt {
	c.mu.RLock()
	st, ok := c.stmts[query]
	full := len(c.stmts) >= maxCachedStmts
	c.mu.RUnlock()
	if ok || full {
		return st
	}
	// Prepared outside the lock: preparing may wait for a free connection.
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		if ctx.Err() != nil {
			return nil // the caller's problem, not the statement's
		}
		st = nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.stmts[query]; ok { // prepared meanwhile by another reader
		if st != nil {
			st.Close()
		}
		return prev
	}
	c.stmts[query] = st
	return st
}

// ExecContext runs query on the reader pool.
func (c *readStmts) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := c.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return c.db.ExecContext(ctx, query, args...)
}

// QueryContext runs query on the reader pool.
func (c *readStmts) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := c.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return c.db.QueryContext(ctx, query, args...)
}

// QueryRowContext runs query on the reader pool.
func (c *readStmts) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := c.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return c.db.QueryRowContext(ctx, query, args...)
}
