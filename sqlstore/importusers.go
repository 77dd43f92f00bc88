package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"parley"
)

// Imported users (importer.go): matched by email or created unable to log
// in, and claimed by signing up with their email (users.go's CreateUser).

// ImportUsers maps each user to an account: the one an earlier run
// mapped, else an existing account with the same email, else a new one
// that cannot log in (deactivated, no password) until claimed by signing
// up with its email (claimImported). Each becomes a workspace member.
func (s *Store) ImportUsers(ctx context.Context, workspaceID, source string, users []parley.ImportUser) ([]parley.ImportedUser, error) {
	out := make([]parley.ImportedUser, 0, len(users))
	caps := s.capsFor(ctx, workspaceID)
	for chunk := range slices.Chunk(users, 500) {
		var done []parley.ImportedUser
		err := s.write(ctx, "import users", func(ctx context.Context, tx *Tx) error {
			done = done[:0]
			for _, u := range chunk {
				r, err := tx.importUser(ctx, workspaceID, source, u)
				if err != nil {
					return err
				}
				done = append(done, r)
			}
			// Once per chunk, after its memberships: the chunk is undone
			// whole when it would pass the workspace's member cap.
			return checkWorkspaceMemberCap(ctx, tx, caps, workspaceID)
		})
		if err != nil {
			return nil, err
		}
		out = append(out, done...)
	}
	return out, nil
}

func (tx *Tx) importUser(ctx context.Context, workspaceID, source string, u parley.ImportUser) (parley.ImportedUser, error) {
	r, err := tx.mapUser(ctx, workspaceID, source, u)
	if err == nil {
		err = tx.QueryRowContext(ctx, `SELECT handle FROM users WHERE id = $1`, r.UserID).Scan(&r.Handle)
	}
	if err != nil {
		return r, fmt.Errorf("import user %s: %w", u.ExtID, err)
	}
	return r, nil
}

func (tx *Tx) mapUser(ctx context.Context, workspaceID, source string, u parley.ImportUser) (parley.ImportedUser, error) {
	r := parley.ImportedUser{ExtID: u.ExtID}
	if u.ExtID == "" {
		return r, parley.Errorf(parley.EINVALID, "imported user without an id")
	}
	id, err := mapped(ctx, tx, workspaceID, source, "user", u.ExtID)
	if err != nil {
		return r, err
	}
	role := parley.RoleMember
	if u.Admin {
		role = parley.RoleAdmin
	}
	if id != "" {
		r.UserID, r.Mapped = id, true
		return r, tx.importMember(ctx, workspaceID, id, role)
	}
	if r.UserID, _, r.Created, err = tx.importAccount(ctx, workspaceID, source, u); err != nil {
		return r, err
	}
	r.Matched = !r.Created
	if err := tx.mapImported(ctx, workspaceID, source, "user", u.ExtID, r.UserID); err != nil {
		return r, err
	}
	return r, tx.importMember(ctx, workspaceID, r.UserID, role)
}

// importAccount returns the account of an imported user not mapped yet:
// an existing one with the same email, else one it creates unable to log
// in, with the email it has (the source's, or one unique to the source
// account when it has none).
func (tx *Tx) importAccount(ctx context.Context, workspaceID, source string, u parley.ImportUser) (id, email string, created bool, err error) {
	email, err = parley.NormalizeEmail(u.Email)
	if u.Email != "" && err == nil {
		err = tx.QueryRowContext(ctx, `SELECT id FROM users WHERE email = $1`, email).Scan(&id)
		switch {
		case err == nil:
			return id, email, false, nil
		case !errors.Is(err, sql.ErrNoRows):
			return "", "", false, fmt.Errorf("match user by email: %w", err)
		}
	} else {
		// No usable email: one no person can sign up with, unique to
		// this source account.
		email = strings.ToLower(fmt.Sprintf("%s-%s.%s@import.invalid", source, safeLocal(u.ExtID), workspaceID))
		err = tx.QueryRowContext(ctx, `SELECT id FROM users WHERE email = $1`, email).Scan(&id)
		switch {
		case err == nil:
			return id, email, false, nil // an earlier run's, not mapped where it ran
		case !errors.Is(err, sql.ErrNoRows):
			return "", "", false, fmt.Errorf("match user by email: %w", err)
		}
	}
	if id, err = tx.createImportedUser(ctx, workspaceID, source, u, email); err != nil {
		return "", "", false, err
	}
	return id, email, true, nil
}

// ImportAccount is the account ImportAccounts found or made for an
// imported user.
type ImportAccount struct {
	UserID  string
	Email   string // the account's: ImportUsers on a shard holding its copy matches it by this
	Created bool
}

// ImportAccounts finds or creates the account of each user, as
// ImportUsers does for those it has not mapped, without mapping them or
// making them members: the control database's part of an import routed
// over shards (shardstore), where accounts live apart from the workspace.
func (s *Store) ImportAccounts(ctx context.Context, workspaceID, source string, users []parley.ImportUser) ([]ImportAccount, error) {
	out := make([]ImportAccount, 0, len(users))
	for chunk := range slices.Chunk(users, 500) {
		var done []ImportAccount
		err := s.write(ctx, "import accounts", func(ctx context.Context, tx *Tx) error {
			done = done[:0]
			for _, u := range chunk {
				if u.ExtID == "" {
					return parley.Errorf(parley.EINVALID, "imported user without an id")
				}
				id, email, created, err := tx.importAccount(ctx, workspaceID, source, u)
				if err != nil {
					return fmt.Errorf("import account %s: %w", u.ExtID, err)
				}
				done = append(done, ImportAccount{UserID: id, Email: email, Created: created})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		out = append(out, done...)
	}
	return out, nil
}

// ImportedUserIDs returns the accounts earlier runs mapped those of
// extIDs to in the workspace (import_map), by ext id.
func (s *Store) ImportedUserIDs(ctx context.Context, workspaceID, source string, extIDs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, ext := range extIDs {
		id, err := mapped(ctx, s.rdb, workspaceID, source, "user", ext)
		if err != nil {
			return nil, err
		}
		if id != "" {
			out[ext] = id
		}
	}
	return out, nil
}

// safeLocal keeps the characters of s that may stand in an email's local part.
func safeLocal(s string) string {
	return strings.Map(func(r rune) rune {
		if r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return r
		}
		return '_'
	}, s)
}

func (tx *Tx) importMember(ctx context.Context, workspaceID, userID string, role parley.Role) error {
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO workspace_members (workspace_id, user_id, role, joined_at) VALUES ($1, $2, $3, $4)
		 ON CONFLICT DO NOTHING`, workspaceID, userID, string(role), micros(tx.now)); err != nil {
		return fmt.Errorf("import workspace member: %w", err)
	}
	return nil
}

// createImportedUser inserts an account that cannot log in: no password
// and deactivated, until claimed. Its handle is the wanted one, or that
// with a number when taken.
func (tx *Tx) createImportedUser(ctx context.Context, workspaceID, source string, u parley.ImportUser, email string) (string, error) {
	handle, err := tx.freeHandle(ctx, u.Handle)
	if err != nil {
		return "", err
	}
	name := strings.TrimSpace(u.Name)
	if parley.ValidateName("name", name) != nil {
		name = handle
	}
	title := u.Title
	if parley.ValidateText("title", title, parley.MaxTitleLen) != nil {
		title = ""
	}
	id := parley.NewID(parley.PrefixUser)
	now := micros(tx.now)
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO users (id, email, handle, name, title, password_hash, deactivated_at, created_at, updated_at)
		 VALUES ($1, $2, $3, $4, $5, '', $6, $6, $6)`, id, email, handle, name, title, now); err != nil {
		return "", fmt.Errorf("create imported user %s: %w", u.ExtID, err)
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO import_accounts (user_id, workspace_id, source, ext_id, created_at) VALUES ($1, $2, $3, $4, $5)`,
		id, workspaceID, source, u.ExtID, now); err != nil {
		return "", fmt.Errorf("record imported account: %w", err)
	}
	return id, nil
}

// freeHandle returns want (made a valid handle) or, when taken, want-2,
// want-3, …
func (tx *Tx) freeHandle(ctx context.Context, want string) (string, error) {
	base := handleFrom(want)
	for i := 1; i < 10_000; i++ {
		h := base
		if i > 1 {
			suffix := "-" + strconv.Itoa(i)
			h = base[:min(len(base), 32-len(suffix))] + suffix
		}
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM users WHERE handle = $1`, h).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return h, nil
		}
		if err != nil {
			return "", fmt.Errorf("find a free handle: %w", err)
		}
	}
	return "", parley.Errorf(parley.ECONFLICT, "no free handle like %q", base)
}

// handleFrom turns any name into a valid handle: lower case, other
// characters as '-', 2 to 32 characters.
func handleFrom(s string) string {
	h := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, s)
	h = strings.Trim(h, "-")
	if len(h) > 32 {
		h = h[:32]
	}
	for len(h) < 2 {
		h += "user"[:min(4, 32-len(h))]
	}
	return h
}

// claimImported lets a signup take over an account an import created for
// that email: it gets the password, name and handle of the signup (the
// handle only if free), loses its deactivation and keeps its history. It
// returns nil when there is no unclaimed imported account with the email.
func (tx *Tx) claimImported(ctx context.Context, email string, nu parley.NewUser) (*parley.User, error) {
	var id string
	err := tx.QueryRowContext(ctx, `SELECT u.id FROM users u
		JOIN import_accounts ia ON ia.user_id = u.id AND ia.claimed_at IS NULL
		WHERE u.email = $1`, email).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find imported account: %w", err)
	}
	var other string
	err = tx.QueryRowContext(ctx, `SELECT id FROM users WHERE handle = $1 AND id <> $2`, nu.Handle, id).Scan(&other)
	if err == nil {
		return nil, parley.Errorf(parley.ECONFLICT, "handle %q is already taken", nu.Handle)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("check handle: %w", err)
	}
	now := micros(tx.now)
	if _, err := tx.ExecContext(ctx,
		`UPDATE users SET handle = $1, name = $2, password_hash = $3, deactivated_at = NULL, updated_at = $4 WHERE id = $5`,
		nu.Handle, nu.Name, nu.PasswordHash, now, id); err != nil {
		return nil, fmt.Errorf("claim imported account: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE import_accounts SET claimed_at = $1 WHERE user_id = $2`, now, id); err != nil {
		return nil, fmt.Errorf("claim imported account: %w", err)
	}
	u, err := loadUser(ctx, tx, id, tx.now, true)
	if err != nil {
		return nil, err
	}
	// The servers' caches and the people who see this user learn that
	// the account is active and renamed.
	if err := tx.emitUserEvent(ctx, parley.EventUserUpdated, u); err != nil {
		return nil, err
	}
	return u, nil
}
