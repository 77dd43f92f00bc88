package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"parley"
)

// Bot users and their tokens (parley.IntegrationStore, docs/integrations.md).
// A bot is a users row with is_bot set, a guest of the one workspace that
// owns it: guests see only the channels they are in, which is the read
// scope a bot has. Its tokens are sessions with scopes.

var _ parley.IntegrationStore = (*Store)(nil)

// botTokenTTL: bot tokens live until revoked; sessions need an expiry.
const botTokenTTL = 100 * 365 * 24 * time.Hour

// requireAdmin returns EFORBIDDEN unless actor administers the workspace
// (ENOTFOUND when they are not in it).
func requireAdmin(ctx context.Context, q querier, workspaceID, actor string) error {
	role, err := workspaceRole(ctx, q, workspaceID, actor)
	if err != nil {
		return err
	}
	if !role.IsAdmin() {
		return parley.Errorf(parley.EFORBIDDEN, "only workspace admins manage integrations")
	}
	return nil
}

// createBotUser inserts a bot user and its guest membership of the
// workspace (workspace.member_joined goes to the admins and the caches).
func (tx *Tx) createBotUser(ctx context.Context, workspaceID, name, handle, kind, createdBy string) (*parley.User, error) {
	if err := parley.ValidateHandle(handle); err != nil {
		return nil, err
	}
	if err := parley.ValidateName("name", name); err != nil {
		return nil, err
	}
	now := tx.now
	u := &parley.User{ID: parley.NewID(parley.PrefixUser), Name: name, Handle: handle, IsBot: true, CreatedAt: now, UpdatedAt: now}
	// The email names nobody (UserCredentials never finds a bot): it only
	// fills the column, which is unique.
	email := strings.ToLower(u.ID) + "@bots.invalid"
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO users (id, email, handle, name, password_hash, created_at, updated_at, is_bot)
		 VALUES ($1, $2, $3, $4, '', $5, $5, $6)`,
		u.ID, email, handle, name, micros(now), true); err != nil {
		if isUniqueViolation(err) {
			return nil, parley.Errorf(parley.ECONFLICT, "handle %q is already taken", handle)
		}
		return nil, fmt.Errorf("insert bot user: %w", err)
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO bots (workspace_id, user_id, kind, created_by, created_at) VALUES ($1, $2, $3, $4, $5)`,
		workspaceID, u.ID, kind, createdBy, micros(now)); err != nil {
		return nil, fmt.Errorf("insert bot: %w", err)
	}
	if err := tx.joinWorkspace(ctx, workspaceID, u, parley.RoleGuest); err != nil {
		return nil, err
	}
	return u, nil
}

// CreateBot makes a bot user in the workspace (admins only).
func (s *Store) CreateBot(ctx context.Context, actor, workspaceID string, b parley.NewBot) (*parley.Bot, error) {
	var out *parley.Bot
	err := s.write(ctx, "create bot", func(ctx context.Context, tx *Tx) error {
		if err := requireAdmin(ctx, tx, workspaceID, actor); err != nil {
			return err
		}
		u, err := tx.createBotUser(ctx, workspaceID, b.Name, b.Handle, "bot", actor)
		if err != nil {
			return err
		}
		out = &parley.Bot{User: u, WorkspaceID: workspaceID, CreatedBy: actor, CreatedAt: tx.now, Kind: "bot"}
		return nil
	})
	return out, err
}

// ListBots lists the workspace's bots, revoked ones included (admins only).
func (s *Store) ListBots(ctx context.Context, actor, workspaceID string) ([]parley.Bot, error) {
	if err := requireAdmin(ctx, s.rdb, workspaceID, actor); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+userColumns+`, b.kind, b.created_by, b.created_at, b.revoked_at
		FROM bots b JOIN users u ON u.id = b.user_id WHERE b.workspace_id = $1 ORDER BY b.created_at, u.id`, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("list bots: %w", err)
	}
	defer rows.Close()
	out := []parley.Bot{}
	for rows.Next() {
		b := parley.Bot{WorkspaceID: workspaceID}
		var created int64
		var revoked sql.NullInt64
		u, err := scanUser(scanFunc(func(dest ...any) error {
			return rows.Scan(append(dest, &b.Kind, &b.CreatedBy, &created, &revoked)...)
		}), s.now())
		if err != nil {
			return nil, fmt.Errorf("list bots: %w", err)
		}
		b.User, b.CreatedAt, b.RevokedAt = u, fromMicros(created), timePtr(revoked)
		out = append(out, b)
	}
	return out, rows.Err()
}

// loadBot checks that botID is a live bot of the workspace.
func loadBot(ctx context.Context, q querier, workspaceID, botID string) error {
	var revoked sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT revoked_at FROM bots WHERE workspace_id = $1 AND user_id = $2`,
		workspaceID, botID).Scan(&revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return parley.Errorf(parley.ENOTFOUND, "bot not found")
	}
	if err != nil {
		return fmt.Errorf("load bot: %w", err)
	}
	if revoked.Valid {
		return parley.Errorf(parley.ECONFLICT, "bot is revoked")
	}
	return nil
}

// revokeBotTx deactivates a bot and revokes every token it has: each
// revocation emits session.revoked, which closes its sockets.
func (tx *Tx) revokeBot(ctx context.Context, workspaceID, botID string) error {
	if _, err := tx.ExecContext(ctx, `UPDATE bots SET revoked_at = $1 WHERE workspace_id = $2 AND user_id = $3 AND revoked_at IS NULL`,
		micros(tx.now), workspaceID, botID); err != nil {
		return fmt.Errorf("revoke bot: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE users SET deactivated_at = $1, updated_at = $1 WHERE id = $2 AND deactivated_at IS NULL`,
		micros(tx.now), botID); err != nil {
		return fmt.Errorf("deactivate bot: %w", err)
	}
	rows, err := tx.QueryContext(ctx,
		`UPDATE sessions SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL RETURNING token_hash`,
		micros(tx.now), botID)
	if err != nil {
		return fmt.Errorf("revoke bot tokens: %w", err)
	}
	var hashes []string
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			rows.Close()
			return fmt.Errorf("revoke bot tokens: %w", err)
		}
		hashes = append(hashes, h)
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("revoke bot tokens: %w", err)
	}
	for _, h := range hashes {
		if err := tx.emit("", parley.EventSessionRevoked, parley.SessionRevokedData{TokenHash: h}, parley.TopicUser(botID)); err != nil {
			return err
		}
	}
	return nil
}

// RevokeBot deactivates a bot and revokes its tokens (admins only).
func (s *Store) RevokeBot(ctx context.Context, actor, workspaceID, botID string) error {
	return s.write(ctx, "revoke bot", func(ctx context.Context, tx *Tx) error {
		if err := requireAdmin(ctx, tx, workspaceID, actor); err != nil {
			return err
		}
		if err := loadBot(ctx, tx, workspaceID, botID); err != nil {
			if parley.ErrorCode(err) == parley.ECONFLICT {
				return nil // revoking twice is a no-op
			}
			return err
		}
		return tx.revokeBot(ctx, workspaceID, botID)
	})
}

// CreateBotToken stores a scoped token for a bot (admins only).
func (s *Store) CreateBotToken(ctx context.Context, actor, workspaceID, botID string, t parley.NewBotToken) (*parley.BotToken, error) {
	if t.TokenHash == "" {
		return nil, parley.Errorf(parley.EINVALID, "token hash is required")
	}
	if len(t.Scopes) == 0 {
		return nil, parley.Errorf(parley.EINVALID, "a token needs at least one scope (%s)", strings.Join(parley.Scopes, ", "))
	}
	for _, sc := range t.Scopes {
		if !parley.ValidScope(sc) {
			return nil, parley.Errorf(parley.EINVALID, "unknown scope %q (known: %s)", sc, strings.Join(parley.Scopes, ", "))
		}
	}
	if err := parley.CheckText("label", t.Label); err != nil {
		return nil, err
	}
	if len(t.Label) > 100 {
		return nil, parley.Errorf(parley.EINVALID, "label is longer than 100 bytes")
	}
	var out *parley.BotToken
	err := s.write(ctx, "create bot token", func(ctx context.Context, tx *Tx) error {
		if err := requireAdmin(ctx, tx, workspaceID, actor); err != nil {
			return err
		}
		if err := loadBot(ctx, tx, workspaceID, botID); err != nil {
			return err
		}
		bt := &parley.BotToken{ID: parley.NewID(parley.PrefixBotToken), BotID: botID, Label: t.Label,
			Scopes: t.Scopes, CreatedBy: actor, CreatedAt: tx.now}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO sessions (token_hash, user_id, created_at, expires_at, scopes) VALUES ($1, $2, $3, $4, $5)`,
			t.TokenHash, botID, micros(tx.now), micros(tx.now.Add(botTokenTTL)), strings.Join(t.Scopes, " ")); err != nil {
			return fmt.Errorf("insert bot session: %w", err)
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO bot_tokens (workspace_id, id, bot_id, token_hash, label, created_by, created_at)
			 VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			workspaceID, bt.ID, botID, t.TokenHash, t.Label, actor, micros(tx.now)); err != nil {
			return fmt.Errorf("insert bot token: %w", err)
		}
		out = bt
		return nil
	})
	return out, err
}

// ListBotTokens lists a bot's tokens, revoked ones included (admins only).
func (s *Store) ListBotTokens(ctx context.Context, actor, workspaceID, botID string) ([]parley.BotToken, error) {
	if err := requireAdmin(ctx, s.rdb, workspaceID, actor); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT t.id, t.label, t.created_by, t.created_at, s.scopes, s.revoked_at
		FROM bot_tokens t JOIN sessions s ON s.token_hash = t.token_hash
		WHERE t.workspace_id = $1 AND t.bot_id = $2 ORDER BY t.created_at, t.id`, workspaceID, botID)
	if err != nil {
		return nil, fmt.Errorf("list bot tokens: %w", err)
	}
	defer rows.Close()
	out := []parley.BotToken{}
	for rows.Next() {
		t := parley.BotToken{BotID: botID}
		var created int64
		var scopes sql.NullString
		var revoked sql.NullInt64
		if err := rows.Scan(&t.ID, &t.Label, &t.CreatedBy, &created, &scopes, &revoked); err != nil {
			return nil, fmt.Errorf("list bot tokens: %w", err)
		}
		t.CreatedAt, t.RevokedAt, t.Scopes = fromMicros(created), timePtr(revoked), strings.Fields(scopes.String)
		out = append(out, t)
	}
	return out, rows.Err()
}

// RevokeBotToken revokes one token (admins only); its sockets close.
func (s *Store) RevokeBotToken(ctx context.Context, actor, workspaceID, tokenID string) error {
	return s.write(ctx, "revoke bot token", func(ctx context.Context, tx *Tx) error {
		if err := requireAdmin(ctx, tx, workspaceID, actor); err != nil {
			return err
		}
		var hash, botID string
		err := tx.QueryRowContext(ctx, `SELECT token_hash, bot_id FROM bot_tokens WHERE workspace_id = $1 AND id = $2`,
			workspaceID, tokenID).Scan(&hash, &botID)
		if errors.Is(err, sql.ErrNoRows) {
			return parley.Errorf(parley.ENOTFOUND, "token not found")
		}
		if err != nil {
			return fmt.Errorf("load bot token: %w", err)
		}
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET revoked_at = $1 WHERE token_hash = $2 AND revoked_at IS NULL`,
			micros(tx.now), hash)
		if err != nil {
			return fmt.Errorf("revoke bot token: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		return tx.emit("", parley.EventSessionRevoked, parley.SessionRevokedData{TokenHash: hash}, parley.TopicUser(botID))
	})
}

// BotWorkspace returns the workspace a bot belongs to.
func (s *Store) BotWorkspace(ctx context.Context, botID string) (string, error) {
	var ws string
	err := s.rdb.QueryRowContext(ctx, `SELECT workspace_id FROM bots WHERE user_id = $1`, botID).Scan(&ws)
	if errors.Is(err, sql.ErrNoRows) {
		return "", parley.Errorf(parley.ENOTFOUND, "not a bot")
	}
	if err != nil {
		return "", fmt.Errorf("bot workspace: %w", err)
	}
	return ws, nil
}

// Audit records one thing a bot did.
func (s *Store) Audit(ctx context.Context, workspaceID string, e parley.AuditEntry) error {
	if e.ID == "" {
		e.ID = parley.NewID(parley.PrefixAuditEntry)
	}
	return s.write(ctx, "bot audit", func(ctx context.Context, tx *Tx) error {
		at := e.At
		if at.IsZero() {
			at = tx.now
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO bot_audit (workspace_id, id, bot_id, at, action, target, status) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			workspaceID, e.ID, e.BotID, micros(at), e.Action, e.Target, e.Status); err != nil {
			return fmt.Errorf("insert audit entry: %w", err)
		}
		return nil
	})
}

// AuditBots records the entries in one transaction, each in its bot's
// workspace: multi-row INSERT … SELECT joining the entries to bots, so
// there is no read before the write and one statement per 100 entries.
// An entry whose id is already there is skipped, so that a batch retried
// with its ids (auditlog) is not written twice.
func (s *Store) AuditBots(ctx context.Context, entries []parley.AuditEntry) (int, error) {
	if len(entries) == 0 {
		return 0, nil
	}
	n := 0
	err := s.write(ctx, "bot audit", func(ctx context.Context, tx *Tx) error {
		n = 0
		for chunk := range slices.Chunk(entries, 100) {
			var b strings.Builder
			b.WriteString(`WITH v (id, bot_id, at, action, target, status) AS (VALUES `)
			args := make([]any, 0, 6*len(chunk))
			for i, e := range chunk {
				if e.ID == "" {
					e.ID = parley.NewID(parley.PrefixAuditEntry)
				}
				at := e.At
				if at.IsZero() {
					at = tx.now
				}
				if i > 0 {
					b.WriteByte(',')
				}
				k := len(args)
				fmt.Fprintf(&b, "($%d, $%d, CAST($%d AS BIGINT), $%d, $%d, CAST($%d AS INTEGER))", k+1, k+2, k+3, k+4, k+5, k+6)
				args = append(args, e.ID, e.BotID, micros(at), e.Action, e.Target, e.Status)
			}
			b.WriteString(`) INSERT INTO bot_audit (workspace_id, id, bot_id, at, action, target, status)
				SELECT b.workspace_id, v.id, v.bot_id, v.at, v.action, v.target, v.status FROM v JOIN bots b ON b.user_id = v.bot_id
				WHERE true ON CONFLICT DO NOTHING`) // an entry written before (a retried batch) is written once; WHERE: SQLite's parser needs it before ON CONFLICT
			res, err := tx.ExecContext(ctx, b.String(), args...)
			if err != nil {
				return fmt.Errorf("insert audit entries: %w", err)
			}
			k, _ := res.RowsAffected()
			n += int(k)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// BotAudit pages the workspace's bot audit log, newest first (admins only).
// The cursor is the last entry's id (ids are time-ordered).
func (s *Store) BotAudit(ctx context.Context, actor, workspaceID, botID, cursor string, limit int) (*parley.AuditPage, error) {
	if err := requireAdmin(ctx, s.rdb, workspaceID, actor); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 200 {
		limit = 50
	}
	q := `SELECT id, bot_id, at, action, target, status FROM bot_audit
		WHERE workspace_id = $1 AND ($2 = '' OR bot_id = $2)`
	args := []any{workspaceID, botID}
	if cursor != "" {
		after, err := decodeCursor(cursor)
		if err != nil {
			return nil, err
		}
		q += ` AND id < $3`
		args = append(args, after)
	}
	q += fmt.Sprintf(` ORDER BY id DESC LIMIT %d`, limit+1)
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("bot audit: %w", err)
	}
	defer rows.Close()
	page := &parley.AuditPage{Entries: []parley.AuditEntry{}}
	for rows.Next() {
		var e parley.AuditEntry
		var at int64
		if err := rows.Scan(&e.ID, &e.BotID, &at, &e.Action, &e.Target, &e.Status); err != nil {
			return nil, fmt.Errorf("bot audit: %w", err)
		}
		e.At = fromMicros(at)
		page.Entries = append(page.Entries, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("bot audit: %w", err)
	}
	if len(page.Entries) > limit {
		page.Entries = page.Entries[:limit]
		page.NextCursor = encodeCursor(page.Entries[limit-1].ID)
	}
	return page, nil
}
