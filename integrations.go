package parley

import (
	"context"
	"time"
)

// Integrations (docs/integrations.md): bot users with scoped tokens,
// incoming webhooks, slash commands and outgoing webhooks. Each integration
// posts as a bot user of its own, a guest of the one workspace that owns
// it, so that it sees only the channels it has been put in.

// Token scopes. A bot token carries a few; a person's login carries none
// and may do everything its user may. Each route of the HTTP API names the
// scope it needs (httpapi/routes.go); a route that names none is for
// people only.
const (
	// ScopeChannelsRead: read the channels the bot is in (history,
	// members, events, boot, the gateway).
	ScopeChannelsRead = "channels:read"
	// ScopeChannelsJoin: join and leave public channels.
	ScopeChannelsJoin = "channels:join"
	// ScopeChatWrite: post, edit and delete its own messages.
	ScopeChatWrite = "chat:write"
	// ScopeReactionsWrite: add and remove its own reactions.
	ScopeReactionsWrite = "reactions:write"
)

// Scopes lists every scope, in the order of docs/integrations.md.
var Scopes = []string{ScopeChannelsRead, ScopeChannelsJoin, ScopeChatWrite, ScopeReactionsWrite}

// ValidScope reports whether s is a known scope.
func ValidScope(s string) bool {
	for _, k := range Scopes {
		if k == s {
			return true
		}
	}
	return false
}

// PrefixIntegration and friends are the id prefixes of integration rows.
const (
	PrefixBotToken     = "T"
	PrefixWebhook      = "H"
	PrefixIntegration  = "I"
	PrefixAuditEntry   = "A"
	PrefixEphemeralMsg = "E"
)

// Bot is a bot user of a workspace.
type Bot struct {
	User        *User      `json:"user"`
	WorkspaceID string     `json:"workspace_id"`
	CreatedBy   string     `json:"created_by"`
	CreatedAt   time.Time  `json:"created_at"`
	RevokedAt   *time.Time `json:"revoked_at,omitempty"`
	// Kind says what made the bot: "bot" (an admin), "webhook" or
	// "command" / "outgoing" (an integration of that kind).
	Kind string `json:"kind"`
}

// NewBot is the input of bot creation.
type NewBot struct {
	Name   string `json:"name"`
	Handle string `json:"handle"`
}

// BotToken is a bot's token as admins see it: never the token itself.
type BotToken struct {
	ID        string     `json:"id"`
	BotID     string     `json:"bot_id"`
	Label     string     `json:"label"`
	Scopes    []string   `json:"scopes"`
	CreatedBy string     `json:"created_by"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// Token is set only in the answer that created it.
	Token string `json:"token,omitempty"`
}

// NewBotToken is a token to make; TokenHash is the hash of the token
// the caller generated (the store never sees the token).
type NewBotToken struct {
	Label     string
	Scopes    []string
	TokenHash string
}

// Webhook is an incoming webhook.
type Webhook struct {
	ID          string    `json:"id"`
	WorkspaceID string    `json:"workspace_id"`
	ChannelID   string    `json:"channel_id"`
	BotID       string    `json:"bot_id"`
	Name        string    `json:"name"`
	CreatedBy   string    `json:"created_by"`
	CreatedAt   time.Time `json:"created_at"`
	// URL is set only in the answer that created it (it holds the secret).
	URL string `json:"url,omitempty"`
	// SecretHash is the store's; never on the wire.
	SecretHash string `json:"-"`
}

// Integration kinds.
const (
	IntegrationCommand  = "command"
	IntegrationOutgoing = "outgoing"
)

// Integration is a slash command or an outgoing webhook: both POST a
// signed request to URL and post the answer as their bot.
type Integration struct {
	ID          string `json:"id"`
	WorkspaceID string `json:"workspace_id"`
	Kind        string `json:"kind"`
	// Name is the command without its slash, or the webhook's name.
	Name string `json:"name"`
	// ChannelID and TriggerWords: an outgoing webhook's channel and the
	// words that start a message it fires on.
	ChannelID     string    `json:"channel_id,omitempty"`
	TriggerWords  []string  `json:"trigger_words,omitempty"`
	URL           string    `json:"url"`
	Description   string    `json:"description"`
	SigningSecret string    `json:"signing_secret"`
	BotID         string    `json:"bot_id"`
	CreatedBy     string    `json:"created_by"`
	CreatedAt     time.Time `json:"created_at"`
}

// NewIntegration is the input of command and outgoing webhook creation;
// the store fills in the id, bot and SigningSecret given by the caller.
type NewIntegration struct {
	Kind          string   `json:"kind"`
	Name          string   `json:"name"`
	ChannelID     string   `json:"channel_id"`
	TriggerWords  []string `json:"trigger_words"`
	URL           string   `json:"url"`
	Description   string   `json:"description"`
	SigningSecret string   `json:"-"`
}

// CommandResponse is a response_url grant: who may be answered where.
type CommandResponse struct {
	WorkspaceID   string
	IntegrationID string
	ChannelID     string
	UserID        string
	BotID         string
	// ThreadRootID is the thread the command was typed in ("" for the
	// channel): answers at the response_url go there too.
	ThreadRootID string
}

// AuditEntry is one thing a bot did.
type AuditEntry struct {
	ID     string    `json:"id"`
	BotID  string    `json:"bot_id"`
	At     time.Time `json:"at"`
	Action string    `json:"action"` // "POST /api/v1/channels/{id}/messages", "webhook.post", ...
	Target string    `json:"target"` // the path or channel acted on
	Status int       `json:"status"` // the HTTP status of the answer
}

// AuditPage is a page of the audit log, newest first.
type AuditPage struct {
	Entries    []AuditEntry `json:"entries"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// EphemeralMessage is shown to one user only and never stored: a slash
// command's private answer (event message.ephemeral on the user's topic).
type EphemeralMessage struct {
	ID           string `json:"id"`
	ChannelID    string `json:"channel_id"`
	UserID       string `json:"user_id"` // the bot (or the server) it comes from
	Text         string `json:"text"`
	ThreadRootID string `json:"thread_root_id,omitempty"`
	// BotProfile: the name and icon a command's answer asked for.
	BotProfile *BotProfile `json:"bot_profile,omitempty"`
	CreatedAt  time.Time   `json:"created_at"`
}

// IntegrationStore keeps bots, tokens, webhooks, commands and the audit
// log. Methods that take actor authorise inside their transaction: only a
// workspace's admins manage its bots, tokens and commands; a channel's
// managers (workspace admins and the channel's creator) its webhooks.
// Methods without actor act for the server after it authenticated the
// request some other way (a webhook secret, a response_url token).
type IntegrationStore interface {
	CreateBot(ctx context.Context, actor, workspaceID string, b NewBot) (*Bot, error)
	ListBots(ctx context.Context, actor, workspaceID string) ([]Bot, error)
	// RevokeBot deactivates the bot and revokes its tokens (their sockets
	// close); its messages stay.
	RevokeBot(ctx context.Context, actor, workspaceID, botID string) error
	CreateBotToken(ctx context.Context, actor, workspaceID, botID string, t NewBotToken) (*BotToken, error)
	ListBotTokens(ctx context.Context, actor, workspaceID, botID string) ([]BotToken, error)
	RevokeBotToken(ctx context.Context, actor, workspaceID, tokenID string) error

	// CreateWebhook makes the webhook and its bot, and puts the bot in the
	// channel. secretHash is the hash of the URL's secret.
	CreateWebhook(ctx context.Context, actor, channelID, name, secretHash string) (*Webhook, error)
	ListWebhooks(ctx context.Context, actor, workspaceID string) ([]Webhook, error)
	DeleteWebhook(ctx context.Context, actor, workspaceID, webhookID string) error
	// WebhookByID returns a webhook (with its SecretHash) for the server;
	// ENOTFOUND when there is none or its bot was revoked.
	WebhookByID(ctx context.Context, webhookID string) (*Webhook, error)

	CreateIntegration(ctx context.Context, actor, workspaceID string, in NewIntegration) (*Integration, error)
	ListIntegrations(ctx context.Context, actor, workspaceID string) ([]Integration, error)
	DeleteIntegration(ctx context.Context, actor, workspaceID, id string) error
	// CommandByName returns the workspace's slash command called name
	// (without the slash), for the server; ENOTFOUND if none.
	CommandByName(ctx context.Context, workspaceID, name string) (*Integration, error)
	// Commands returns the workspace's live slash commands, for the
	// server (the composer's list: names and descriptions).
	Commands(ctx context.Context, workspaceID string) ([]Integration, error)
	// OutgoingWebhooks returns the outgoing webhooks of a workspace.
	OutgoingWebhooks(ctx context.Context, workspaceID string) ([]Integration, error)

	// GrantResponse records a response_url token (its hash) for a while.
	GrantResponse(ctx context.Context, tokenHash string, r CommandResponse, expires time.Time, maxUses int) error
	// UseResponse spends one use of a response_url token; ENOTFOUND when
	// it is unknown, expired or used up.
	UseResponse(ctx context.Context, tokenHash string) (*CommandResponse, error)

	// SendEphemeral delivers m to userID's sessions in the workspace only
	// (bus-only event message.ephemeral on the user's topic).
	SendEphemeral(ctx context.Context, workspaceID, userID string, m EphemeralMessage) error

	// Audit records what a bot did; BotAudit pages a workspace's log
	// (admins only), newest first, of one bot when botID is set.
	Audit(ctx context.Context, workspaceID string, e AuditEntry) error
	// AuditBots records entries of several bots in one transaction, each in
	// its bot's workspace (found by the store); entries of users that are
	// not bots are left out. It returns the number recorded.
	AuditBots(ctx context.Context, entries []AuditEntry) (int, error)
	BotAudit(ctx context.Context, actor, workspaceID, botID, cursor string, limit int) (*AuditPage, error)
	// BotWorkspace returns the workspace of a bot user, or ENOTFOUND for a
	// user that is not a bot.
	BotWorkspace(ctx context.Context, botID string) (string, error)
}
