package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver

	"parley"
)

func (s *Store) openPostgres(ctx context.Context, cfg Config) error {
	s.dialect = Postgres
	db, err := sql.Open("pgx", cfg.PostgresURL)
	if err != nil {
		return fmt.Errorf("open postgres: %w", err)
	}
	n := cfg.WriteConns
	if n <= 0 {
		n = 16
	}
	lanes := cfg.WriteLanes
	if lanes == 0 {
		lanes = 8
	}
	n += max(lanes, 0)
	if cfg.ReadConns > 0 {
		n += cfg.ReadConns
	} else {
		n += 8
	}
	if cfg.MaxConns > 0 {
		n, lanes = cfg.MaxConns, min(lanes, cfg.MaxConns)
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return fmt.Errorf("open postgres: %w", err)
	}
	// One pool serves reads and writes; PostgreSQL's MVCC needs no split.
	s.rdb, s.wdb = db, db
	batch := cfg.MaxBatch
	if batch <= 0 {
		batch = 64
	}
	for i := 0; i < lanes; i++ {
		s.lanes = append(s.lanes, newGroupCommitter(db, batch, s.now, s.log, s.publisher(), s.ob != nil, nil, retryableInBatch))
	}
	return nil
}

// retryableInBatch: inside a batch a write may run again after a
// serialization failure or a deadlock. A unique violation is final there:
// the row it collided with is in the same transaction, and the write's
// caller resolves it (see PostMessage's idempotency).
func retryableInBatch(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "40001" || pgErr.Code == "40P01"
	}
	return false
}

// maxWriteAttempts bounds retries of a write that lost a serialization
// race, a deadlock, or (outside a batch) a unique race on an idempotency key.
const maxWriteAttempts = 5

func (s *Store) writePostgres(ctx context.Context, fn func(context.Context, *Tx) error) ([]parley.Event, error) {
	var lastErr error
	for attempt := 0; attempt < maxWriteAttempts; attempt++ {
		events, err := s.writePostgresOnce(ctx, fn)
		if err == nil || !retryablePostgres(err) {
			return events, err
		}
		countRetry(err)
		lastErr = err
	}
	return nil, lastErr
}

func (s *Store) writePostgresOnce(ctx context.Context, fn func(context.Context, *Tx) error) ([]parley.Event, error) {
	return runTx(ctx, s.wdb, txTime(s.now()), ctx, fn, s.ob != nil)
}

// runTx runs fn in a transaction of its own on db and returns the events it
// appended. The transaction runs under txCtx; fn gets fnCtx. With outbox set
// it writes the events' outbox rows before the commit (outbox.go).
func runTx(txCtx context.Context, db *sql.DB, now time.Time, fnCtx context.Context, fn func(context.Context, *Tx) error,
	outbox bool) ([]parley.Event, error) {
	sqlTx, err := db.BeginTx(txCtx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	tx := &Tx{Tx: sqlTx, now: now}
	if err := fn(fnCtx, tx); err != nil {
		sqlTx.Rollback()
		return nil, err
	}
	if outbox {
		if err := writeOutbox(txCtx, sqlTx, now, tx.events); err != nil {
			sqlTx.Rollback()
			return nil, err
		}
	}
	if err := sqlTx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return tx.events, nil
}

// countRetry counts a write about to run again after err.
func countRetry(err error) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return
	}
	switch pgErr.Code {
	case "40P01":
		writeRetries.WithLabelValues("deadlock").Inc()
	case "40001":
		writeRetries.WithLabelValues("serialization").Inc()
	case "23505":
		writeRetries.WithLabelValues("unique").Inc()
	}
}

// retryablePostgres: serialization failure, deadlock, or a unique violation
// (two writers racing on the same idempotency key or name; the retry sees the
// winner's row and answers from it).
func retryablePostgres(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", "40P01", "23505":
			return true
		}
	}
	return false
}
