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

// workspaceRole returns user's role in the workspace, or ENOTFOUND when they
// are not a member (a workspace one is not in is invisible).
func workspaceRole(ctx context.Context, q querier, workspaceID, userID string) (parley.Role, error) {
	var role string
	err := q.QueryRowContext(ctx,
		`SELECT role FROM workspace_members WHERE workspace_id = $1 AND user_id = $2`,
		workspaceID, userID).Scan(&role)
	if errors.Is(err, sql.ErrNoRows) {
		return "", parley.Errorf(parley.ENOTFOUND, "workspace not found")
	}
	if err != nil {
		return "", fmt.Errorf("workspace role: %w", err)
	}
	return parley.Role(role), nil
}

// channelAccess is a channel as seen by one user: the channel (with the
// user's membership filled in) and the user's workspace role.
type channelAccess struct {
	ch   *parley.Channel
	role parley.Role
}

// loadChannel returns the channel if actor may see it: actor is in its
// workspace, and for private channels and DMs a member of it. Guests see only
// the channels they are members of. Everything else is ENOTFOUND, so that
// nobody learns that a channel exists from an error.
func loadChannel(ctx context.Context, q querier, actor, channelID string) (*channelAccess, error) {
	row := q.QueryRowContext(ctx, `SELECT `+channelColumns+`, wm.role`+channelFrom+`
		LEFT JOIN workspace_members wm ON wm.workspace_id = c.workspace_id AND wm.user_id = $1
		WHERE c.id = $2`, actor, channelID)
	var role sql.NullString
	ch, err := scanChannel(scanFunc(func(dest ...any) error {
		return row.Scan(append(dest, &role)...)
	}))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, parley.Errorf(parley.ENOTFOUND, "channel not found")
	}
	if err != nil {
		return nil, fmt.Errorf("load channel: %w", err)
	}
	a := &channelAccess{ch: ch, role: parley.Role(role.String)}
	if !role.Valid || (!ch.IsMember && (ch.Kind != parley.KindPublic || a.role == parley.RoleGuest)) {
		return nil, parley.Errorf(parley.ENOTFOUND, "channel not found")
	}
	return a, nil
}

type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

// requireMember: actions such as posting need channel membership (403 for a
// workspace member who can see but has not joined a public channel).
func (a *channelAccess) requireMember() error {
	if !a.ch.IsMember {
		return parley.Errorf(parley.EFORBIDDEN, "you are not a member of this channel")
	}
	return nil
}

// requireActive: nothing is written into an archived channel.
func (a *channelAccess) requireActive() error {
	if a.ch.ArchivedAt != nil {
		return parley.Errorf(parley.ECONFLICT, "channel is archived")
	}
	return nil
}

// canManage: workspace admins and the channel's creator may rename,
// archive and remove members.
func (a *channelAccess) canManage(actor string) bool {
	return a.role.IsAdmin() || a.ch.CreatedBy == actor
}

// dmKey is the canonical key of a DM's participant set: sorted ids joined by
// commas. It makes opening the same DM twice find the same channel.
func dmKey(userIDs []string) string {
	ids := append([]string(nil), userIDs...)
	sort.Strings(ids)
	return strings.Join(ids, ",")
}

func splitDMKey(k string) []string { return strings.Split(k, ",") }
