package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"parley"
)

// Accounts and profiles: signup, credentials, the caller's own profile and
// status, and the user lookups that are bounded by shared workspaces.

// userEmailColumns is userColumns plus the email, for the user themself.
const userEmailColumns = userColumns + `, u.email`

// loadUser reads one user; withEmail adds the email (only ever for the user
// themself). Unknown ids are ENOTFOUND.
func loadUser(ctx context.Context, q querier, id string, now time.Time, withEmail bool) (*parley.User, error) {
	cols := userColumns
	if withEmail {
		cols = userEmailColumns
	}
	row := q.QueryRowContext(ctx, `SELECT `+cols+` FROM users u WHERE u.id = $1`, id)
	var email string
	u, err := scanUser(scanFunc(func(dest ...any) error {
		if withEmail {
			dest = append(dest, &email)
		}
		return row.Scan(dest...)
	}), now)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, parley.Errorf(parley.ENOTFOUND, "user not found")
	}
	if err != nil {
		return nil, fmt.Errorf("load user: %w", err)
	}
	u.Email = email
	return u, nil
}

// CreateUser stores a new account. Emails and handles are unique on the
// server. No event: the user is in no workspace yet.
func (s *Store) CreateUser(ctx context.Context, nu parley.NewUser) (*parley.User, error) {
	email, err := parley.NormalizeEmail(nu.Email)
	if err != nil {
		return nil, err
	}
	if err := parley.ValidateHandle(nu.Handle); err != nil {
		return nil, err
	}
	if err := parley.ValidateName("name", nu.Name); err != nil {
		return nil, err
	}
	if nu.PasswordHash == "" {
		return nil, parley.Errorf(parley.EINVALID, "password hash is required")
	}
	var out *parley.User
	err = s.write(ctx, "create user", func(ctx context.Context, tx *Tx) error {
		rows, err := tx.QueryContext(ctx,
			`SELECT email, handle FROM users WHERE email = $1 OR handle = $2`, email, nu.Handle)
		if err != nil {
			return fmt.Errorf("check user: %w", err)
		}
		var emailTaken, handleTaken bool
		for rows.Next() {
			var e, h string
			if err := rows.Scan(&e, &h); err != nil {
				rows.Close()
				return fmt.Errorf("check user: %w", err)
			}
			emailTaken = emailTaken || e == email
			handleTaken = handleTaken || h == nu.Handle
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("check user: %w", err)
		}
		if emailTaken {
			// An account an import made for this email is taken over
			// (importer.go); any other is a conflict.
			u, err := tx.claimImported(ctx, email, nu)
			if err != nil {
				return err
			}
			if u == nil {
				return parley.Errorf(parley.ECONFLICT, "email is already registered")
			}
			out = u
			return nil
		}
		if handleTaken {
			return parley.Errorf(parley.ECONFLICT, "handle %q is already taken", nu.Handle)
		}
		now := tx.now
		u := &parley.User{
			ID:        parley.NewID(parley.PrefixUser),
			Email:     email,
			Name:      nu.Name,
			Handle:    nu.Handle,
			CreatedAt: now,
			UpdatedAt: now,
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO users (id, email, handle, name, password_hash, created_at, updated_at)
			 VALUES ($1, $2, $3, $4, $5, $6, $6)`,
			u.ID, u.Email, u.Handle, u.Name, nu.PasswordHash, micros(now)); err != nil {
			if isUniqueViolation(err) {
				// A concurrent signup won the race.
				if strings.Contains(err.Error(), "email") {
					return parley.Errorf(parley.ECONFLICT, "email is already registered")
				}
				return parley.Errorf(parley.ECONFLICT, "handle %q is already taken", nu.Handle)
			}
			return fmt.Errorf("insert user: %w", err)
		}
		out = u
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// UserCredentials returns the user with that email (email included) and
// their password hash. A malformed email names nobody: ENOTFOUND.
func (s *Store) UserCredentials(ctx context.Context, email string) (*parley.User, string, error) {
	e, err := parley.NormalizeEmail(email)
	if err != nil {
		return nil, "", parley.Errorf(parley.ENOTFOUND, "user not found")
	}
	row := s.rdb.QueryRowContext(ctx,
		`SELECT `+userEmailColumns+`, u.password_hash FROM users u WHERE u.email = $1 AND NOT u.is_bot`, e)
	var gotEmail, hash string
	u, err := scanUser(scanFunc(func(dest ...any) error {
		return row.Scan(append(dest, &gotEmail, &hash)...)
	}), s.now())
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", parley.Errorf(parley.ENOTFOUND, "user not found")
	}
	if err != nil {
		return nil, "", fmt.Errorf("user credentials: %w", err)
	}
	u.Email = gotEmail
	return u, hash, nil
}

// GetMe returns the caller's own profile, email included.
func (s *Store) GetMe(ctx context.Context, actor string) (*parley.User, error) {
	return loadUser(ctx, s.rdb, actor, s.now(), true)
}

// UpdateMe changes the caller's name, title or avatar and tells every
// workspace they belong to (user.updated, without the email).
func (s *Store) UpdateMe(ctx context.Context, actor string, p parley.UserPatch) (*parley.User, error) {
	if p.Name != nil {
		if err := parley.ValidateName("name", *p.Name); err != nil {
			return nil, err
		}
	}
	if p.Title != nil {
		if err := parley.ValidateText("title", *p.Title, parley.MaxTitleLen); err != nil {
			return nil, err
		}
	}
	if p.AvatarHash != nil {
		if err := parley.ValidateAvatarHash(*p.AvatarHash); err != nil {
			return nil, err
		}
	}
	var out *parley.User
	err := s.write(ctx, "update me", func(ctx context.Context, tx *Tx) error {
		u, err := loadUser(ctx, tx, actor, tx.now, true)
		if err != nil {
			return err
		}
		if p.Name == nil && p.Title == nil && p.AvatarHash == nil {
			out = u
			return nil
		}
		if p.Name != nil {
			u.Name = *p.Name
		}
		if p.Title != nil {
			u.Title = *p.Title
		}
		if p.AvatarHash != nil {
			u.AvatarHash = *p.AvatarHash
		}
		u.UpdatedAt = tx.now
		if _, err := tx.ExecContext(ctx,
			`UPDATE users SET name = $1, title = $2, avatar_hash = $3, updated_at = $4 WHERE id = $5`,
			u.Name, u.Title, u.AvatarHash, micros(u.UpdatedAt), actor); err != nil {
			return fmt.Errorf("update user: %w", err)
		}
		if err := tx.emitUserEvent(ctx, parley.EventUserUpdated, u); err != nil {
			return err
		}
		out = u
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SetStatus sets the caller's custom status; an empty emoji and text clear
// it. Every workspace of the caller gets user.status.
func (s *Store) SetStatus(ctx context.Context, actor string, st parley.Status) (*parley.User, error) {
	clearing := st.Emoji == "" && st.Text == ""
	if !clearing {
		if st.Emoji != "" {
			if err := parley.ValidateEmoji(st.Emoji); err != nil {
				return nil, err
			}
		}
		if err := parley.ValidateText("status text", st.Text, parley.MaxStatusTextLen); err != nil {
			return nil, err
		}
	}
	var out *parley.User
	err := s.write(ctx, "set status", func(ctx context.Context, tx *Tx) error {
		var expires sql.NullInt64
		if !clearing && st.ExpiresAt != nil {
			if !st.ExpiresAt.After(tx.now) {
				return parley.Errorf(parley.EINVALID, "status expires_at must be in the future")
			}
			expires = nullMicros(st.ExpiresAt)
		}
		emoji, text := st.Emoji, st.Text
		res, err := tx.ExecContext(ctx,
			`UPDATE users SET status_emoji = $1, status_text = $2, status_expires_at = $3, updated_at = $4 WHERE id = $5`,
			emoji, text, expires, micros(tx.now), actor)
		if err != nil {
			return fmt.Errorf("set status: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return parley.Errorf(parley.ENOTFOUND, "user not found")
		}
		u, err := loadUser(ctx, tx, actor, tx.now, true)
		if err != nil {
			return err
		}
		if err := tx.emitUserEvent(ctx, parley.EventUserStatus, u); err != nil {
			return err
		}
		out = u
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// emitUserEvent publishes a user event (UserEventData, email left out) once
// for each workspace the user belongs to: to the sessions that have the
// user in view (the profile topic), to the user's own sessions, and to the
// directory.
func (tx *Tx) emitUserEvent(ctx context.Context, typ string, u *parley.User) error {
	rows, err := tx.QueryContext(ctx, `SELECT workspace_id FROM workspace_members WHERE user_id = $1`, u.ID)
	if err != nil {
		return fmt.Errorf("user workspaces: %w", err)
	}
	var wss []string
	for rows.Next() {
		var ws string
		if err := rows.Scan(&ws); err != nil {
			rows.Close()
			return fmt.Errorf("user workspaces: %w", err)
		}
		wss = append(wss, ws)
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("user workspaces: %w", err)
	}
	public := *u
	public.Email = ""
	for _, ws := range wss {
		if err := tx.emit(ws, typ, parley.UserEventData{User: &public}, parley.TopicProfile(u.ID), parley.TopicUser(u.ID)); err != nil {
			return err
		}
	}
	return nil
}

// UsersBatch returns the users among ids who share a workspace with actor
// (actor themself always), in the order of ids, each once; the others are
// left out without an error.
func (s *Store) UsersBatch(ctx context.Context, actor string, ids []string) ([]parley.User, error) {
	if len(ids) > parley.MaxBatchUsers {
		return nil, parley.Errorf(parley.EINVALID, "at most %d user ids per batch", parley.MaxBatchUsers)
	}
	uniq := make([]string, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if id != "" && !seen[id] {
			seen[id] = true
			uniq = append(uniq, id)
		}
	}
	out := []parley.User{}
	if len(uniq) == 0 {
		return out, nil
	}
	args := make([]any, 0, len(uniq)+1)
	args = append(args, actor)
	for _, id := range uniq {
		args = append(args, id)
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+userColumns+` FROM users u
		WHERE u.id IN (`+inClause(2, len(uniq))+`)
		  AND (u.id = $1 OR EXISTS (
		    SELECT 1 FROM workspace_members a
		    JOIN workspace_members b ON b.workspace_id = a.workspace_id
		    WHERE a.user_id = $1 AND b.user_id = u.id))`, args...)
	if err != nil {
		return nil, fmt.Errorf("users batch: %w", err)
	}
	defer rows.Close()
	now := s.now()
	found := make(map[string]*parley.User, len(uniq))
	for rows.Next() {
		u, err := scanUser(rows, now)
		if err != nil {
			return nil, fmt.Errorf("users batch: %w", err)
		}
		found[u.ID] = u
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("users batch: %w", err)
	}
	for _, id := range uniq {
		if u, ok := found[id]; ok {
			out = append(out, *u)
		}
	}
	return out, nil
}

// ListWorkspaceUsers pages a workspace's directory by handle. q matches a
// case-insensitive prefix of the handle, of the name, or of any word of the
// name. Deactivated users are left out unless q.IncludeDeactivated, and
// then marked as such.
func (s *Store) ListWorkspaceUsers(ctx context.Context, actor, workspaceID string, q parley.UserQuery) (*parley.UserPage, error) {
	if _, err := workspaceRole(ctx, s.rdb, workspaceID, actor); err != nil {
		return nil, err
	}
	after, err := decodeCursor(q.Cursor)
	if err != nil {
		return nil, err
	}
	limit := parley.ClampLimit(q.Limit)
	args := []any{workspaceID, after}
	where := `wm.workspace_id = $1 AND u.handle > $2`
	if !q.IncludeDeactivated {
		where += ` AND u.deactivated_at IS NULL`
	}
	if term := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(q.Q), "@")); term != "" {
		p := escapeLike(term)
		args = append(args, p+"%", "% "+p+"%")
		where += ` AND (u.handle LIKE $3 ESCAPE '\' OR LOWER(u.name) LIKE $3 ESCAPE '\' OR LOWER(u.name) LIKE $4 ESCAPE '\')`
	}
	args = append(args, limit+1)
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+userColumns+`
		FROM workspace_members wm JOIN users u ON u.id = wm.user_id
		WHERE `+where+` ORDER BY u.handle LIMIT $`+fmt.Sprint(len(args)), args...)
	if err != nil {
		return nil, fmt.Errorf("list workspace users: %w", err)
	}
	defer rows.Close()
	now := s.now()
	page := &parley.UserPage{Users: []parley.User{}}
	for rows.Next() {
		u, err := scanUser(rows, now)
		if err != nil {
			return nil, fmt.Errorf("list workspace users: %w", err)
		}
		page.Users = append(page.Users, *u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list workspace users: %w", err)
	}
	if len(page.Users) > limit {
		page.Users = page.Users[:limit]
		page.NextCursor = encodeCursor(page.Users[limit-1].Handle)
	}
	return page, nil
}

// escapeLike escapes LIKE's wildcards (and the escape character) in s.
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
