// Package sqlstore is Parley's storage: one implementation of parley.Store
// over database/sql that runs on SQLite (modernc.org/sqlite, pure Go) and on
// PostgreSQL (pgx). The two differ only in how a write transaction is run:
// SQLite funnels every write through one writer goroutine that batches
// concurrent writes into one transaction (group commit); PostgreSQL runs each
// write in its own transaction on a pool and retries serialization failures.
//
// Every change and the events it produces are committed together; the events
// are handed to the configured publisher only after the commit. Authorization
// happens here, inside the transaction that reads or changes the data.
//
// This package must not know about HTTP, WebSockets or the bus's wire format.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"parley"
)

// Config says which database to open and how. The zero value of each field
// is a documented default.
type Config struct {
	// Path is the SQLite database file; used when PostgresURL is empty.
	Path string
	// PostgresURL, when set, selects PostgreSQL (postgres:// URL).
	PostgresURL string
	// Publisher receives every committed event, in commit order per
	// transaction. Nil: events are dropped (tools and tests).
	Publisher parley.EventPublisher
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now defaults to time.Now; tests may pin the clock.
	Now func() time.Time
	// ReadConns bounds the reader pool (default 8).
	ReadConns int
	// WriteConns bounds PostgreSQL's writer pool (default 16). SQLite always
	// has exactly one writer.
	WriteConns int
	// MaxConns, when positive, is the size of PostgreSQL's one pool in
	// place of WriteConns + WriteLanes + ReadConns (32 by default), and
	// caps the write lanes at that many (a lane holds a connection while
	// it commits). A store routing opens per shard takes
	// --shard-pool-size here. Unused on SQLite.
	MaxConns int
	// MaxBatch bounds how many writes one group commit takes (default 256
	// on SQLite, 64 per lane on PostgreSQL).
	MaxBatch int
	// WriteLanes is how many group-commit lanes PostgreSQL runs for writes
	// about one channel or message (default 8; negative: none, every write
	// its own transaction); see writeChannel.
	WriteLanes int
	// LiveConfig gives the live configuration (collapsed threads, the
	// @channel member cap), read once per write that depends on it. Nil:
	// parley.DefaultLiveConfig().
	LiveConfig parley.LiveConfigSource
	// Caps bounds reactions, pins, private channel members, channels and
	// outstanding invites (parley.Caps; zero fields take the defaults).
	Caps parley.Caps
	// Relay tunes the outbox and its relay (outbox.go), which run whenever
	// Publisher is set.
	Relay RelayConfig
}

// Dialect names the database behind a Store.
type Dialect string

const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// Store implements parley.Store.
type Store struct {
	dialect Dialect
	rdb     *sql.DB           // readers: queries outside write transactions
	wdb     *sql.DB           // writers: SQLite's single connection, or PostgreSQL's pool
	gc      *groupCommitter   // SQLite's only writer
	lanes   []*groupCommitter // PostgreSQL's per-key writers (writeChannel)
	rstmts  *readStmts        // SQLite's reader pool: prepared statements (stmtcache.go); nil on PostgreSQL
	pub     parley.EventPublisher
	ob      *outbox // the outbox and relay; nil without a publisher
	log     *slog.Logger
	now     func() time.Time
	liveCfg parley.LiveConfigSource
	caps    parley.Caps // with defaults filled in (caps.go)
	terms   termStats   // PostgreSQL's word frequencies for search plans (searchstats.go)
	// presence answers who is active for @here (here.go); nil: everyone.
	presence atomic.Pointer[presenceHolder]
}

var _ parley.Store = (*Store)(nil)

// Open opens (and migrates) the database named by cfg.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	s := &Store{pub: cfg.Publisher, log: cfg.Logger, now: cfg.Now, liveCfg: cfg.LiveConfig, caps: cfg.Caps.WithDefaults()}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.pub != nil && !cfg.Relay.NoOutbox {
		s.ob = newOutbox(s, cfg.Relay)
	}
	var err error
	if cfg.PostgresURL != "" {
		err = s.openPostgres(ctx, cfg)
	} else {
		err = s.openSQLite(ctx, cfg)
	}
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, s.wdb, s.dialect); err != nil {
		s.Close()
		return nil, err
	}
	if s.ob != nil {
		s.ob.start()
	}
	return s, nil
}

// live returns the live configuration now.
func (s *Store) live() parley.LiveConfig {
	if s.liveCfg == nil {
		return parley.DefaultLiveConfig()
	}
	return s.liveCfg.LiveConfig()
}

// Dialect says which database the store runs on.
func (s *Store) Dialect() Dialect { return s.dialect }

// Close stops the writer and closes the pools.
func (s *Store) Close() error {
	if s.ob != nil && s.ob.started {
		s.ob.stop()
	}
	if s.gc != nil {
		s.gc.close()
	}
	for _, l := range s.lanes {
		l.close()
	}
	var errs []error
	if s.rdb != nil && s.rdb != s.wdb {
		errs = append(errs, s.rdb.Close())
	}
	if s.wdb != nil {
		errs = append(errs, s.wdb.Close())
	}
	return errors.Join(errs...)
}

// Ping checks that the database answers (health checks).
func (s *Store) Ping(ctx context.Context) error { return s.rdb.PingContext(ctx) }

// PoolStats returns the statistics of the writers' pool (PostgreSQL's one
// pool): MaxOpenConnections is its size.
func (s *Store) PoolStats() sql.DBStats { return s.wdb.Stats() }

// querier is what both *sql.DB and *sql.Tx offer.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Tx is one write operation's view of a write transaction: the SQL
// transaction, the operation's clock, and the events it produced.
type Tx struct {
	*sql.Tx
	now    time.Time
	events []parley.Event
	stmts  *stmtCache // SQLite's writer only (stmtcache.go); nil on PostgreSQL
}

// publisher is what the writers call with a commit's events: the outbox's
// publish, or the publisher's own when the outbox is off (nil without a
// publisher).
func (s *Store) publisher() func([]parley.Event) {
	if s.ob == nil {
		if s.pub == nil {
			return nil
		}
		return s.pub.Publish
	}
	return s.ob.publish
}

// txTime is a write transaction's clock reading: UTC and whole
// microseconds, exactly what the database stores, so that values returned
// from a write equal those read back later.
func txTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// write runs fn in a write transaction and, after the commit, publishes the
// events fn appended (on SQLite in commit order across the whole batch; on
// PostgreSQL concurrent transactions may publish out of seq order, which the
// gateway repairs from the log). fn may run more than once on PostgreSQL (retries), so
// it must not have side effects outside the transaction.
func (s *Store) write(ctx context.Context, op string, fn func(ctx context.Context, tx *Tx) error) error {
	var err error
	defer s.observe(op, time.Now(), &err)
	if s.gc != nil {
		err = s.gc.do(ctx, "", fn) // publishes the batch's events itself
	} else {
		var events []parley.Event
		events, err = s.writePostgres(ctx, fn)
		if publish := s.publisher(); err == nil && len(events) > 0 && publish != nil {
			publish(events)
		}
	}
	if err != nil && parley.ErrorCode(err) == parley.EINTERNAL {
		return fmt.Errorf("%s: %w", op, err)
	}
	return err
}

// writeChannel is write for an operation about one channel or message, named
// by key (a channel id, or a message id when the channel is not known
// before the transaction). On PostgreSQL every write with the same key goes
// through the same group-commit lane: a hot channel's writes are batched into
// shared commits and published in seq order. On SQLite it is write.
func (s *Store) writeChannel(ctx context.Context, op, key string, fn func(ctx context.Context, tx *Tx) error) (err error) {
	if len(s.lanes) == 0 {
		return s.write(ctx, op, fn)
	}
	defer s.observe(op, time.Now(), &err)
	h := fnv.New32a()
	h.Write([]byte(key))
	err = s.lanes[h.Sum32()%uint32(len(s.lanes))].do(ctx, key, fn)
	if err != nil && parley.ErrorCode(err) == parley.EINTERNAL {
		return fmt.Errorf("%s: %w", op, err)
	}
	return err
}

// writeMessage is writeChannel for an operation on a message: it finds the
// message's channel first, so that every write locking a channel's row goes
// through that channel's lane (two lanes locking each other's channels could
// deadlock). An unknown message goes by its own id and fails inside.
func (s *Store) writeMessage(ctx context.Context, op, messageID string, fn func(ctx context.Context, tx *Tx) error) error {
	key := messageID
	if len(s.lanes) > 0 {
		var channelID string
		err := s.rdb.QueryRowContext(ctx, `SELECT channel_id FROM messages WHERE id = $1`, messageID).Scan(&channelID)
		switch {
		case err == nil:
			key = channelID
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("%s: find channel: %w", op, err)
		}
	}
	return s.writeChannel(ctx, op, key, fn)
}

// isUniqueViolation reports whether err is a unique-constraint failure on
// either database.
func isUniqueViolation(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "UNIQUE constraint failed") || // SQLite
		strings.Contains(msg, "SQLSTATE 23505") // PostgreSQL (pgconn)
}

// inClause returns "$n,$n+1,…" placeholders for len(args) arguments starting
// at position start (1-based).
func inClause(start, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "$%d", start+i)
	}
	return b.String()
}
