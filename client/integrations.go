package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"parley"
)

// Integrations: bots and their tokens, incoming webhooks, slash commands
// and outgoing webhooks (docs/integrations.md). A bot uses this client
// like a person does, with its token: New(base, WithToken(botToken)).

// CreateBot makes a bot user in a workspace (workspace admins).
func (c *Client) CreateBot(ctx context.Context, workspaceID string, b parley.NewBot) (*parley.Bot, error) {
	var out parley.Bot
	if err := c.do(ctx, call{method: http.MethodPost, path: "/workspaces/" + esc(workspaceID) + "/bots", body: b}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListBots lists a workspace's bots, revoked ones included.
func (c *Client) ListBots(ctx context.Context, workspaceID string) ([]parley.Bot, error) {
	var out struct {
		Bots []parley.Bot `json:"bots"`
	}
	err := c.do(ctx, call{method: http.MethodGet, path: "/workspaces/" + esc(workspaceID) + "/bots", idempotent: true}, &out)
	return out.Bots, err
}

// RevokeBot deactivates a bot and revokes its tokens.
func (c *Client) RevokeBot(ctx context.Context, workspaceID, botID string) error {
	return c.do(ctx, call{method: http.MethodDelete, path: "/workspaces/" + esc(workspaceID) + "/bots/" + esc(botID), idempotent: true}, nil)
}

// CreateBotToken makes a token with scopes (parley.Scope*) for a bot; the
// answer's Token is the only time the token is shown.
func (c *Client) CreateBotToken(ctx context.Context, workspaceID, botID, label string, scopes []string) (*parley.BotToken, error) {
	var out parley.BotToken
	err := c.do(ctx, call{method: http.MethodPost, path: "/workspaces/" + esc(workspaceID) + "/bots/" + esc(botID) + "/tokens",
		body: map[string]any{"label": label, "scopes": scopes}}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ListBotTokens lists a bot's tokens (never the tokens themselves).
func (c *Client) ListBotTokens(ctx context.Context, workspaceID, botID string) ([]parley.BotToken, error) {
	var out struct {
		Tokens []parley.BotToken `json:"tokens"`
	}
	err := c.do(ctx, call{method: http.MethodGet, path: "/workspaces/" + esc(workspaceID) + "/bots/" + esc(botID) + "/tokens", idempotent: true}, &out)
	return out.Tokens, err
}

// RevokeBotToken revokes one bot token; its sockets close.
func (c *Client) RevokeBotToken(ctx context.Context, workspaceID, tokenID string) error {
	return c.do(ctx, call{method: http.MethodDelete, path: "/workspaces/" + esc(workspaceID) + "/bot-tokens/" + esc(tokenID), idempotent: true}, nil)
}

// BotAudit pages what a workspace's bots did (one bot's when botID is
// set), newest first.
func (c *Client) BotAudit(ctx context.Context, workspaceID, botID, cursor string, limit int) (*parley.AuditPage, error) {
	q := url.Values{}
	if botID != "" {
		q.Set("bot_id", botID)
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out parley.AuditPage
	err := c.do(ctx, call{method: http.MethodGet, path: "/workspaces/" + esc(workspaceID) + "/bot-audit", query: q, idempotent: true}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateWebhook makes an incoming webhook for a channel; the answer's URL
// (with its secret) is shown only this once.
func (c *Client) CreateWebhook(ctx context.Context, channelID, name string) (*parley.Webhook, error) {
	var out parley.Webhook
	err := c.do(ctx, call{method: http.MethodPost, path: "/channels/" + esc(channelID) + "/webhooks", body: map[string]string{"name": name}}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ListWebhooks lists a workspace's incoming webhooks.
func (c *Client) ListWebhooks(ctx context.Context, workspaceID string) ([]parley.Webhook, error) {
	var out struct {
		Webhooks []parley.Webhook `json:"webhooks"`
	}
	err := c.do(ctx, call{method: http.MethodGet, path: "/workspaces/" + esc(workspaceID) + "/webhooks", idempotent: true}, &out)
	return out.Webhooks, err
}

// DeleteWebhook deletes an incoming webhook.
func (c *Client) DeleteWebhook(ctx context.Context, workspaceID, webhookID string) error {
	return c.do(ctx, call{method: http.MethodDelete, path: "/workspaces/" + esc(workspaceID) + "/webhooks/" + esc(webhookID), idempotent: true}, nil)
}

// CreateIntegration makes a slash command or an outgoing webhook; the
// answer carries its signing secret.
func (c *Client) CreateIntegration(ctx context.Context, workspaceID string, in parley.NewIntegration) (*parley.Integration, error) {
	var out parley.Integration
	if err := c.do(ctx, call{method: http.MethodPost, path: "/workspaces/" + esc(workspaceID) + "/integrations", body: in}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListIntegrations lists a workspace's slash commands and outgoing webhooks.
func (c *Client) ListIntegrations(ctx context.Context, workspaceID string) ([]parley.Integration, error) {
	var out struct {
		Integrations []parley.Integration `json:"integrations"`
	}
	err := c.do(ctx, call{method: http.MethodGet, path: "/workspaces/" + esc(workspaceID) + "/integrations", idempotent: true}, &out)
	return out.Integrations, err
}

// DeleteIntegration deletes a slash command or outgoing webhook.
func (c *Client) DeleteIntegration(ctx context.Context, workspaceID, id string) error {
	return c.do(ctx, call{method: http.MethodDelete, path: "/workspaces/" + esc(workspaceID) + "/integrations/" + esc(id), idempotent: true}, nil)
}

// Command is a slash command as the composer offers it.
type Command struct {
	Name        string `json:"name"`
	Usage       string `json:"usage,omitempty"`
	Description string `json:"description"`
	Builtin     bool   `json:"builtin"`
}

// ListCommands returns the commands a member may type in a workspace.
func (c *Client) ListCommands(ctx context.Context, workspaceID string) ([]Command, error) {
	var out struct {
		Commands []Command `json:"commands"`
	}
	err := c.do(ctx, call{method: http.MethodGet, path: "/workspaces/" + esc(workspaceID) + "/commands", idempotent: true}, &out)
	return out.Commands, err
}

// CommandResult is what running a command did: a message posted
// (ResponseType "in_channel") or a notice for the caller only.
type CommandResult struct {
	ResponseType string                   `json:"response_type"`
	Message      *parley.Message          `json:"message,omitempty"`
	Ephemeral    *parley.EphemeralMessage `json:"ephemeral,omitempty"`
}

// RunCommand runs "/command text" in a channel. Not retried: a command
// may have effects.
func (c *Client) RunCommand(ctx context.Context, channelID, command, text, threadRootID string) (*CommandResult, error) {
	var out CommandResult
	err := c.do(ctx, call{method: http.MethodPost, path: "/channels/" + esc(channelID) + "/commands",
		body: map[string]string{"command": command, "text": text, "thread_root_id": threadRootID}}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}
