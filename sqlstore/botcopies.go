package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"parley"
)

// What store routing (package shardstore) needs to route integrations:
// a bot lives on its workspace's shard (its users row, bots row, token
// sessions), and the router copies its users row and its token sessions
// to the control database, where requests authenticate. None of these
// authorise anything: they act for the router after the shard's own call
// authorised the change.

// SessionCopy is a sessions row as the router copies it from a shard to
// the control database (a bot token's session).
type SessionCopy struct {
	TokenHash, UserID    string
	CreatedAt, ExpiresAt int64
	RevokedAt            sql.NullInt64
	Scopes               sql.NullString
}

// ReadSessionCopy reads a session's row to copy it, or ENOTFOUND.
func (s *Store) ReadSessionCopy(ctx context.Context, tokenHash string) (SessionCopy, error) {
	var c SessionCopy
	err := s.rdb.QueryRowContext(ctx, `SELECT token_hash, user_id, created_at, expires_at, revoked_at, scopes
		FROM sessions WHERE token_hash = $1`, tokenHash).
		Scan(&c.TokenHash, &c.UserID, &c.CreatedAt, &c.ExpiresAt, &c.RevokedAt, &c.Scopes)
	if errors.Is(err, sql.ErrNoRows) {
		return SessionCopy{}, parley.Errorf(parley.ENOTFOUND, "session not found")
	}
	if err != nil {
		return SessionCopy{}, fmt.Errorf("read session copy: %w", err)
	}
	return c, nil
}

// PutSessionCopy inserts a copy of a session, or brings an existing one up
// to date. A revocation is never undone: a copy revoked here stays revoked
// whatever the row copied says. No event: the shard that revoked the token
// told its sockets (session.revoked).
func (s *Store) PutSessionCopy(ctx context.Context, c SessionCopy) error {
	return s.write(ctx, "put session copy", func(ctx context.Context, tx *Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO sessions (token_hash, user_id, created_at, expires_at, revoked_at, scopes)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (token_hash) DO UPDATE SET expires_at = excluded.expires_at, scopes = excluded.scopes,
			  revoked_at = COALESCE(sessions.revoked_at, excluded.revoked_at)`,
			c.TokenHash, c.UserID, c.CreatedAt, c.ExpiresAt, c.RevokedAt, c.Scopes)
		if err != nil {
			return fmt.Errorf("put session copy: %w", err)
		}
		return nil
	})
}

// HandleTaken reports whether a user of this database has the handle.
func (s *Store) HandleTaken(ctx context.Context, handle string) (bool, error) {
	var one int
	err := s.rdb.QueryRowContext(ctx, `SELECT 1 FROM users WHERE handle = $1`, handle).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check handle: %w", err)
	}
	return true, nil
}

// BotTokenHash returns the session hash and the bot of a workspace's bot
// token, revoked or not, or ENOTFOUND.
func (s *Store) BotTokenHash(ctx context.Context, workspaceID, tokenID string) (hash, botID string, err error) {
	err = s.rdb.QueryRowContext(ctx, `SELECT token_hash, bot_id FROM bot_tokens WHERE workspace_id = $1 AND id = $2`,
		workspaceID, tokenID).Scan(&hash, &botID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", parley.Errorf(parley.ENOTFOUND, "token not found")
	}
	if err != nil {
		return "", "", fmt.Errorf("bot token hash: %w", err)
	}
	return hash, botID, nil
}

// WebhookBot returns the bot of a workspace's incoming webhook, deleted
// (its bot revoked) or not, or ENOTFOUND.
func (s *Store) WebhookBot(ctx context.Context, workspaceID, webhookID string) (string, error) {
	return s.botOfRow(ctx, "incoming_webhooks", "webhook", workspaceID, webhookID)
}

// IntegrationBot returns the bot of a workspace's slash command or
// outgoing webhook, deleted or not, or ENOTFOUND.
func (s *Store) IntegrationBot(ctx context.Context, workspaceID, id string) (string, error) {
	return s.botOfRow(ctx, "integrations", "integration", workspaceID, id)
}

func (s *Store) botOfRow(ctx context.Context, table, what, workspaceID, id string) (string, error) {
	var bot string
	err := s.rdb.QueryRowContext(ctx, `SELECT bot_id FROM `+table+` WHERE workspace_id = $1 AND id = $2`,
		workspaceID, id).Scan(&bot)
	if errors.Is(err, sql.ErrNoRows) {
		return "", parley.Errorf(parley.ENOTFOUND, "%s not found", what)
	}
	if err != nil {
		return "", fmt.Errorf("%s bot: %w", what, err)
	}
	return bot, nil
}

// ResponseWorkspace returns the workspace of a response_url grant (its
// token's hash), expired or used up ones included (UseResponse says
// which), or ENOTFOUND.
func (s *Store) ResponseWorkspace(ctx context.Context, tokenHash string) (string, error) {
	var ws string
	err := s.rdb.QueryRowContext(ctx, `SELECT workspace_id FROM command_responses WHERE token_hash = $1`, tokenHash).Scan(&ws)
	if errors.Is(err, sql.ErrNoRows) {
		return "", parley.Errorf(parley.ENOTFOUND, "response_url is unknown, expired or used up")
	}
	if err != nil {
		return "", fmt.Errorf("response workspace: %w", err)
	}
	return ws, nil
}
