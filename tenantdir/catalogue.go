package tenantdir

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx" driver
	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // "sqlite" driver

	"parley"
)

//go:embed migrations
var migrations embed.FS

// CatalogueConfig says which control database to open. Exactly one of
// Path and PostgresURL is set.
type CatalogueConfig struct {
	// Path of the SQLite file (created when missing).
	Path string
	// PostgresURL of the control database (postgres://…).
	PostgresURL string
	// OnChange, when set, is called after every committed change (the
	// relay's kick: Relay.Kick), outside any transaction.
	OnChange func()
}

// Catalogue is the directory's source of truth: shards and workspace
// placements in the control database. Every mutation appends the new
// state to the change log (tenantdir_changes) in the same transaction.
// It is safe for concurrent use.
type Catalogue struct {
	db       *sql.DB
	postgres bool
	onChange func()
}

// OpenCatalogue opens (and migrates) the control database.
func OpenCatalogue(ctx context.Context, cfg CatalogueConfig) (*Catalogue, error) {
	var (
		db  *sql.DB
		err error
		c   = &Catalogue{onChange: cfg.OnChange}
	)
	switch {
	case (cfg.Path == "") == (cfg.PostgresURL == ""):
		return nil, errors.New("control database: give exactly one of a SQLite path and a PostgreSQL URL")
	case cfg.PostgresURL != "":
		c.postgres = true
		db, err = sql.Open("pgx", cfg.PostgresURL)
	default:
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "foreign_keys(ON)")
		// Placement reads the loads and writes in one transaction: take
		// the write lock at BEGIN so two placements never interleave.
		q.Set("_txlock", "immediate")
		db, err = sql.Open("sqlite", "file:"+cfg.Path+"?"+q.Encode())
	}
	if err != nil {
		return nil, fmt.Errorf("control database: %w", err)
	}
	c.db = db
	// The control database sees placements and moves, not chat traffic:
	// a few connections are plenty.
	db.SetMaxOpenConns(4)
	if err := c.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return c, nil
}

func (c *Catalogue) migrate(ctx context.Context) error {
	dir, gd := "migrations/sqlite", goose.DialectSQLite3
	if c.postgres {
		dir, gd = "migrations/postgres", goose.DialectPostgres
	}
	sub, err := fs.Sub(migrations, dir)
	if err != nil {
		return fmt.Errorf("control database: migrate: %w", err)
	}
	// A table name of its own: the control database may be the node's
	// chat database too (single-node PostgreSQL).
	p, err := goose.NewProvider(gd, c.db, sub, goose.WithTableName("tenantdir_goose_version"))
	if err != nil {
		return fmt.Errorf("control database: migrate: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("control database: migrate: %w", err)
	}
	return nil
}

// Close closes the database.
func (c *Catalogue) Close() error { return c.db.Close() }

// Dialect is "sqlite" or "postgres".
func (c *Catalogue) Dialect() string {
	if c.postgres {
		return "postgres"
	}
	return "sqlite"
}

// ts is t as the database stores it: TIMESTAMPTZ in PostgreSQL, RFC 3339
// text in SQLite.
func (c *Catalogue) ts(t time.Time) any {
	if c.postgres {
		return t
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// dbTime scans either form ts writes.
type dbTime struct{ t time.Time }

func (d *dbTime) Scan(v any) error {
	switch x := v.(type) {
	case time.Time:
		d.t = x
	case string:
		t, err := time.Parse(time.RFC3339Nano, x)
		if err != nil {
			return fmt.Errorf("parse time %q: %w", x, err)
		}
		d.t = t
	case []byte:
		return d.Scan(string(x))
	case nil:
		d.t = time.Time{}
	default:
		return fmt.Errorf("scan time: unexpected %T", v)
	}
	return nil
}

// AddShard adds an active shard. Capacity defaults to 1000.
func (c *Catalogue) AddShard(ctx context.Context, s Shard) (Shard, error) {
	if err := checkID("shard", s.ID); err != nil {
		return Shard{}, err
	}
	if err := checkID("region", s.Region); err != nil {
		return Shard{}, err
	}
	if s.Capacity == 0 {
		s.Capacity = 1000
	}
	if s.Capacity < 0 {
		return Shard{}, parley.Errorf(parley.EINVALID, "shard capacity must be positive")
	}
	s.State, s.Workspaces = ShardActive, 0
	err := c.tx(ctx, func(tx *sql.Tx, now time.Time) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM tenantdir_shards WHERE id = $1`, s.ID).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return parley.Errorf(parley.ECONFLICT, "shard %q already exists", s.ID)
		}
		s.ChangedAt = now
		if _, err := tx.ExecContext(ctx, `INSERT INTO tenantdir_shards (id, region, dsn, capacity, state, changed_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, s.ID, s.Region, s.DSN, s.Capacity, s.State, c.ts(now)); err != nil {
			return err
		}
		return c.logShard(ctx, tx, &s)
	})
	if err != nil {
		return Shard{}, fmt.Errorf("add shard: %w", raced(err, "shard %q already exists", s.ID))
	}
	return s, nil
}

// DrainShard marks a shard draining: it keeps its workspaces and gets no
// new ones. Draining a draining shard is a no-op.
func (c *Catalogue) DrainShard(ctx context.Context, id string) (Shard, error) {
	var s Shard
	err := c.tx(ctx, func(tx *sql.Tx, now time.Time) error {
		var err error
		if s, err = c.shard(ctx, tx, id); err != nil {
			return err
		}
		if s.State == ShardDraining {
			return nil
		}
		s.State, s.ChangedAt = ShardDraining, now
		if _, err := tx.ExecContext(ctx, `UPDATE tenantdir_shards SET state = $1, changed_at = $2 WHERE id = $3`,
			s.State, c.ts(now), id); err != nil {
			return err
		}
		return c.logShard(ctx, tx, &s)
	})
	if err != nil {
		return Shard{}, fmt.Errorf("drain shard %s: %w", id, err)
	}
	return s, nil
}

// SetShardDSN changes where a shard's database is (a new host, a promoted
// replica, a rotated password). The shard's change and a change of every
// workspace on it or moving to it (whose records carry the shard's DSN)
// are logged in the same transaction, so projections and caches hold the
// new DSN. Nodes with store routing open the shard on the new DSN within
// their shard list's refresh and close the old store once its calls are
// done. Setting the DSN it has is a no-op.
func (c *Catalogue) SetShardDSN(ctx context.Context, id, dsn string) (Shard, error) {
	var s Shard
	err := c.tx(ctx, func(tx *sql.Tx, now time.Time) error {
		var err error
		if s, err = c.shard(ctx, tx, id); err != nil {
			return err
		}
		if s.DSN == dsn {
			return nil
		}
		s.DSN, s.ChangedAt = dsn, now
		if _, err := tx.ExecContext(ctx, `UPDATE tenantdir_shards SET dsn = $1, changed_at = $2 WHERE id = $3`,
			dsn, c.ts(now), id); err != nil {
			return err
		}
		if err := c.logShard(ctx, tx, &s); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT id FROM tenantdir_workspaces WHERE shard_id = $1 OR target_shard_id = $1 ORDER BY id`, id)
		if err != nil {
			return err
		}
		var ids []string
		for rows.Next() {
			var ws string
			if err := rows.Scan(&ws); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, ws)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, ws := range ids {
			if _, err := tx.ExecContext(ctx, `UPDATE tenantdir_workspaces SET changed_at = $1 WHERE id = $2`, c.ts(now), ws); err != nil {
				return err
			}
			r := Record{WorkspaceID: ws, ChangedAt: now}
			if err := c.logWorkspace(ctx, tx, &r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Shard{}, fmt.Errorf("set shard %s's DSN: %w", id, err)
	}
	return s, nil
}

// ListShards lists every shard with its workspace count, by region and id.
func (c *Catalogue) ListShards(ctx context.Context) ([]Shard, error) {
	return c.listShards(ctx, `SELECT s.id, s.region, s.dsn, s.capacity, s.state, s.version, s.changed_at,
			(SELECT COUNT(*) FROM tenantdir_workspaces w WHERE w.shard_id = s.id OR w.target_shard_id = s.id)
		FROM tenantdir_shards s ORDER BY s.region, s.id`)
}

// Shards lists every shard by region and id, without the workspace
// counts (Workspaces is 0): the shards table only, for a caller that
// polls it (every router, every few seconds) and must not read the
// workspaces table each time, which holds every workspace of the fleet.
func (c *Catalogue) Shards(ctx context.Context) ([]Shard, error) {
	return c.listShards(ctx, `SELECT s.id, s.region, s.dsn, s.capacity, s.state, s.version, s.changed_at, 0
		FROM tenantdir_shards s ORDER BY s.region, s.id`)
}

func (c *Catalogue) listShards(ctx context.Context, q string) ([]Shard, error) {
	rows, err := c.db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list shards: %w", err)
	}
	defer rows.Close()
	var out []Shard
	for rows.Next() {
		var s Shard
		var at dbTime
		if err := rows.Scan(&s.ID, &s.Region, &s.DSN, &s.Capacity, &s.State, &s.Version, &at, &s.Workspaces); err != nil {
			return nil, fmt.Errorf("list shards: %w", err)
		}
		s.ChangedAt = at.t
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list shards: %w", err)
	}
	return out, nil
}

// Placement is a request to place a new workspace.
type Placement struct {
	WorkspaceID string
	Region      string
	// Shard, when set, names the shard instead of the policy choosing one
	// (it must be active and in Region).
	Shard string
	// Slug, when set, is reserved for the workspace in the same
	// transaction: a slug another placed workspace holds is 409 conflict,
	// however many shards the two would go to. Empty for a placement by
	// id alone (a workspace that predates routing).
	Slug     string
	Limits   map[string]int64
	Features map[string]bool
}

// Place puts a new workspace on a shard of its region: the named one, or
// the least loaded active shard with room (pickShard).
func (c *Catalogue) Place(ctx context.Context, p Placement) (Record, error) {
	if err := checkID("workspace", p.WorkspaceID); err != nil {
		return Record{}, err
	}
	if err := checkID("region", p.Region); err != nil {
		return Record{}, err
	}
	if err := checkOverrides(p.Limits, p.Features); err != nil {
		return Record{}, err
	}
	var slug any // NULL: no slug reserved
	if p.Slug != "" {
		if err := parley.ValidateSlug(p.Slug); err != nil {
			return Record{}, err
		}
		slug = p.Slug
	}
	var rec Record
	err := c.tx(ctx, func(tx *sql.Tx, now time.Time) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM tenantdir_workspaces WHERE id = $1`, p.WorkspaceID).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return parley.Errorf(parley.ECONFLICT, "workspace %q is already placed", p.WorkspaceID)
		}
		if p.Slug != "" {
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM tenantdir_workspaces WHERE slug = $1`, p.Slug).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return errSlugTaken(p.Slug)
			}
		}
		loads, err := c.loads(ctx, tx, p.Region)
		if err != nil {
			return err
		}
		shard := p.Shard
		if shard == "" {
			if shard, err = pickShard(loads); err != nil {
				return parley.Errorf(parley.ELIMIT, "no active shard with room in region %q", p.Region)
			}
		} else if err := checkTarget(loads, shard, p.Region); err != nil {
			return err
		}
		rec = Record{WorkspaceID: p.WorkspaceID, ShardID: shard, Region: p.Region, Status: StatusActive,
			Limits: p.Limits, Features: p.Features, ChangedAt: now}
		lim, feat := encodeOverrides(rec.Limits, rec.Features)
		if _, err := tx.ExecContext(ctx, `INSERT INTO tenantdir_workspaces (id, shard_id, region, status, limits, features, changed_at, slug)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, rec.WorkspaceID, rec.ShardID, rec.Region, rec.Status, lim, feat, c.ts(now), slug); err != nil {
			return err
		}
		return c.logWorkspace(ctx, tx, &rec)
	})
	if err != nil {
		if isSlugViolation(err) {
			// Two placements of one slug checked it at once (PostgreSQL,
			// read committed); the unique index let one in.
			err = errSlugTaken(p.Slug)
		}
		return Record{}, fmt.Errorf("place workspace %s: %w", p.WorkspaceID, raced(err, "workspace %q is already placed", p.WorkspaceID))
	}
	return rec, nil
}

func errSlugTaken(slug string) error {
	return parley.Errorf(parley.ECONFLICT, "slug %q is taken", slug)
}

// isSlugViolation reports whether err is the slug index's unique
// violation (PostgreSQL names the index, SQLite the column).
func isSlugViolation(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "tenantdir_workspaces_slug") || strings.Contains(msg, "tenantdir_workspaces.slug")
}

// FreeSlug gives up a workspace's slug reservation (the workspace was
// deleted: its slug may be taken again, as in a single database). It is
// a no-op when the workspace is not placed or holds another slug or none.
// It appends nothing to the change log: the slug is not part of the
// record that the log, the projections and the clients carry.
func (c *Catalogue) FreeSlug(ctx context.Context, workspaceID, slug string) error {
	if _, err := c.db.ExecContext(ctx, `UPDATE tenantdir_workspaces SET slug = NULL WHERE id = $1 AND slug = $2`,
		workspaceID, slug); err != nil {
		return fmt.Errorf("free slug of workspace %s: %w", workspaceID, err)
	}
	return nil
}

// Slug returns the slug reserved for a workspace ("" for none).
func (c *Catalogue) Slug(ctx context.Context, workspaceID string) (string, error) {
	var slug sql.NullString
	err := c.db.QueryRowContext(ctx, `SELECT slug FROM tenantdir_workspaces WHERE id = $1`, workspaceID).Scan(&slug)
	if errors.Is(err, sql.ErrNoRows) {
		return "", parley.Errorf(parley.ENOTFOUND, "workspace %q is not placed", workspaceID)
	}
	if err != nil {
		return "", fmt.Errorf("slug of workspace %s: %w", workspaceID, err)
	}
	return slug.String, nil
}

// Unplace removes a workspace's placement: the undo of a Place whose
// workspace was then not created on its shard. It is allowed only while
// the entry is active on that shard with no move (anything else means the
// workspace lives, or is being moved, and its entry must stay): 409
// conflict otherwise, 404 when it is not placed. The removal is logged as
// a tombstone (the record with Removed set) so that projections drop the
// entry and clients' caches forget it; its slug is freed with it.
func (c *Catalogue) Unplace(ctx context.Context, workspaceID, shard string) (Record, error) {
	var rec Record
	err := c.tx(ctx, func(tx *sql.Tx, now time.Time) error {
		r, err := c.workspace(ctx, tx, workspaceID)
		if err != nil {
			return err
		}
		if r.ShardID != shard || r.Status != StatusActive || r.TargetShard != "" {
			return parley.Errorf(parley.ECONFLICT, "workspace %s is %s on shard %s%s: only an active entry on shard %s with no move can be removed",
				workspaceID, r.Status, r.ShardID, moveNote(&r), shard)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM tenantdir_workspaces WHERE id = $1`, workspaceID); err != nil {
			return err
		}
		seq, err := c.appendChange(ctx, tx, KindWorkspace, workspaceID, now)
		if err != nil {
			return err
		}
		r.Removed, r.Version, r.ChangedAt = true, seq, now
		rec = r
		return c.setPayload(ctx, tx, Change{Seq: seq, Kind: KindWorkspace, Workspace: &r})
	})
	if err != nil {
		return Record{}, fmt.Errorf("unplace workspace %s: %w", workspaceID, err)
	}
	return rec, nil
}

// checkTarget says whether shard is a place a workspace of region may go:
// it exists, is in that region and is active.
func checkTarget(loads []shardLoad, shard, region string) error {
	for _, l := range loads {
		if l.id == shard {
			if l.state != ShardActive {
				return parley.Errorf(parley.ECONFLICT, "shard %q is %s", shard, l.state)
			}
			return nil
		}
	}
	return parley.Errorf(parley.ENOTFOUND, "no shard %q in region %q", shard, region)
}

// shardLoad is a shard of a region as the placement policy sees it.
type shardLoad struct {
	id         string
	state      ShardState
	capacity   int
	workspaces int // on it or moving to it
}

// loads reads the shards of region with their workspace counts.
func (c *Catalogue) loads(ctx context.Context, tx *sql.Tx, region string) ([]shardLoad, error) {
	rows, err := tx.QueryContext(ctx, `SELECT s.id, s.state, s.capacity,
			(SELECT COUNT(*) FROM tenantdir_workspaces w WHERE w.shard_id = s.id OR w.target_shard_id = s.id)
		FROM tenantdir_shards s WHERE s.region = $1 ORDER BY s.id`, region)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []shardLoad
	for rows.Next() {
		var l shardLoad
		if err := rows.Scan(&l.id, &l.state, &l.capacity, &l.workspaces); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// errNoShard: no active shard has room.
var errNoShard = errors.New("no active shard with room")

// pickShard is the placement policy: the active shard with room whose
// load (workspaces/capacity) is least; ties go to the fewest workspaces,
// then the smallest id, so that the choice is deterministic.
func pickShard(loads []shardLoad) (string, error) {
	best := -1
	for i, l := range loads {
		if l.state != ShardActive || l.workspaces >= l.capacity {
			continue
		}
		if best < 0 || less(l, loads[best]) {
			best = i
		}
	}
	if best < 0 {
		return "", errNoShard
	}
	return loads[best].id, nil
}

// less orders shards by load, compared exactly (a/b < c/d as a*d < c*b).
func less(a, b shardLoad) bool {
	l, r := a.workspaces*b.capacity, b.workspaces*a.capacity
	if l != r {
		return l < r
	}
	if a.workspaces != b.workspaces {
		return a.workspaces < b.workspaces
	}
	return a.id < b.id
}

// Workspace returns a workspace's record as the catalogue holds it, with
// its shard's (and target's) DSN.
func (c *Catalogue) Workspace(ctx context.Context, id string) (Record, error) {
	return c.workspace(ctx, c.db, id)
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

const recordColumns = `w.id, w.shard_id, COALESCE(w.target_shard_id, ''), w.region, w.status, w.limits, w.features,
	w.version, w.changed_at, s.dsn, COALESCE(t.dsn, '')`

const recordFrom = ` FROM tenantdir_workspaces w JOIN tenantdir_shards s ON s.id = w.shard_id
	LEFT JOIN tenantdir_shards t ON t.id = w.target_shard_id`

func scanRecord(sc interface{ Scan(...any) error }) (Record, error) {
	var (
		r        Record
		lim, fea string
		at       dbTime
	)
	if err := sc.Scan(&r.WorkspaceID, &r.ShardID, &r.TargetShard, &r.Region, &r.Status, &lim, &fea,
		&r.Version, &at, &r.DSN, &r.TargetDSN); err != nil {
		return Record{}, err
	}
	r.ChangedAt = at.t
	if err := json.Unmarshal([]byte(lim), &r.Limits); err != nil {
		return Record{}, fmt.Errorf("workspace %s limits: %w", r.WorkspaceID, err)
	}
	if err := json.Unmarshal([]byte(fea), &r.Features); err != nil {
		return Record{}, fmt.Errorf("workspace %s features: %w", r.WorkspaceID, err)
	}
	if len(r.Limits) == 0 {
		r.Limits = nil
	}
	if len(r.Features) == 0 {
		r.Features = nil
	}
	return r, nil
}

func (c *Catalogue) workspace(ctx context.Context, q querier, id string) (Record, error) {
	r, err := scanRecord(q.QueryRowContext(ctx, `SELECT `+recordColumns+recordFrom+` WHERE w.id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, parley.Errorf(parley.ENOTFOUND, "workspace %q is not placed", id)
	}
	if err != nil {
		return Record{}, fmt.Errorf("workspace %s: %w", id, err)
	}
	return r, nil
}

// Workspaces returns every workspace record (with DSNs), by id: the
// catalogue side of a projection check.
func (c *Catalogue) Workspaces(ctx context.Context) ([]Record, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT `+recordColumns+recordFrom+` ORDER BY w.id`)
	if err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("list workspaces: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	return out, nil
}

func (c *Catalogue) shard(ctx context.Context, q querier, id string) (Shard, error) {
	var s Shard
	var at dbTime
	err := q.QueryRowContext(ctx, `SELECT id, region, dsn, capacity, state, version, changed_at FROM tenantdir_shards WHERE id = $1`, id).
		Scan(&s.ID, &s.Region, &s.DSN, &s.Capacity, &s.State, &s.Version, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return Shard{}, parley.Errorf(parley.ENOTFOUND, "no shard %q", id)
	}
	if err != nil {
		return Shard{}, err
	}
	s.ChangedAt = at.t
	return s, nil
}

// tx runs fn in a transaction stamped with one time, and calls OnChange
// after a commit.
func (c *Catalogue) tx(ctx context.Context, fn func(tx *sql.Tx, now time.Time) error) error {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx, time.Now().UTC()); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if c.onChange != nil {
		c.onChange()
	}
	return nil
}

// SetOnChange sets the hook called after each commit (before the
// catalogue is shared).
func (c *Catalogue) SetOnChange(fn func()) { c.onChange = fn }

// checkOverrides refuses override keys Parley does not know and limits
// out of range (parley.ValidateOverrides): a key nothing reads would look
// applied and do nothing.
func checkOverrides(limits map[string]int64, features map[string]bool) error {
	return parley.ValidateOverrides(limits, features)
}

func encodeOverrides(limits map[string]int64, features map[string]bool) (string, string) {
	lim, _ := json.Marshal(limits)
	fea, _ := json.Marshal(features)
	if limits == nil {
		lim = []byte("{}")
	}
	if features == nil {
		fea = []byte("{}")
	}
	return string(lim), string(fea)
}

// raced turns the unique violation of an insert that lost a race with
// another (both checked, both inserted) into the conflict the check would
// have reported.
func raced(err error, format string, args ...any) error {
	msg := err.Error()
	if strings.Contains(msg, "UNIQUE constraint failed") || strings.Contains(msg, "SQLSTATE 23505") {
		return parley.Errorf(parley.ECONFLICT, format, args...)
	}
	return err
}
