package client

import (
	"context"
	"net/http"
	"net/url"

	"parley"
)

// Account and workspace lifecycle (docs/lifecycle.md). Deactivation and
// reactivation are idempotent and retried; the others are sent once.

func memberPath(workspaceID, userID string) string {
	return "/workspaces/" + esc(workspaceID) + "/members/" + esc(userID)
}

// DeactivateUser deactivates a member's account (workspace admins; see
// docs/lifecycle.md for accounts in several workspaces). Their sockets
// close with 4010 and their tokens stop working.
func (c *Client) DeactivateUser(ctx context.Context, workspaceID, userID string) (*parley.User, error) {
	var u parley.User
	if err := c.do(ctx, call{method: http.MethodPost, path: memberPath(workspaceID, userID) + "/deactivate", idempotent: true}, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// ReactivateUser undoes DeactivateUser.
func (c *Client) ReactivateUser(ctx context.Context, workspaceID, userID string) (*parley.User, error) {
	var u parley.User
	if err := c.do(ctx, call{method: http.MethodPost, path: memberPath(workspaceID, userID) + "/reactivate", idempotent: true}, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// RemoveWorkspaceMember takes a member out of the workspace and all its
// channels; their sessions of it close with 4011.
func (c *Client) RemoveWorkspaceMember(ctx context.Context, workspaceID, userID string) error {
	return c.do(ctx, call{method: http.MethodDelete, path: memberPath(workspaceID, userID)}, nil)
}

// TransferOwnership makes userID the owner; the caller (the owner) becomes
// an admin.
func (c *Client) TransferOwnership(ctx context.Context, workspaceID, userID string) error {
	return c.do(ctx, call{method: http.MethodPost, path: "/workspaces/" + esc(workspaceID) + "/owner",
		body: map[string]string{"user_id": userID}}, nil)
}

// DeleteWorkspace deletes the workspace (owner only); confirm must be its
// slug. Its data is removed in the background.
func (c *Client) DeleteWorkspace(ctx context.Context, workspaceID, confirm string) error {
	return c.do(ctx, call{method: http.MethodDelete, path: "/workspaces/" + esc(workspaceID),
		query: url.Values{"confirm": {confirm}}}, nil)
}
