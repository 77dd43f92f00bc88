package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"parley"
)

// Accounts, sessions, users and workspaces.

// Auth is the answer of Signup and Login: the user and their new token.
type Auth struct {
	User  *parley.User `json:"user"`
	Token string       `json:"token"`
}

// Signup creates an account and a session; the client uses its token from
// then on. Never retried: a repeated signup would conflict.
func (c *Client) Signup(ctx context.Context, email, password, name, handle string) (*Auth, error) {
	var out Auth
	err := c.do(ctx, call{method: http.MethodPost, path: "/auth/signup", noAuth: true,
		body: map[string]string{"email": email, "password": password, "name": name, "handle": handle}}, &out)
	if err != nil {
		return nil, err
	}
	c.SetToken(out.Token)
	return &out, nil
}

// Login opens a session; the client uses its token from then on. Never
// retried: every attempt counts against the login rate limits.
func (c *Client) Login(ctx context.Context, email, password string) (*Auth, error) {
	var out Auth
	err := c.do(ctx, call{method: http.MethodPost, path: "/auth/login", noAuth: true,
		body: map[string]string{"email": email, "password": password}}, &out)
	if err != nil {
		return nil, err
	}
	c.SetToken(out.Token)
	return &out, nil
}

// Logout revokes the client's token (its gateway sockets close with 4004)
// and forgets it.
func (c *Client) Logout(ctx context.Context) error {
	if err := c.do(ctx, call{method: http.MethodPost, path: "/auth/logout", idempotent: true}, nil); err != nil {
		return err
	}
	c.SetToken("")
	return nil
}

// Me returns the caller's own user.
func (c *Client) Me(ctx context.Context) (*parley.User, error) {
	var u parley.User
	if err := c.do(ctx, call{method: http.MethodGet, path: "/me", idempotent: true}, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// UpdateMe changes the caller's profile; nil fields stay as they are.
func (c *Client) UpdateMe(ctx context.Context, p parley.UserPatch) (*parley.User, error) {
	var u parley.User
	if err := c.do(ctx, call{method: http.MethodPatch, path: "/me", body: p, idempotent: true}, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// SetStatus sets the caller's custom status.
func (c *Client) SetStatus(ctx context.Context, s parley.Status) (*parley.User, error) {
	var u parley.User
	if err := c.do(ctx, call{method: http.MethodPut, path: "/me/status", body: s, idempotent: true}, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// UsersBatch returns the users among ids that share a workspace with the
// caller (at most parley.MaxBatchUsers ids); the others are left out.
func (c *Client) UsersBatch(ctx context.Context, ids []string) ([]parley.User, error) {
	var out struct {
		Users []parley.User `json:"users"`
	}
	err := c.do(ctx, call{method: http.MethodPost, path: "/users/batch", idempotent: true,
		body: map[string][]string{"ids": ids}}, &out)
	return out.Users, err
}

// ListUsers pages through a workspace's directory, optionally filtered by q;
// deactivated users only with q.IncludeDeactivated.
func (c *Client) ListUsers(ctx context.Context, workspaceID string, q parley.UserQuery) (*parley.UserPage, error) {
	var page parley.UserPage
	v := pageQuery(q.Q, q.Cursor, q.Limit)
	if q.IncludeDeactivated {
		v.Set("include_deactivated", "true")
	}
	err := c.do(ctx, call{method: http.MethodGet, path: "/workspaces/" + esc(workspaceID) + "/users",
		query: v, idempotent: true}, &page)
	if err != nil {
		return nil, err
	}
	return &page, nil
}

// CreateWorkspace creates a workspace with the caller as its owner.
func (c *Client) CreateWorkspace(ctx context.Context, name, slug string) (*parley.Workspace, error) {
	var ws parley.Workspace
	err := c.do(ctx, call{method: http.MethodPost, path: "/workspaces",
		body: map[string]string{"name": name, "slug": slug}}, &ws)
	if err != nil {
		return nil, err
	}
	return &ws, nil
}

// ListWorkspaces returns the caller's workspaces.
func (c *Client) ListWorkspaces(ctx context.Context) ([]parley.Workspace, error) {
	var out struct {
		Workspaces []parley.Workspace `json:"workspaces"`
	}
	err := c.do(ctx, call{method: http.MethodGet, path: "/workspaces", idempotent: true}, &out)
	return out.Workspaces, err
}

// GetWorkspace returns one of the caller's workspaces.
func (c *Client) GetWorkspace(ctx context.Context, workspaceID string) (*parley.Workspace, error) {
	var ws parley.Workspace
	if err := c.do(ctx, call{method: http.MethodGet, path: "/workspaces/" + esc(workspaceID), idempotent: true}, &ws); err != nil {
		return nil, err
	}
	return &ws, nil
}

// CreateInvite creates an invite code for a workspace.
func (c *Client) CreateInvite(ctx context.Context, workspaceID string, p parley.InviteParams) (*parley.Invite, error) {
	var inv parley.Invite
	err := c.do(ctx, call{method: http.MethodPost, path: "/workspaces/" + esc(workspaceID) + "/invites", body: p}, &inv)
	if err != nil {
		return nil, err
	}
	return &inv, nil
}

// AcceptInvite joins the invite's workspace (a no-op for a member, so it is
// safe to repeat).
func (c *Client) AcceptInvite(ctx context.Context, code string) (*parley.Workspace, error) {
	var ws parley.Workspace
	err := c.do(ctx, call{method: http.MethodPost, path: "/invites/" + esc(code) + "/accept", idempotent: true}, &ws)
	if err != nil {
		return nil, err
	}
	return &ws, nil
}

// SetMemberRole changes a workspace member's role (admins only).
func (c *Client) SetMemberRole(ctx context.Context, workspaceID, userID string, role parley.Role) error {
	return c.do(ctx, call{method: http.MethodPut, idempotent: true,
		path: "/workspaces/" + esc(workspaceID) + "/members/" + esc(userID) + "/role",
		body: map[string]parley.Role{"role": role}}, nil)
}

// pageQuery builds the q/cursor/limit query of a list call.
func pageQuery(q, cursor string, limit int) url.Values {
	v := url.Values{}
	if q != "" {
		v.Set("q", q)
	}
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	return v
}

// Boot returns the caller's first screen of a workspace: their channels and
// DMs with each one's last_seq and counts, the gateway URL and the limits.
// A client declares the channels' LastSeq as ConnectOptions.Channels so that
// the Conn catches up from there.
func (c *Client) Boot(ctx context.Context, q parley.BootQuery) (*parley.Boot, error) {
	var b parley.Boot
	if err := c.do(ctx, call{method: http.MethodPost, path: "/boot", body: q, idempotent: true}, &b); err != nil {
		return nil, err
	}
	return &b, nil
}
