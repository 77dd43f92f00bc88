package httpapi

import (
	"net/http"

	"parley"
)

// Prefix is the path prefix of every route.
const Prefix = "/api/v1"

// route is one endpoint: the mux pattern, whether it needs a session, its
// rate-limit tier and a one-line summary. The OpenAPI test and the
// authorization matrix test both walk this table, so an endpoint cannot be
// added without being documented and put through the matrix.
type route struct {
	Method  string
	Pattern string // with the /api/v1 prefix, ServeMux syntax
	Auth    bool
	// Tier is the route's rate-limit class (ratelimit.go): by default
	// TierRead for GET and TierWrite for every other method, so that a new
	// write is limited unless it says otherwise.
	Tier    Tier
	Summary string
	Handle  handlerFunc
	// Scope is the token scope a bot token needs to call the route
	// (parley.Scopes); "" keeps the route for people's logins. The table
	// of which route needs which scope is TestRouteScopes'.
	Scope string
	// MaxBody bounds the request body: 0 is MaxBodyBytes, -1 no bound
	// here (the handler enforces its own: file uploads).
	MaxBody int64
}

// body sets the route's body bound.
func (rt route) body(n int64) route { rt.MaxBody = n; return rt }

func (rt route) bodyLimit() int64 {
	if rt.MaxBody == 0 {
		return MaxBodyBytes
	}
	return rt.MaxBody
}

// in puts the route in tier t.
func (rt route) in(t Tier) route { rt.Tier = t; return rt }

// needs lets bot tokens with scope call the route.
func (rt route) needs(scope string) route { rt.Scope = scope; return rt }

// routes returns the route table.
func (s *Server) routes() []route {
	const (
		get, post, put, patch, del = http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete
		public, authed             = false, true
	)
	r := func(method, path string, auth bool, summary string, h handlerFunc) route {
		tier := TierWrite
		if method == get {
			tier = TierRead
		}
		return route{Method: method, Pattern: Prefix + path, Auth: auth, Tier: tier, Summary: summary, Handle: h}
	}
	return []route{
		// Accounts and sessions.
		r(post, "/auth/signup", public, "Create an account and a session", s.signup).in(TierAuth),
		r(post, "/auth/login", public, "Log in and get a session token", s.login).in(TierAuth),
		r(post, "/auth/logout", authed, "Revoke the calling token", s.logout),
		r(get, "/me", authed, "The caller's own user", s.getMe).needs(parley.ScopeChannelsRead),
		r(patch, "/me", authed, "Update the caller's profile", s.updateMe),
		r(put, "/me/status", authed, "Set the caller's custom status", s.setStatus),
		r(get, "/me/notifications", authed, "The caller's email notification preference", s.getNotifyPrefs),
		r(put, "/me/notifications", authed, "Set the caller's email notification preference (mode, interval_seconds)", s.setNotifyPrefs),
		r(get, "/unsubscribe/{token}", public, "An email's unsubscribe link: a page to confirm turning email notifications off", s.unsubscribePage).in(TierAuth),
		r(post, "/unsubscribe/{token}", public, "Turn email notifications off from an email's link (one-click, no login)", s.unsubscribe).in(TierAuth),
		r(post, "/users/batch", authed, "Users by id, among those sharing a workspace with the caller", s.usersBatch).in(TierRead).needs(parley.ScopeChannelsRead),

		// Workspaces.
		r(post, "/workspaces", authed, "Create a workspace owned by the caller", s.createWorkspace).in(TierCreate),
		r(get, "/workspaces", authed, "The caller's workspaces", s.listWorkspaces).needs(parley.ScopeChannelsRead),
		r(get, "/workspaces/{ws}", authed, "One workspace", s.getWorkspace).needs(parley.ScopeChannelsRead),
		r(post, "/workspaces/{ws}/invites", authed, "Create an invite code", s.createInvite).in(TierCreate),
		r(get, "/invites/{code}", public, "The workspace an invite code is for, before signing up", s.invitePreview).in(TierAuth),
		r(post, "/invites/{code}/accept", authed, "Join a workspace with an invite code", s.acceptInvite).in(TierCreate),
		r(put, "/workspaces/{ws}/members/{user_id}/role", authed, "Change a member's role", s.setMemberRole),
		r(del, "/workspaces/{ws}", authed, "Delete the workspace (owner; confirm=its slug); its data goes in the background", s.deleteWorkspace),
		r(del, "/workspaces/{ws}/members/{user_id}", authed, "Remove a member from the workspace and all its channels", s.removeWorkspaceMember),
		r(post, "/workspaces/{ws}/members/{user_id}/deactivate", authed, "Deactivate a member's account (their sessions close)", s.deactivateMember),
		r(post, "/workspaces/{ws}/members/{user_id}/reactivate", authed, "Reactivate a deactivated member's account", s.reactivateMember),
		r(post, "/workspaces/{ws}/owner", authed, "Transfer the ownership to another member (the owner becomes an admin)", s.transferOwnership),
		r(get, "/workspaces/{ws}/users", authed, "Page through the workspace directory", s.listWorkspaceUsers),
		r(get, "/workspaces/{ws}/switcher", authed, "Quick switcher: channels and people matching what was typed", s.switcher),
		r(get, "/workspaces/{ws}/search", authed, "Search the text of the messages the caller may read", s.search).in(TierSearch),
		r(get, "/workspaces/{ws}/export", authed, "Download the workspace as a Parley export zip (owner only)", s.exportWorkspace).in(TierCreate),

		// Boot.
		r(post, "/boot", authed, "The first screen: the caller's channels and DMs with counts, ws_url, limits", s.boot).in(TierRead).needs(parley.ScopeChannelsRead),

		// Channels.
		r(post, "/workspaces/{ws}/channels", authed, "Create a public or private channel", s.createChannel).in(TierCreate),
		r(get, "/workspaces/{ws}/channels", authed, "Browse the workspace's channels the caller can see", s.listChannels).needs(parley.ScopeChannelsRead),
		r(post, "/dms", authed, "Open (or find) a DM or group DM", s.openDM).in(TierCreate),
		r(get, "/channels/{id}", authed, "One channel", s.getChannel).needs(parley.ScopeChannelsRead),
		r(patch, "/channels/{id}", authed, "Rename a channel or change its topic, purpose, slow mode or post cap", s.updateChannel),
		r(post, "/channels/{id}/archive", authed, "Archive a channel", s.archiveChannel),
		r(post, "/channels/{id}/join", authed, "Join a public channel", s.joinChannel).needs(parley.ScopeChannelsJoin),
		r(post, "/channels/{id}/leave", authed, "Leave a channel", s.leaveChannel).needs(parley.ScopeChannelsJoin),
		r(post, "/channels/{id}/members", authed, "Add members to a channel", s.addMembers),
		r(del, "/channels/{id}/members/{user_id}", authed, "Remove a member from a channel", s.removeMember),
		r(get, "/channels/{id}/members", authed, "Page through a channel's members", s.listMembers).needs(parley.ScopeChannelsRead),
		r(get, "/channels/{id}/mention-suggestions", authed, "People to offer after @ in a channel, its members first", s.mentionSuggestions),
		r(get, "/channels/{id}/header", authed, "A channel's header: member count, topic, purpose, a few members", s.channelHeader).needs(parley.ScopeChannelsRead),
		r(post, "/channels/{id}/read", authed, "Move the caller's read marker", s.markRead).needs(parley.ScopeChannelsRead),

		// Messages.
		r(post, "/channels/{id}/messages", authed, "Post a message (idempotent per client_msg_id)", s.postMessage).in(TierMessage).needs(parley.ScopeChatWrite),
		r(get, "/channels/{id}/messages", authed, "A page of channel history", s.listMessages).needs(parley.ScopeChannelsRead),
		r(get, "/channels/{id}/pins", authed, "A channel's pinned messages", s.listPins).needs(parley.ScopeChannelsRead),
		r(get, "/messages/{id}", authed, "One message", s.getMessage).needs(parley.ScopeChannelsRead),
		r(patch, "/messages/{id}", authed, "Edit a message", s.editMessage).needs(parley.ScopeChatWrite),
		r(del, "/messages/{id}", authed, "Delete a message", s.deleteMessage).needs(parley.ScopeChatWrite),
		r(get, "/messages/{root}/replies", authed, "A page of a thread's replies", s.listReplies).needs(parley.ScopeChannelsRead),
		r(put, "/messages/{id}/reactions/{emoji}", authed, "Add the caller's reaction", s.addReaction).needs(parley.ScopeReactionsWrite),
		r(del, "/messages/{id}/reactions/{emoji}", authed, "Remove the caller's reaction", s.removeReaction).needs(parley.ScopeReactionsWrite),
		r(put, "/messages/{id}/pin", authed, "Pin a message", s.pin),
		r(del, "/messages/{id}/pin", authed, "Unpin a message", s.unpin),

		// Threads (collapsed reply threads).
		r(get, "/workspaces/{ws}/threads", authed, "The caller's followed threads with unread counts", s.listThreads),
		r(put, "/threads/{root}/follow", authed, "Follow a thread", s.followThread),
		r(del, "/threads/{root}/follow", authed, "Stop following a thread", s.unfollowThread),
		r(post, "/threads/{root}/read", authed, "Mark a thread read", s.markThreadRead),

		// Catch-up.
		r(get, "/channels/{id}/events", authed, "A page of a channel's durable event log", s.listEvents).needs(parley.ScopeChannelsRead),
		r(post, "/sync", authed, "Missed events of many channels", s.sync).in(TierRead).needs(parley.ScopeChannelsRead),

		// Integrations (integrations.go, docs/integrations.md).
		r(post, "/workspaces/{ws}/bots", authed, "Create a bot user (workspace admins)", s.createBot).in(TierCreate),
		r(get, "/workspaces/{ws}/bots", authed, "The workspace's bots (workspace admins)", s.listBots),
		r(del, "/workspaces/{ws}/bots/{bot_id}", authed, "Revoke a bot and its tokens (workspace admins)", s.revokeBot),
		r(post, "/workspaces/{ws}/bots/{bot_id}/tokens", authed, "Create a scoped token for a bot (workspace admins)", s.createBotToken).in(TierCreate),
		r(get, "/workspaces/{ws}/bots/{bot_id}/tokens", authed, "A bot's tokens, without the tokens (workspace admins)", s.listBotTokens),
		r(del, "/workspaces/{ws}/bot-tokens/{token_id}", authed, "Revoke a bot token (workspace admins)", s.revokeBotToken),
		r(get, "/workspaces/{ws}/bot-audit", authed, "What the workspace's bots did, newest first (workspace admins)", s.botAudit),
		r(post, "/channels/{id}/webhooks", authed, "Create an incoming webhook for a channel (its managers)", s.createWebhook).in(TierCreate),
		r(get, "/workspaces/{ws}/webhooks", authed, "The workspace's incoming webhooks (workspace admins)", s.listWebhooks),
		r(del, "/workspaces/{ws}/webhooks/{hook_id}", authed, "Delete an incoming webhook", s.deleteWebhook),
		r(post, "/hooks/{hook_id}/{secret}", public, "Post to a channel with a Slack-compatible webhook payload", s.postWebhook).in(TierRead),
		r(post, "/workspaces/{ws}/integrations", authed, "Create a slash command or outgoing webhook (workspace admins)", s.createIntegration).in(TierCreate),
		r(get, "/workspaces/{ws}/integrations", authed, "The workspace's slash commands and outgoing webhooks (workspace admins)", s.listIntegrations),
		r(del, "/workspaces/{ws}/integrations/{integration_id}", authed, "Delete a slash command or outgoing webhook (workspace admins)", s.deleteIntegration),
		r(get, "/workspaces/{ws}/commands", authed, "The slash commands members may type: built-ins and the workspace's", s.listCommands),
		r(post, "/channels/{id}/commands", authed, "Run a slash command in a channel", s.runCommand).in(TierMessage),
		r(post, "/command-responses/{token}", public, "A slash command's delayed answer (its response_url)", s.commandResponse).in(TierRead),

		// Files (docs/files.md).
		r(post, "/workspaces/{ws}/files", authed, "Upload a file: multipart/form-data with a \"file\" part, or the raw bytes with ?name=", s.uploadFile).body(-1),
		r(get, "/files/{id}", authed, "A file's metadata, with signed download URLs", s.getFile),
		r(del, "/files/{id}", authed, "Delete an unattached file of the caller's", s.deleteFile),
		r(get, "/files/{id}/content", public, "Download a file (a signed URL from GET /files/{id}, or a bearer token)", s.downloadContent),
		r(get, "/files/{id}/thumbnail", public, "An image's thumbnail (a signed URL, or a bearer token)", s.downloadThumbnail),
		r(get, "/channels/{id}/files", authed, "The files attached in a channel, newest first", s.listChannelFiles),
		r(post, "/workspaces/{ws}/uploads", authed, "Start a resumable upload {name, size}", s.createUpload),
		r(get, "/uploads/{id}", authed, "A resumable upload's state: the offset to send from", s.getUpload),
		r(put, "/uploads/{id}", authed, "Send the chunk at ?offset= of a resumable upload", s.putChunk).body(chunkBodyBytes),
		r(post, "/uploads/{id}/complete", authed, "Finish a resumable upload: the file", s.completeUpload),
		r(del, "/uploads/{id}", authed, "Abort a resumable upload", s.abortUpload),

		r(get, "/openapi.json", public, "This API's OpenAPI document", s.openAPI),
	}
}
