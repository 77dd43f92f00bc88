package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"parley"
)

// Login sessions. The store keeps only the hash of each bearer token.

// CreateSession stores a new login for an active user. A zero CreatedAt is
// the transaction's clock.
func (s *Store) CreateSession(ctx context.Context, sess parley.Session) error {
	if sess.TokenHash == "" {
		return parley.Errorf(parley.EINVALID, "session token hash is required")
	}
	if sess.ExpiresAt.IsZero() {
		return parley.Errorf(parley.EINVALID, "session expiry is required")
	}
	return s.write(ctx, "create session", func(ctx context.Context, tx *Tx) error {
		var deactivated sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT deactivated_at FROM users WHERE id = $1`, sess.UserID).Scan(&deactivated)
		if errors.Is(err, sql.ErrNoRows) {
			return parley.Errorf(parley.ENOTFOUND, "user not found")
		}
		if err != nil {
			return fmt.Errorf("session user: %w", err)
		}
		if deactivated.Valid {
			return parley.Errorf(parley.EUNAUTHORIZED, "account is deactivated")
		}
		created := sess.CreatedAt
		if created.IsZero() {
			created = tx.now
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO sessions (token_hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
			sess.TokenHash, sess.UserID, micros(created), micros(sess.ExpiresAt)); err != nil {
			if isUniqueViolation(err) {
				return parley.Errorf(parley.ECONFLICT, "session already exists")
			}
			return fmt.Errorf("insert session: %w", err)
		}
		return nil
	})
}

// SessionByToken returns the live session with that token hash. Unknown,
// expired and revoked sessions, and those of deactivated users, are all
// EUNAUTHORIZED alike.
func (s *Store) SessionByToken(ctx context.Context, tokenHash string) (*parley.Session, error) {
	var sess parley.Session
	var created, expires int64
	var revoked, deactivated sql.NullInt64
	var scopes sql.NullString
	err := s.rdb.QueryRowContext(ctx,
		`SELECT s.user_id, s.created_at, s.expires_at, s.revoked_at, u.deactivated_at, s.scopes
		 FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.token_hash = $1`, tokenHash).
		Scan(&sess.UserID, &created, &expires, &revoked, &deactivated, &scopes)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, parley.Errorf(parley.EUNAUTHORIZED, "session is invalid or expired")
	}
	if err != nil {
		return nil, fmt.Errorf("session by token: %w", err)
	}
	if revoked.Valid || deactivated.Valid || expires <= micros(s.now()) {
		return nil, parley.Errorf(parley.EUNAUTHORIZED, "session is invalid or expired")
	}
	sess.TokenHash = tokenHash
	if scopes.Valid { // a bot token (integrations.go)
		sess.Scopes = strings.Fields(scopes.String)
		if sess.Scopes == nil {
			sess.Scopes = []string{}
		}
	}
	sess.CreatedAt, sess.ExpiresAt = fromMicros(created), fromMicros(expires)
	return &sess, nil
}

// RevokeSession ends a session (logout). The first revocation emits
// session.revoked on the user's topic so that gateways close the sockets
// identified with that token; revoking again, or an unknown token, is a
// no-op.
func (s *Store) RevokeSession(ctx context.Context, tokenHash string) error {
	return s.write(ctx, "revoke session", func(ctx context.Context, tx *Tx) error {
		var userID string
		err := tx.QueryRowContext(ctx,
			`UPDATE sessions SET revoked_at = $1 WHERE token_hash = $2 AND revoked_at IS NULL RETURNING user_id`,
			micros(tx.now), tokenHash).Scan(&userID)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("revoke session: %w", err)
		}
		return tx.emit("", parley.EventSessionRevoked, parley.SessionRevokedData{TokenHash: tokenHash},
			parley.TopicUser(userID))
	})
}
