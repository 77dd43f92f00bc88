package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"parley"
)

// Workspaces and their memberships. Invites are in invites.go.

// generalChannel is the public channel every workspace starts with and every
// newcomer joins.
const generalChannel = "general"

// workspaceColumns and scanWorkspace read a parley.Workspace (without the
// caller's role). Use with "FROM workspaces w".
const workspaceColumns = `w.id, w.org_id, w.name, w.slug, w.created_at`

func scanWorkspace(sc scanner) (*parley.Workspace, error) {
	var w parley.Workspace
	var created int64
	if err := sc.Scan(&w.ID, &w.OrgID, &w.Name, &w.Slug, &created); err != nil {
		return nil, err
	}
	w.CreatedAt = fromMicros(created)
	return &w, nil
}

// loadWorkspace reads a workspace with actor's role in it; non-members get
// ENOTFOUND, as for a workspace that does not exist.
func loadWorkspace(ctx context.Context, q querier, actor, workspaceID string) (*parley.Workspace, error) {
	row := q.QueryRowContext(ctx, `SELECT `+workspaceColumns+`, wm.role FROM workspaces w
		JOIN workspace_members wm ON wm.workspace_id = w.id AND wm.user_id = $1
		WHERE w.id = $2`, actor, workspaceID)
	var role string
	w, err := scanWorkspace(scanFunc(func(dest ...any) error {
		return row.Scan(append(dest, &role)...)
	}))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, parley.Errorf(parley.ENOTFOUND, "workspace not found")
	}
	if err != nil {
		return nil, fmt.Errorf("load workspace: %w", err)
	}
	w.Role = parley.Role(role)
	return w, nil
}

// activeUser loads actor for a write and refuses deactivated accounts.
func activeUser(ctx context.Context, tx *Tx, actor string) (*parley.User, error) {
	u, err := loadUser(ctx, tx, actor, tx.now, false)
	if err != nil {
		return nil, err
	}
	if u.Deactivated {
		return nil, parley.Errorf(parley.EFORBIDDEN, "account is deactivated")
	}
	return u, nil
}

// CreateWorkspace creates an org and its workspace, makes actor the owner,
// and opens #general with actor in it.
func (s *Store) CreateWorkspace(ctx context.Context, actor, name, slug string) (*parley.Workspace, error) {
	return s.CreateWorkspaceWithID(ctx, parley.NewID(parley.PrefixWorkspace), actor, name, slug)
}

// CreateWorkspaceWithID is CreateWorkspace with the workspace's id chosen
// by the caller: store routing (package shardstore) places the id in the
// tenant directory before it creates the workspace on the shard chosen.
func (s *Store) CreateWorkspaceWithID(ctx context.Context, id, actor, name, slug string) (*parley.Workspace, error) {
	if err := parley.ValidateName("name", name); err != nil {
		return nil, err
	}
	if err := parley.ValidateSlug(slug); err != nil {
		return nil, err
	}
	var out *parley.Workspace
	err := s.write(ctx, "create workspace", func(ctx context.Context, tx *Tx) error {
		// First, so that HasWorkspace waits for this transaction's end.
		if err := s.creationFence(ctx, tx, id); err != nil {
			return err
		}
		u, err := activeUser(ctx, tx, actor)
		if err != nil {
			return err
		}
		var one int
		err = tx.QueryRowContext(ctx, `SELECT 1 FROM workspaces WHERE slug = $1`, slug).Scan(&one)
		if err == nil {
			return parley.Errorf(parley.ECONFLICT, "slug %q is taken", slug)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("check slug: %w", err)
		}
		now := tx.now
		w := &parley.Workspace{
			ID:        id,
			OrgID:     parley.NewID(parley.PrefixOrg),
			Name:      name,
			Slug:      slug,
			CreatedAt: now,
			Role:      parley.RoleOwner,
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO orgs (id, name, created_at) VALUES ($1, $2, $3)`,
			w.OrgID, name, micros(now)); err != nil {
			return fmt.Errorf("insert org: %w", err)
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO workspaces (id, org_id, name, slug, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5)`,
			w.ID, w.OrgID, name, slug, micros(now)); err != nil {
			if isUniqueViolation(err) {
				return parley.Errorf(parley.ECONFLICT, "slug %q is taken", slug)
			}
			return fmt.Errorf("insert workspace: %w", err)
		}
		if err := tx.joinWorkspace(ctx, w.ID, u, parley.RoleOwner); err != nil {
			return err
		}
		if _, err := tx.createChannel(ctx, newChannel{
			workspaceID: w.ID,
			name:        generalChannel,
			kind:        parley.KindPublic,
			creator:     actor,
			members:     []string{actor},
		}); err != nil {
			return err
		}
		out = w
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// joinWorkspace inserts u's membership and emits workspace.member_joined.
func (tx *Tx) joinWorkspace(ctx context.Context, workspaceID string, u *parley.User, role parley.Role) error {
	if err := tx.insertWorkspaceMember(ctx, workspaceID, u.ID, role); err != nil {
		return err
	}
	return tx.emitWorkspaceJoin(workspaceID, u, role, nil)
}

func (tx *Tx) insertWorkspaceMember(ctx context.Context, workspaceID, userID string, role parley.Role) error {
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO workspace_members (workspace_id, user_id, role, joined_at) VALUES ($1, $2, $3, $4)`,
		workspaceID, userID, string(role), micros(tx.now)); err != nil {
		return fmt.Errorf("insert workspace member: %w", err)
	}
	return nil
}

// emitWorkspaceJoin emits workspace.member_joined to the workspace's admins
// (and the directory), with the channels u joined along with it.
func (tx *Tx) emitWorkspaceJoin(workspaceID string, u *parley.User, role parley.Role, joined []parley.JoinedChannel) error {
	public := *u
	public.Email = ""
	return tx.emit(workspaceID, parley.EventWorkspaceMemberJoined, parley.WorkspaceMemberData{
		WorkspaceID: workspaceID, UserID: u.ID, Role: role, User: &public, Channels: joined,
	}, parley.TopicAdmins(workspaceID))
}

// GetWorkspace returns a workspace of the caller's, with their role.
func (s *Store) GetWorkspace(ctx context.Context, actor, workspaceID string) (*parley.Workspace, error) {
	return loadWorkspace(ctx, s.rdb, actor, workspaceID)
}

// ListWorkspaces returns the caller's workspaces with their roles, by name.
func (s *Store) ListWorkspaces(ctx context.Context, actor string) ([]parley.Workspace, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+workspaceColumns+`, wm.role FROM workspaces w
		JOIN workspace_members wm ON wm.workspace_id = w.id AND wm.user_id = $1
		ORDER BY w.name, w.id`, actor)
	if err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	defer rows.Close()
	out := []parley.Workspace{}
	for rows.Next() {
		var role string
		w, err := scanWorkspace(scanFunc(func(dest ...any) error {
			return rows.Scan(append(dest, &role)...)
		}))
		if err != nil {
			return nil, fmt.Errorf("list workspaces: %w", err)
		}
		w.Role = parley.Role(role)
		out = append(out, *w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	return out, nil
}

// SetMemberRole lets admins make a member an admin, member or guest. Nobody
// becomes owner this way and the owner's role stays. Clients get no event
// (the contract has none for role changes yet); the servers' query caches
// get workspace.member_updated on the directory topic.
func (s *Store) SetMemberRole(ctx context.Context, actor, workspaceID, userID string, role parley.Role) error {
	return s.write(ctx, "set member role", func(ctx context.Context, tx *Tx) error {
		mine, err := workspaceRole(ctx, tx, workspaceID, actor)
		if err != nil {
			return err
		}
		if !mine.IsAdmin() {
			return parley.Errorf(parley.EFORBIDDEN, "only workspace admins may change roles")
		}
		switch role {
		case parley.RoleAdmin, parley.RoleMember, parley.RoleGuest:
		default:
			return parley.Errorf(parley.EINVALID, "role must be admin, member or guest")
		}
		theirs, err := workspaceRole(ctx, tx, workspaceID, userID)
		if parley.ErrorCode(err) == parley.ENOTFOUND {
			return parley.Errorf(parley.ENOTFOUND, "user is not a member of this workspace")
		}
		if err != nil {
			return err
		}
		if theirs == parley.RoleOwner {
			return parley.Errorf(parley.EFORBIDDEN, "the owner's role cannot be changed")
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE workspace_members SET role = $1 WHERE workspace_id = $2 AND user_id = $3`,
			string(role), workspaceID, userID); err != nil {
			return fmt.Errorf("set member role: %w", err)
		}
		// On the user's own topic too: their sessions' gateways start or
		// stop following the admins' topic.
		return tx.emit(workspaceID, parley.EventWorkspaceMemberUpdated, parley.WorkspaceMemberData{
			WorkspaceID: workspaceID, UserID: userID, Role: role,
		}, parley.TopicUser(userID))
	})
}
