package client

import (
	"context"
	"net/http"

	"parley"
)

// Channels, DMs, memberships and read markers.

// CreateChannel creates a public or private channel in a workspace.
func (c *Client) CreateChannel(ctx context.Context, workspaceID string, nc parley.NewChannel) (*parley.Channel, error) {
	return c.channel(ctx, call{method: http.MethodPost, path: "/workspaces/" + esc(workspaceID) + "/channels", body: nc})
}

// ListChannels pages, by name, the workspace's channels the caller can see.
func (c *Client) ListChannels(ctx context.Context, workspaceID string, q parley.ChannelQuery) (*parley.ChannelPage, error) {
	var page parley.ChannelPage
	err := c.do(ctx, call{method: http.MethodGet, path: "/workspaces/" + esc(workspaceID) + "/channels",
		query: pageQuery(q.Q, q.Cursor, q.Limit), idempotent: true}, &page)
	if err != nil {
		return nil, err
	}
	return &page, nil
}

// OpenDM returns the dm (one other user) or group_dm (2 to 8 others) between
// the caller and userIDs, creating it the first time. Idempotent.
func (c *Client) OpenDM(ctx context.Context, workspaceID string, userIDs []string) (*parley.Channel, error) {
	return c.channel(ctx, call{method: http.MethodPost, path: "/dms", idempotent: true,
		body: map[string]any{"workspace_id": workspaceID, "user_ids": userIDs}})
}

// GetChannel returns one channel, with the caller's membership.
func (c *Client) GetChannel(ctx context.Context, channelID string) (*parley.Channel, error) {
	return c.channel(ctx, call{method: http.MethodGet, path: "/channels/" + esc(channelID), idempotent: true})
}

// UpdateChannel renames a channel or changes its topic or purpose.
func (c *Client) UpdateChannel(ctx context.Context, channelID string, p parley.ChannelPatch) (*parley.Channel, error) {
	return c.channel(ctx, call{method: http.MethodPatch, path: "/channels/" + esc(channelID), body: p, idempotent: true})
}

// ArchiveChannel archives a channel.
func (c *Client) ArchiveChannel(ctx context.Context, channelID string) (*parley.Channel, error) {
	return c.channel(ctx, call{method: http.MethodPost, path: "/channels/" + esc(channelID) + "/archive", idempotent: true})
}

// JoinChannel makes the caller a member of a public channel.
func (c *Client) JoinChannel(ctx context.Context, channelID string) (*parley.Channel, error) {
	return c.channel(ctx, call{method: http.MethodPost, path: "/channels/" + esc(channelID) + "/join", idempotent: true})
}

// LeaveChannel ends the caller's membership.
func (c *Client) LeaveChannel(ctx context.Context, channelID string) error {
	return c.do(ctx, call{method: http.MethodPost, path: "/channels/" + esc(channelID) + "/leave", idempotent: true}, nil)
}

// AddMembers adds users to a channel.
func (c *Client) AddMembers(ctx context.Context, channelID string, userIDs []string) (*parley.Channel, error) {
	return c.channel(ctx, call{method: http.MethodPost, path: "/channels/" + esc(channelID) + "/members",
		body: map[string][]string{"user_ids": userIDs}, idempotent: true})
}

// RemoveMember removes a user from a channel.
func (c *Client) RemoveMember(ctx context.Context, channelID, userID string) error {
	return c.do(ctx, call{method: http.MethodDelete, idempotent: true,
		path: "/channels/" + esc(channelID) + "/members/" + esc(userID)}, nil)
}

// ListMembers pages through a channel's members.
func (c *Client) ListMembers(ctx context.Context, channelID, cursor string, limit int) (*parley.MemberPage, error) {
	var page parley.MemberPage
	err := c.do(ctx, call{method: http.MethodGet, path: "/channels/" + esc(channelID) + "/members",
		query: pageQuery("", cursor, limit), idempotent: true}, &page)
	if err != nil {
		return nil, err
	}
	return &page, nil
}

// MarkRead moves the caller's read marker in a channel forward to seq.
func (c *Client) MarkRead(ctx context.Context, channelID string, seq int64) (*parley.ReadState, error) {
	var rs parley.ReadState
	err := c.do(ctx, call{method: http.MethodPost, path: "/channels/" + esc(channelID) + "/read",
		body: map[string]int64{"seq": seq}, idempotent: true}, &rs)
	if err != nil {
		return nil, err
	}
	return &rs, nil
}

// channel sends a call answered by one channel.
func (c *Client) channel(ctx context.Context, cl call) (*parley.Channel, error) {
	var ch parley.Channel
	if err := c.do(ctx, cl, &ch); err != nil {
		return nil, err
	}
	return &ch, nil
}
