package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"

	"parley"
)

// Account and workspace lifecycle (parley.LifecycleService,
// docs/lifecycle.md): deactivation, removal from a workspace, ownership
// transfer, and workspace deletion with its batched purge.

// DeactivateUser implements parley.LifecycleService.
func (s *Store) DeactivateUser(ctx context.Context, actor, workspaceID, userID string) (*parley.User, error) {
	return s.setDeactivated(ctx, "deactivate user", userID, true, func(ctx context.Context, tx *Tx) error {
		return checkAccountAdmin(ctx, tx, actor, workspaceID, userID, "deactivate")
	})
}

// ReactivateUser implements parley.LifecycleService.
func (s *Store) ReactivateUser(ctx context.Context, actor, workspaceID, userID string) (*parley.User, error) {
	return s.setDeactivated(ctx, "reactivate user", userID, false, func(ctx context.Context, tx *Tx) error {
		return checkAccountAdmin(ctx, tx, actor, workspaceID, userID, "reactivate")
	})
}

// OperatorSetDeactivated implements parley.LifecycleService.
func (s *Store) OperatorSetDeactivated(ctx context.Context, userID string, deactivated bool) (*parley.User, error) {
	return s.setDeactivated(ctx, "operator deactivate user", userID, deactivated, func(ctx context.Context, tx *Tx) error {
		if !deactivated {
			return nil
		}
		roles, err := userWorkspaceRoles(ctx, tx, userID)
		if err != nil {
			return err
		}
		for _, r := range roles {
			if r == parley.RoleOwner {
				return parley.Errorf(parley.EFORBIDDEN, "a workspace owner cannot be deactivated; transfer the ownership first")
			}
		}
		return nil
	})
}

// userWorkspaceRoles maps each workspace of userID to their role there.
func userWorkspaceRoles(ctx context.Context, q querier, userID string) (map[string]parley.Role, error) {
	rows, err := q.QueryContext(ctx, `SELECT workspace_id, role FROM workspace_members WHERE user_id = $1`, userID)
	if err != nil {
		return nil, fmt.Errorf("user workspaces: %w", err)
	}
	defer rows.Close()
	out := map[string]parley.Role{}
	for rows.Next() {
		var ws, role string
		if err := rows.Scan(&ws, &role); err != nil {
			return nil, fmt.Errorf("user workspaces: %w", err)
		}
		out[ws] = parley.Role(role)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("user workspaces: %w", err)
	}
	return out, nil
}

// checkAccountAdmin: actor administers workspaceID, userID is in it, and
// actor outranks userID in every workspace userID belongs to (an account
// is the server's, not one workspace's: an admin of one workspace must not
// lock someone out of another).
func checkAccountAdmin(ctx context.Context, tx *Tx, actor, workspaceID, userID, verb string) error {
	mine, err := workspaceRole(ctx, tx, workspaceID, actor)
	if err != nil {
		return err
	}
	if !mine.IsAdmin() {
		return parley.Errorf(parley.EFORBIDDEN, "only workspace admins may %s people", verb)
	}
	if actor == userID {
		return parley.Errorf(parley.EINVALID, "you cannot %s your own account", verb)
	}
	theirs, err := userWorkspaceRoles(ctx, tx, userID)
	if err != nil {
		return err
	}
	if _, ok := theirs[workspaceID]; !ok {
		return parley.Errorf(parley.ENOTFOUND, "user is not a member of this workspace")
	}
	actorRoles, err := userWorkspaceRoles(ctx, tx, actor)
	if err != nil {
		return err
	}
	for ws, role := range theirs {
		if role == parley.RoleOwner {
			return parley.Errorf(parley.EFORBIDDEN, "a workspace owner cannot be deactivated; transfer the ownership first")
		}
		if !actorRoles[ws].Outranks(role) {
			if ws == workspaceID {
				return parley.Errorf(parley.EFORBIDDEN, "only the owner may %s an admin", verb)
			}
			return parley.Errorf(parley.EFORBIDDEN,
				"the account is also in a workspace you do not administer; ask the server operator")
		}
	}
	return nil
}

// setDeactivated sets or clears users.deactivated_at after check passes.
// Deactivation revokes every session of the user and sends
// user.deactivated (each workspace of the user: the profile topic, the
// user's own topic, the directory); reactivation sends user.updated.
func (s *Store) setDeactivated(ctx context.Context, op, userID string, deactivated bool,
	check func(ctx context.Context, tx *Tx) error) (*parley.User, error) {
	var out *parley.User
	err := s.write(ctx, op, func(ctx context.Context, tx *Tx) error {
		if err := check(ctx, tx); err != nil {
			return err
		}
		u, err := loadUser(ctx, tx, userID, tx.now, false)
		if err != nil {
			return err
		}
		if u.Deactivated == deactivated {
			out = u
			return nil
		}
		at := sql.NullInt64{}
		if deactivated {
			at = sql.NullInt64{Int64: micros(tx.now), Valid: true}
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE users SET deactivated_at = $1, updated_at = $2 WHERE id = $3`,
			at, micros(tx.now), userID); err != nil {
			return fmt.Errorf("set deactivated: %w", err)
		}
		u.Deactivated, u.UpdatedAt = deactivated, tx.now
		typ := parley.EventUserUpdated
		if deactivated {
			typ = parley.EventUserDeactivated
			if _, err := tx.ExecContext(ctx,
				`UPDATE sessions SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL`,
				micros(tx.now), userID); err != nil {
				return fmt.Errorf("revoke sessions: %w", err)
			}
		}
		if err := tx.emitUserEvent(ctx, typ, u); err != nil {
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

// RemoveWorkspaceMember implements parley.LifecycleService.
func (s *Store) RemoveWorkspaceMember(ctx context.Context, actor, workspaceID, userID string) error {
	return s.write(ctx, "remove workspace member", func(ctx context.Context, tx *Tx) error {
		mine, err := workspaceRole(ctx, tx, workspaceID, actor)
		if err != nil {
			return err
		}
		if !mine.IsAdmin() {
			return parley.Errorf(parley.EFORBIDDEN, "only workspace admins may remove members")
		}
		if actor == userID {
			return parley.Errorf(parley.EINVALID, "you cannot remove yourself")
		}
		theirs, err := workspaceRole(ctx, tx, workspaceID, userID)
		if parley.ErrorCode(err) == parley.ENOTFOUND {
			return parley.Errorf(parley.ENOTFOUND, "user is not a member of this workspace")
		}
		if err != nil {
			return err
		}
		if !mine.Outranks(theirs) {
			if theirs == parley.RoleOwner {
				return parley.Errorf(parley.EFORBIDDEN, "the owner cannot be removed; transfer the ownership first")
			}
			return parley.Errorf(parley.EFORBIDDEN, "only the owner may remove an admin")
		}
		// Every channel but one-to-one DMs, which stay as they are for the
		// other side (nobody can read them through this account any more:
		// every read checks the workspace membership).
		rows, err := tx.QueryContext(ctx, `SELECT cm.channel_id FROM channel_members cm
			JOIN channels c ON c.workspace_id = cm.workspace_id AND c.id = cm.channel_id
			WHERE cm.workspace_id = $1 AND cm.user_id = $2 AND c.kind <> $3
			ORDER BY cm.channel_id`, workspaceID, userID, string(parley.KindDM))
		if err != nil {
			return fmt.Errorf("member channels: %w", err)
		}
		var chans []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return fmt.Errorf("member channels: %w", err)
			}
			chans = append(chans, id)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("member channels: %w", err)
		}
		for _, id := range chans {
			a, err := loadChannel(ctx, tx, userID, id)
			if err != nil {
				return err
			}
			if _, err := tx.removeMember(ctx, a.ch, userID, actor); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx,
			`DELETE FROM workspace_members WHERE workspace_id = $1 AND user_id = $2`, workspaceID, userID); err != nil {
			return fmt.Errorf("delete workspace member: %w", err)
		}
		// After the member.left events on the same user topic: a session
		// leaves the channels, then its gateway closes it.
		return tx.emit(workspaceID, parley.EventWorkspaceMemberLeft, parley.WorkspaceMemberData{
			WorkspaceID: workspaceID, UserID: userID, Role: theirs,
		}, parley.TopicAdmins(workspaceID), parley.TopicUser(userID))
	})
}

// TransferOwnership implements parley.LifecycleService.
func (s *Store) TransferOwnership(ctx context.Context, actor, workspaceID, userID string) error {
	return s.write(ctx, "transfer ownership", func(ctx context.Context, tx *Tx) error {
		mine, err := workspaceRole(ctx, tx, workspaceID, actor)
		if err != nil {
			return err
		}
		if mine != parley.RoleOwner {
			return parley.Errorf(parley.EFORBIDDEN, "only the owner may transfer the ownership")
		}
		if actor == userID {
			return parley.Errorf(parley.EINVALID, "you already own this workspace")
		}
		theirs, err := workspaceRole(ctx, tx, workspaceID, userID)
		if parley.ErrorCode(err) == parley.ENOTFOUND {
			return parley.Errorf(parley.ENOTFOUND, "user is not a member of this workspace")
		}
		if err != nil {
			return err
		}
		if theirs == parley.RoleGuest {
			return parley.Errorf(parley.EINVALID, "a guest cannot own a workspace; make them a member first")
		}
		u, err := loadUser(ctx, tx, userID, tx.now, false)
		if err != nil {
			return err
		}
		if u.Deactivated {
			return parley.Errorf(parley.EINVALID, "a deactivated account cannot own a workspace")
		}
		for _, c := range []struct {
			user string
			role parley.Role
		}{{actor, parley.RoleAdmin}, {userID, parley.RoleOwner}} {
			if _, err := tx.ExecContext(ctx,
				`UPDATE workspace_members SET role = $1 WHERE workspace_id = $2 AND user_id = $3`,
				string(c.role), workspaceID, c.user); err != nil {
				return fmt.Errorf("transfer ownership: %w", err)
			}
			if err := tx.emit(workspaceID, parley.EventWorkspaceMemberUpdated, parley.WorkspaceMemberData{
				WorkspaceID: workspaceID, UserID: c.user, Role: c.role,
			}, parley.TopicUser(c.user)); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteWorkspace implements parley.LifecycleService.
func (s *Store) DeleteWorkspace(ctx context.Context, actor, workspaceID, confirm string) error {
	return s.write(ctx, "delete workspace", func(ctx context.Context, tx *Tx) error {
		w, err := loadWorkspace(ctx, tx, actor, workspaceID)
		if err != nil {
			return err
		}
		if w.Role != parley.RoleOwner {
			return parley.Errorf(parley.EFORBIDDEN, "only the owner may delete the workspace")
		}
		if confirm != w.Slug {
			return parley.Errorf(parley.EINVALID, "confirm must be the workspace's slug, %q", w.Slug)
		}
		rows, err := tx.QueryContext(ctx, `SELECT user_id FROM workspace_members WHERE workspace_id = $1`, workspaceID)
		if err != nil {
			return fmt.Errorf("workspace members: %w", err)
		}
		var topics []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return fmt.Errorf("workspace members: %w", err)
			}
			topics = append(topics, parley.TopicUser(id))
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("workspace members: %w", err)
		}
		// The slug is freed at once: it is unique, and a team deleting a
		// workspace may well want the name back.
		if _, err := tx.ExecContext(ctx,
			`UPDATE workspaces SET deleted_at = $1, updated_at = $1, slug = $2 WHERE id = $3`,
			micros(tx.now), "deleted~"+workspaceID, workspaceID); err != nil {
			return fmt.Errorf("mark workspace deleted: %w", err)
		}
		for _, q := range []string{
			`DELETE FROM workspace_members WHERE workspace_id = $1`,
			`DELETE FROM invites WHERE workspace_id = $1`,
		} {
			if _, err := tx.ExecContext(ctx, q, workspaceID); err != nil {
				return fmt.Errorf("delete workspace: %w", err)
			}
		}
		return tx.emit(workspaceID, parley.EventWorkspaceDeleted,
			parley.WorkspaceDeletedData{WorkspaceID: workspaceID}, topics...)
	})
}

// DeletedWorkspaces implements parley.LifecycleService.
func (s *Store) DeletedWorkspaces(ctx context.Context) ([]string, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT id FROM workspaces WHERE deleted_at IS NOT NULL ORDER BY deleted_at`)
	if err != nil {
		return nil, fmt.Errorf("deleted workspaces: %w", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("deleted workspaces: %w", err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// workspaceTables lists the tables with a workspace_id column, by name:
// every row a workspace owns, including the tables of features added after
// this code (files, integrations) as long as they follow the rule that
// workspace rows carry workspace_id.
func (s *Store) workspaceTables(ctx context.Context) ([]string, error) {
	q := `SELECT m.name FROM sqlite_master m JOIN pragma_table_info(m.name) p
		WHERE m.type = 'table' AND p.name = 'workspace_id'`
	if s.dialect == Postgres {
		q = `SELECT c.table_name FROM information_schema.columns c
			JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
			WHERE c.column_name = 'workspace_id' AND c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'`
	}
	rows, err := s.rdb.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("workspace tables: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("workspace tables: %w", err)
		}
		out = append(out, name)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("workspace tables: %w", err)
	}
	sort.Strings(out)
	return out, nil
}

// isForeignKeyViolation: a row still referenced by another table's row.
func isForeignKeyViolation(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "FOREIGN KEY constraint failed") || strings.Contains(msg, "SQLSTATE 23503")
}

// PurgeWorkspace implements parley.LifecycleService: one call deletes at
// most batch rows of one table, in its own short transaction, so that a
// big workspace never holds the (SQLite: only) writer for long; the caller
// loops. A table whose rows are still referenced from another (a foreign
// key of a newer feature's table) is passed over until the referencing
// rows are gone.
func (s *Store) PurgeWorkspace(ctx context.Context, workspaceID string, batch int) (bool, error) {
	if batch <= 0 {
		batch = 1000
	}
	var deletedAt sql.NullInt64
	var orgID string
	err := s.rdb.QueryRowContext(ctx, `SELECT deleted_at, org_id FROM workspaces WHERE id = $1`, workspaceID).
		Scan(&deletedAt, &orgID)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil // purged already
	}
	if err != nil {
		return false, fmt.Errorf("purge workspace: %w", err)
	}
	if !deletedAt.Valid {
		return false, parley.Errorf(parley.ECONFLICT, "workspace is not deleted")
	}
	tables, err := s.workspaceTables(ctx)
	if err != nil {
		return false, err
	}
	key := "rowid"
	if s.dialect == Postgres {
		key = "ctid"
	}
	var blocked error
	for _, t := range tables {
		var n int64
		err := s.write(ctx, "purge workspace", func(ctx context.Context, tx *Tx) error {
			res, err := tx.ExecContext(ctx, `DELETE FROM `+t+` WHERE `+key+` IN (SELECT `+key+` FROM `+t+
				` WHERE workspace_id = $1 LIMIT $2)`, workspaceID, batch)
			if err != nil {
				return err
			}
			n, _ = res.RowsAffected()
			return nil
		})
		if err != nil {
			if isForeignKeyViolation(err) {
				blocked = err
				continue
			}
			return false, fmt.Errorf("purge %s: %w", t, err)
		}
		if n > 0 {
			return false, nil
		}
	}
	if blocked != nil {
		return false, fmt.Errorf("purge workspace: every table left is referenced: %w", blocked)
	}
	err = s.write(ctx, "purge workspace", func(ctx context.Context, tx *Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM workspaces WHERE id = $1 AND deleted_at IS NOT NULL`, workspaceID); err != nil {
			return fmt.Errorf("delete workspace row: %w", err)
		}
		if _, err := tx.ExecContext(ctx,
			`DELETE FROM orgs WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM workspaces WHERE org_id = $1)`, orgID); err != nil {
			return fmt.Errorf("delete org: %w", err)
		}
		return nil
	})
	return err == nil, err
}
