package httpapi

import "net/http"

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
		r(get, "/me", authed, "The caller's own user", s.getMe),
		r(patch, "/me", authed, "Update the caller's profile", s.updateMe),
		r(put, "/me/status", authed, "Set the caller's custom status", s.setStatus),
		r(post, "/users/batch", authed, "Users by id, among those sharing a workspace with the caller", s.usersBatch).in(TierRead),

		// Workspaces.
		r(post, "/workspaces", authed, "Create a workspace owned by the caller", s.createWorkspace).in(TierCreate),
		r(get, "/workspaces", authed, "The caller's workspaces", s.listWorkspaces),
		r(get, "/workspaces/{ws}", authed, "One workspace", s.getWorkspace),
		r(post, "/workspaces/{ws}/invites", authed, "Create an invite code", s.createInvite).in(TierCreate),
		r(get, "/invites/{code}", public, "The workspace an invite code is for, before signing up", s.invitePreview).in(TierAuth),
		r(post, "/invites/{code}/accept", authed, "Join a workspace with an invite code", s.acceptInvite).in(TierCreate),
		r(put, "/workspaces/{ws}/members/{user_id}/role", authed, "Change a member's role", s.setMemberRole),
		r(get, "/workspaces/{ws}/users", authed, "Page through the workspace directory", s.listWorkspaceUsers),
		r(get, "/workspaces/{ws}/switcher", authed, "Quick switcher: channels and people matching what was typed", s.switcher),
		r(get, "/workspaces/{ws}/search", authed, "Search the text of the messages the caller may read", s.search).in(TierSearch),

		// Boot.
		r(post, "/boot", authed, "The first screen: the caller's channels and DMs with counts, ws_url, limits", s.boot).in(TierRead),

		// Channels.
		r(post, "/workspaces/{ws}/channels", authed, "Create a public or private channel", s.createChannel).in(TierCreate),
		r(get, "/workspaces/{ws}/channels", authed, "Browse the workspace's channels the caller can see", s.listChannels),
		r(post, "/dms", authed, "Open (or find) a DM or group DM", s.openDM).in(TierCreate),
		r(get, "/channels/{id}", authed, "One channel", s.getChannel),
		r(patch, "/channels/{id}", authed, "Rename a channel or change its topic, purpose, slow mode or post cap", s.updateChannel),
		r(post, "/channels/{id}/archive", authed, "Archive a channel", s.archiveChannel),
		r(post, "/channels/{id}/join", authed, "Join a public channel", s.joinChannel),
		r(post, "/channels/{id}/leave", authed, "Leave a channel", s.leaveChannel),
		r(post, "/channels/{id}/members", authed, "Add members to a channel", s.addMembers),
		r(del, "/channels/{id}/members/{user_id}", authed, "Remove a member from a channel", s.removeMember),
		r(get, "/channels/{id}/members", authed, "Page through a channel's members", s.listMembers),
		r(get, "/channels/{id}/mention-suggestions", authed, "People to offer after @ in a channel, its members first", s.mentionSuggestions),
		r(get, "/channels/{id}/header", authed, "A channel's header: member count, topic, purpose, a few members", s.channelHeader),
		r(post, "/channels/{id}/read", authed, "Move the caller's read marker", s.markRead),

		// Messages.
		r(post, "/channels/{id}/messages", authed, "Post a message (idempotent per client_msg_id)", s.postMessage).in(TierMessage),
		r(get, "/channels/{id}/messages", authed, "A page of channel history", s.listMessages),
		r(get, "/channels/{id}/pins", authed, "A channel's pinned messages", s.listPins),
		r(get, "/messages/{id}", authed, "One message", s.getMessage),
		r(patch, "/messages/{id}", authed, "Edit a message", s.editMessage),
		r(del, "/messages/{id}", authed, "Delete a message", s.deleteMessage),
		r(get, "/messages/{root}/replies", authed, "A page of a thread's replies", s.listReplies),
		r(put, "/messages/{id}/reactions/{emoji}", authed, "Add the caller's reaction", s.addReaction),
		r(del, "/messages/{id}/reactions/{emoji}", authed, "Remove the caller's reaction", s.removeReaction),
		r(put, "/messages/{id}/pin", authed, "Pin a message", s.pin),
		r(del, "/messages/{id}/pin", authed, "Unpin a message", s.unpin),

		// Threads (collapsed reply threads).
		r(get, "/workspaces/{ws}/threads", authed, "The caller's followed threads with unread counts", s.listThreads),
		r(put, "/threads/{root}/follow", authed, "Follow a thread", s.followThread),
		r(del, "/threads/{root}/follow", authed, "Stop following a thread", s.unfollowThread),
		r(post, "/threads/{root}/read", authed, "Mark a thread read", s.markThreadRead),

		// Catch-up.
		r(get, "/channels/{id}/events", authed, "A page of a channel's durable event log", s.listEvents),
		r(post, "/sync", authed, "Missed events of many channels", s.sync).in(TierRead),

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
