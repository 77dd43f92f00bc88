package parley

import "context"

// Account and workspace lifecycle: deactivating people, removing them from
// a workspace, handing a workspace to another owner, deleting it.
// docs/lifecycle.md says who may do what.

// LifecycleService changes who is in a workspace and whether accounts and
// workspaces exist at all.
type LifecycleService interface {
	// DeactivateUser deactivates userID, as actor, an admin of workspaceID
	// the user is a member of. An account in several workspaces may be
	// deactivated only by someone who administers every one of them (else
	// EFORBIDDEN: the server operator's OperatorSetDeactivated is for
	// that). Owners are never deactivated (transfer first), admins only by
	// the owner, nobody by themself. Every session and token of the user is
	// revoked and user.deactivated goes out (the gateways close the user's
	// sockets with CloseAccountDeactivated). Deactivating again is a no-op.
	DeactivateUser(ctx context.Context, actor, workspaceID, userID string) (*User, error)
	// ReactivateUser undoes DeactivateUser, with the same rules; the user
	// logs in again. Reactivating an active user is a no-op.
	ReactivateUser(ctx context.Context, actor, workspaceID, userID string) (*User, error)
	// OperatorSetDeactivated is DeactivateUser or ReactivateUser for the
	// server operator (the admin listener): no caller, no role checks,
	// except that a workspace owner is never deactivated.
	OperatorSetDeactivated(ctx context.Context, userID string, deactivated bool) (*User, error)
	// RemoveWorkspaceMember takes userID out of the workspace and out of
	// every channel of it (member.left each, to the channel and the
	// user's own sessions), then sends workspace.member_left (the
	// gateways close the user's sessions of that workspace with
	// CloseWorkspaceGone). Admins may remove members and guests; only the
	// owner may remove an admin; the owner cannot be removed. Removing
	// someone who is not a member is ENOTFOUND.
	RemoveWorkspaceMember(ctx context.Context, actor, workspaceID, userID string) error
	// TransferOwnership makes userID (an active member or admin, not a
	// guest) the owner and the current owner, actor, an admin. There is
	// always exactly one owner.
	TransferOwnership(ctx context.Context, actor, workspaceID, userID string) error
	// DeleteWorkspace (owner only; confirm must be the workspace's slug)
	// makes the workspace disappear at once: its memberships and invites
	// go, its slug is freed, workspace.deleted closes its sessions on
	// every node. Its other rows stay until PurgeWorkspace removes them.
	DeleteWorkspace(ctx context.Context, actor, workspaceID, confirm string) error
	// DeletedWorkspaces lists the workspaces deleted but not yet purged
	// (a node resumes their purge after a restart).
	DeletedWorkspaces(ctx context.Context) ([]string, error)
	// PurgeWorkspace removes at most batch rows of one table of a deleted
	// workspace per transaction and reports whether nothing is left (the
	// workspace row itself goes last). It refuses a live workspace.
	PurgeWorkspace(ctx context.Context, workspaceID string, batch int) (done bool, err error)
}

// WorkspaceFileRemover deletes a workspace's stored files (the blobs, not
// only their rows). Workspace deletion calls it after DeleteWorkspace and
// before PurgeWorkspace removes the rows that name the files; nil: the
// server stores no files.
type WorkspaceFileRemover interface {
	RemoveWorkspaceFiles(ctx context.Context, workspaceID string) error
}

// WorkspaceDeletedData is the payload of workspace.deleted.
type WorkspaceDeletedData struct {
	WorkspaceID string `json:"workspace_id"`
}
