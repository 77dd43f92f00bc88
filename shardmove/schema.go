package shardmove

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
)

// class says how a table's rows belong to a workspace.
type class int

const (
	// byWorkspace: the table has a workspace_id column.
	byWorkspace class = iota
	// workspaceRow: the workspaces table itself (keyed by id).
	workspaceRow
	// byChannel: no workspace_id, but a channel_id of one of the
	// workspace's channels (notify_sent).
	byChannel
	// byUser: account-level rows of the users the workspace needs
	// (members, bots, imported accounts, authors): upserted on the
	// target, never deleted from the source (accounts are shared by every
	// workspace on the shard).
	byUser
	// byOrg: the workspace's organisation: upserted on the target, deleted
	// from the source only when no workspace there refers to it.
	byOrg
	// ignored: the shard's own bookkeeping (migrations, server-wide
	// settings, the file signing key), never copied.
	ignored
)

// sharedTables are the tables without a workspace_id that the mover knows
// about; every other table must have a workspace_id or a channel_id, or
// the move refuses to start (errUnclassified), so that a new table can
// never be silently left behind.
var sharedTables = map[string]class{
	"workspaces":       workspaceRow,
	"notify_sent":      byChannel,
	"users":            byUser,
	"sessions":         byUser,
	"notify_prefs":     byUser,
	"notify_state":     byUser,
	"orgs":             byOrg,
	"settings":         ignored,
	"file_signing_key": ignored,
	fenceTable:         ignored,
	movesTable:         ignored, // the fence's registry of moves (fence.go)
}

// loggedTables are the tables whose every change appends an event to the
// channel's log (so bumps channels.last_seq): a catch-up round compares
// them only in the channels whose last_seq moved. Every other table is
// compared whole each round.
var loggedTables = map[string]bool{"messages": true, "reactions": true, "pins": true, "events": true}

// table is one table of the shard's chat schema.
type table struct {
	name  string
	cols  []string // stored columns (generated ones are left out), in order
	pk    []string
	class class
	// hasChannel: the table has a channel_id column.
	hasChannel bool
}

// schema is the shard's chat tables in copy order: parents (orgs, users,
// workspaces) first, so that foreign keys hold on the target; deletes go
// in reverse.
type schema struct {
	tables []*table
	byName map[string]*table
}

// ErrUnclassified is returned (wrapped) when the shard has a table the
// mover does not know how to attribute to a workspace.
var errUnclassified = fmt.Errorf("table not attributable to a workspace")

// loadSchema reads the chat tables of db's current schema.
func loadSchema(ctx context.Context, db *sql.DB) (*schema, error) {
	rows, err := db.QueryContext(ctx, `SELECT c.table_name, c.column_name, c.is_generated
		FROM information_schema.columns c
		JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
		WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
		ORDER BY c.table_name, c.ordinal_position`)
	if err != nil {
		return nil, fmt.Errorf("read schema: %w", err)
	}
	defer rows.Close()
	s := &schema{byName: map[string]*table{}}
	var names []string
	for rows.Next() {
		var tn, cn, gen string
		if err := rows.Scan(&tn, &cn, &gen); err != nil {
			return nil, fmt.Errorf("read schema: %w", err)
		}
		t := s.byName[tn]
		if t == nil {
			t = &table{name: tn, class: -1}
			s.byName[tn] = t
			names = append(names, tn)
		}
		if cn == "workspace_id" {
			t.class = byWorkspace
		}
		if cn == "channel_id" {
			t.hasChannel = true
		}
		if gen == "NEVER" {
			t.cols = append(t.cols, cn)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read schema: %w", err)
	}
	rows.Close()
	var unknown []string
	for _, n := range names {
		t := s.byName[n]
		if strings.Contains(n, "goose") || strings.HasPrefix(n, "tenantdir_") {
			t.class = ignored // migration bookkeeping; the directory's catalogue when it shares the database
		} else if c, ok := sharedTables[n]; ok && t.class != byWorkspace {
			t.class = c
		} else if t.class != byWorkspace && t.hasChannel {
			t.class = byChannel // keyed by one of the workspace's channels
		} else if t.class != byWorkspace {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("%w: %s (give it a workspace_id column, or teach shardmove about it)", errUnclassified, strings.Join(unknown, ", "))
	}
	for _, n := range names {
		t := s.byName[n]
		if t.class == ignored {
			continue
		}
		if t.pk, err = primaryKey(ctx, db, n); err != nil {
			return nil, err
		}
		s.tables = append(s.tables, t)
	}
	sort.SliceStable(s.tables, func(i, j int) bool { return rank(s.tables[i]) < rank(s.tables[j]) })
	return s, nil
}

// rank orders tables for copying: parents first.
func rank(t *table) int {
	switch t.name {
	case "orgs":
		return 0
	case "users":
		return 1
	case "workspaces":
		return 2
	case "channels":
		return 3
	}
	return 4
}

// primaryKey is a table's primary key columns, in key order.
func primaryKey(ctx context.Context, db *sql.DB, name string) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT a.attname FROM pg_index i
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
		WHERE i.indrelid = $1::regclass AND i.indisprimary
		ORDER BY array_position(i.indkey::int2[], a.attnum)`, quote(name))
	if err != nil {
		return nil, fmt.Errorf("primary key of %s: %w", name, err)
	}
	defer rows.Close()
	var pk []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, fmt.Errorf("primary key of %s: %w", name, err)
		}
		pk = append(pk, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("primary key of %s: %w", name, err)
	}
	if len(pk) == 0 {
		return nil, fmt.Errorf("table %s has no primary key: the mover cannot copy it idempotently", name)
	}
	return pk, nil
}

// sameSchema checks the target has every table and column of the source.
func sameSchema(src, tgt *schema) error {
	for _, t := range src.tables {
		u := tgt.byName[t.name]
		if u == nil {
			return fmt.Errorf("target has no table %s: migrate it first", t.name)
		}
		if strings.Join(u.cols, ",") != strings.Join(t.cols, ",") {
			return fmt.Errorf("table %s differs on the target (%s vs %s): run the same migrations on both", t.name,
				strings.Join(u.cols, ","), strings.Join(t.cols, ","))
		}
	}
	return nil
}

// quote is a quoted identifier.
func quote(id string) string { return `"` + strings.ReplaceAll(id, `"`, `""`) + `"` }

func quoteAll(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = quote(id)
	}
	return strings.Join(q, ", ")
}
