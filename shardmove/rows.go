package shardmove

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The row primitives: a scope (which rows of a table belong to the move),
// a batched keyset copy, a per-row checksum diff, batched deletes. They
// are generic over the schema read by loadSchema; nothing here names a
// table's columns.

// querier is a *sql.DB or *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// scope selects rows: a WHERE condition and its arguments ($1…).
type scope struct {
	where string
	args  []any
}

// and is s with one more condition whose own placeholders start at $1
// (they are renumbered after s's).
func (s scope) and(cond string, args ...any) scope {
	cond = shift(cond, len(args), len(s.args))
	return scope{where: "(" + s.where + ") AND " + cond, args: append(append([]any{}, s.args...), args...)}
}

// shift renumbers cond's placeholders $1…$nargs to follow by others.
func shift(cond string, nargs, by int) string {
	for i := nargs; i >= 1; i-- {
		cond = strings.ReplaceAll(cond, "$"+strconv.Itoa(i), "$"+strconv.Itoa(by+i))
	}
	return cond
}

// maxParams keeps a statement under PostgreSQL's 65535 bind parameters.
const maxParams = 60000

// placeholders is "($a, $a+1, …), (…)" for rows of width w starting at $from.
func placeholders(from, rows, w int) string {
	var b strings.Builder
	for r := range rows {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := range w {
			if c > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(from + r*w + c))
		}
		b.WriteByte(')')
	}
	return b.String()
}

// pkIndex is the positions of t's key columns among its columns.
func (t *table) pkIndex() []int {
	idx := make([]int, len(t.pk))
	for i, k := range t.pk {
		for j, c := range t.cols {
			if c == k {
				idx[i] = j
			}
		}
	}
	return idx
}

// scanRows reads every row of rows as len(cols) values.
func scanRows(rows *sql.Rows, width int) ([][]any, error) {
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		vals := make([]any, width)
		ptrs := make([]any, width)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, vals)
	}
	return out, rows.Err()
}

// copyRows copies every row of t in sc from src (a snapshot) to tgt, a
// batch at a time in key order; each batch is one upsert transaction on
// the target. It returns how many rows it copied.
func copyRows(ctx context.Context, src querier, tgt *sql.DB, t *table, sc scope, batch int, onBatch func(int)) (int64, error) {
	pki := t.pkIndex()
	var after []any
	var total int64
	for {
		cur := sc
		if after != nil {
			cur = sc.and("("+quoteAll(t.pk)+") > "+placeholders(1, 1, len(t.pk)), after...)
		}
		rows, err := src.QueryContext(ctx, `SELECT `+quoteAll(t.cols)+` FROM `+quote(t.name)+` WHERE `+cur.where+
			` ORDER BY `+quoteAll(t.pk)+` LIMIT `+strconv.Itoa(batch), cur.args...)
		if err != nil {
			return total, fmt.Errorf("read %s: %w", t.name, err)
		}
		page, err := scanRows(rows, len(t.cols))
		if err != nil {
			return total, fmt.Errorf("read %s: %w", t.name, err)
		}
		if len(page) == 0 {
			return total, nil
		}
		if err := upsert(ctx, tgt, t, page); err != nil {
			return total, err
		}
		total += int64(len(page))
		if onBatch != nil {
			onBatch(len(page))
		}
		if len(page) < batch {
			return total, nil
		}
		last := page[len(page)-1]
		after = make([]any, len(pki))
		for i, j := range pki {
			after[i] = last[j]
		}
	}
}

// upsert writes rows into t on db in one transaction: a row whose key is
// there already is overwritten, so copying twice is harmless.
func upsert(ctx context.Context, db *sql.DB, t *table, rows [][]any) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("write %s: %w", t.name, err)
	}
	defer tx.Rollback()
	// The mover's writes pass the fence (fence.go), whatever the shard's
	// fence rows say.
	if _, err := tx.ExecContext(ctx, setBypass); err != nil {
		return fmt.Errorf("write %s: %w", t.name, err)
	}
	set := make([]string, 0, len(t.cols))
	for _, c := range t.cols {
		if !contains(t.pk, c) {
			set = append(set, quote(c)+" = EXCLUDED."+quote(c))
		}
	}
	conflict := " ON CONFLICT (" + quoteAll(t.pk) + ") DO NOTHING"
	if len(set) > 0 {
		conflict = " ON CONFLICT (" + quoteAll(t.pk) + ") DO UPDATE SET " + strings.Join(set, ", ")
	}
	per := max(1, maxParams/len(t.cols))
	for len(rows) > 0 {
		n := min(per, len(rows))
		args := make([]any, 0, n*len(t.cols))
		for _, r := range rows[:n] {
			args = append(args, r...)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+quote(t.name)+` (`+quoteAll(t.cols)+`) VALUES `+
			placeholders(1, n, len(t.cols))+conflict, args...); err != nil {
			return fmt.Errorf("write %s: %w", t.name, err)
		}
		rows = rows[n:]
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("write %s: %w", t.name, err)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// keyed is a row's key values and checksum.
type keyed struct {
	key []any
	sum string
}

// checksums reads the key and an md5 of every stored column of each row of
// t in sc, by the key's text.
func checksums(ctx context.Context, q querier, t *table, sc scope) (map[string]keyed, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+quoteAll(t.pk)+`, md5(ROW(`+quoteAll(t.cols)+`)::text) FROM `+
		quote(t.name)+` WHERE `+sc.where, sc.args...)
	if err != nil {
		return nil, fmt.Errorf("checksum %s: %w", t.name, err)
	}
	all, err := scanRows(rows, len(t.pk)+1)
	if err != nil {
		return nil, fmt.Errorf("checksum %s: %w", t.name, err)
	}
	out := make(map[string]keyed, len(all))
	for _, r := range all {
		k := r[:len(t.pk)]
		sum, _ := r[len(t.pk)].(string)
		out[keyText(k)] = keyed{key: k, sum: sum}
	}
	return out, nil
}

// keyText is a map key for a row key.
func keyText(k []any) string {
	var b strings.Builder
	for i, v := range k {
		if i > 0 {
			b.WriteByte(0)
		}
		fmt.Fprint(&b, v)
	}
	return b.String()
}

// syncRows makes t's rows in sc on tgt equal to those on src (a
// snapshot): rows missing or different on the target are copied, rows the
// source no longer has are deleted unless keep. It returns how many rows
// it wrote and deleted.
func syncRows(ctx context.Context, src querier, tgt *sql.DB, t *table, sc scope, batch int, keep bool) (int64, error) {
	var have, got map[string]keyed
	if err := both(func() (err error) { have, err = checksums(ctx, src, t, sc); return },
		func() (err error) { got, err = checksums(ctx, tgt, t, sc); return }); err != nil {
		return 0, err
	}
	var fetch, drop [][]any
	for k, r := range have {
		if g, ok := got[k]; !ok || g.sum != r.sum {
			fetch = append(fetch, r.key)
		}
	}
	if !keep {
		for k, g := range got {
			if _, ok := have[k]; !ok {
				drop = append(drop, g.key)
			}
		}
	}
	if err := deleteKeys(ctx, tgt, t, drop, batch); err != nil {
		return 0, err
	}
	changed := int64(len(fetch) + len(drop))
	for len(fetch) > 0 {
		n := min(batch, len(fetch), maxParams/len(t.pk))
		args := make([]any, 0, n*len(t.pk))
		for _, k := range fetch[:n] {
			args = append(args, k...)
		}
		rows, err := src.QueryContext(ctx, `SELECT `+quoteAll(t.cols)+` FROM `+quote(t.name)+` WHERE (`+quoteAll(t.pk)+
			`) IN (`+placeholders(1, n, len(t.pk))+`)`, args...)
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", t.name, err)
		}
		page, err := scanRows(rows, len(t.cols))
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", t.name, err)
		}
		if len(page) > 0 {
			if err := upsert(ctx, tgt, t, page); err != nil {
				return 0, err
			}
		}
		fetch = fetch[n:]
	}
	return changed, nil
}

// deleteKeys deletes t's rows with the given keys, batch keys a statement
// (passing the fence: the mover's deletes).
func deleteKeys(ctx context.Context, db *sql.DB, t *table, keys [][]any, batch int) error {
	for len(keys) > 0 {
		n := min(batch, len(keys), maxParams/len(t.pk))
		args := make([]any, 0, n*len(t.pk))
		for _, k := range keys[:n] {
			args = append(args, k...)
		}
		if _, err := bypassExec(ctx, db, `DELETE FROM `+quote(t.name)+` WHERE (`+quoteAll(t.pk)+`) IN (`+
			placeholders(1, n, len(t.pk))+`)`, args...); err != nil {
			return fmt.Errorf("delete from %s: %w", t.name, err)
		}
		keys = keys[n:]
	}
	return nil
}

// deleteScope deletes every row of t in sc, batch rows a transaction, and
// returns how many it deleted. Its transactions pass the fence (the purge
// deletes from a fenced source).
func deleteScope(ctx context.Context, db *sql.DB, t *table, sc scope, batch int) (int64, error) {
	var total int64
	for {
		res, err := bypassExec(ctx, db, `DELETE FROM `+quote(t.name)+` WHERE ctid IN (SELECT ctid FROM `+quote(t.name)+
			` WHERE `+sc.where+` LIMIT `+strconv.Itoa(batch)+`)`, sc.args...)
		if err != nil {
			return total, fmt.Errorf("delete from %s: %w", t.name, err)
		}
		n, _ := res.RowsAffected()
		total += n
		if n < int64(batch) {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}

// count is how many rows of t are in sc.
func count(ctx context.Context, q querier, t *table, sc scope) (int64, error) {
	var n int64
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+quote(t.name)+` WHERE `+sc.where, sc.args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count %s: %w", t.name, err)
	}
	return n, nil
}

// countAll counts the rows of every table in its scope, in one query.
func countAll(ctx context.Context, q querier, tables []*table, scopes []scope) (map[string]int64, error) {
	var parts []string
	var args []any
	for i, t := range tables {
		parts = append(parts, `SELECT `+strconv.Itoa(i)+`, COUNT(*) FROM `+quote(t.name)+` WHERE `+
			shift(scopes[i].where, len(scopes[i].args), len(args)))
		args = append(args, scopes[i].args...)
	}
	rows, err := q.QueryContext(ctx, strings.Join(parts, " UNION ALL "), args...)
	if err != nil {
		return nil, fmt.Errorf("count rows: %w", err)
	}
	defer rows.Close()
	out := make(map[string]int64, len(tables))
	for rows.Next() {
		var i int
		var n int64
		if err := rows.Scan(&i, &n); err != nil {
			return nil, fmt.Errorf("count rows: %w", err)
		}
		out[tables[i].name] = n
	}
	return out, rows.Err()
}

// tableSum is one checksum over all of t's rows in sc, in key order.
func tableSum(ctx context.Context, q querier, t *table, sc scope) (string, error) {
	var sum sql.NullString
	if err := q.QueryRowContext(ctx, `SELECT md5(string_agg(md5(ROW(`+quoteAll(t.cols)+`)::text), '' ORDER BY `+
		quoteAll(t.pk)+`)) FROM `+quote(t.name)+` WHERE `+sc.where, sc.args...).Scan(&sum); err != nil {
		return "", fmt.Errorf("checksum %s: %w", t.name, err)
	}
	return sum.String, nil
}

// both runs a and b at once (one on each shard: the read-only window is
// mostly round trips) and returns their errors.
func both(a, b func() error) error {
	errc := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				errc <- fmt.Errorf("panic: %v", p)
			}
		}()
		errc <- b()
	}()
	ea := a()
	return errors.Join(ea, <-errc)
}
