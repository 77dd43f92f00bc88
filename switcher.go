package parley

import "context"

// Answers of the query cache (package querycache, Slack's Flannel): the
// quick switcher, mention suggestions and the channel header. They are read
// from memory on the node, not from the store.

// SwitcherResult is the quick switcher's answer: the channels and the people
// matching what was typed, best first.
type SwitcherResult struct {
	Channels []Channel `json:"channels"`
	Users    []User    `json:"users"`
}

// MentionSuggestion is a user offered after "@" in a channel's composer.
// InChannel says whether they are a member of that channel (mentioning
// someone outside it does not reach them).
type MentionSuggestion struct {
	User
	InChannel bool `json:"in_channel"`
}

// ChannelHeader is what a channel's header bar shows: the channel as the
// caller sees it, its member count, topic and purpose, and a few members.
type ChannelHeader struct {
	Channel        Channel `json:"channel"`
	MemberCount    int64   `json:"member_count"`
	Topic          string  `json:"topic"`
	Purpose        string  `json:"purpose"`
	MembersPreview []User  `json:"members_preview"`
}

// MembersPreviewSize is how many members a channel header shows.
const MembersPreviewSize = 5

// DirectoryQueries answers the directory queries: the quick switcher,
// mention suggestions, the user directory, batch user lookups and channel
// headers for callers, and users by id or handle for the servers' own use.
// Two implementations agree on every answer (querycache's contract tests hold them to it):
// the query cache (querycache.Cache, in memory, fed by the bus), which every
// node runs, and the store-backed one (sqlstore.Directory), for tests and
// tools. Callers get one of them and never know which.
type DirectoryQueries interface {
	// Switcher returns the channels actor can see and the active users of
	// the workspace that match q, each list best first and at most limit
	// long. A q starting with '#' looks for channels only, '@' for people.
	Switcher(ctx context.Context, actor, workspaceID, q string, limit int) (*SwitcherResult, error)
	// MentionSuggestions returns the active users of the channel's
	// workspace matching q after an "@", best first, the channel's members
	// first among equals. The channel must be visible to actor.
	MentionSuggestions(ctx context.Context, actor, channelID, q string, limit int) ([]MentionSuggestion, error)
	// Directory pages the workspace's users by handle, deactivated ones
	// included and marked, as Store.ListWorkspaceUsers does.
	Directory(ctx context.Context, actor, workspaceID string, q UserQuery) (*UserPage, error)
	// UsersBatch returns the users among ids who share a workspace with
	// actor, in the order of ids, as Store.UsersBatch does.
	UsersBatch(ctx context.Context, actor string, ids []string) ([]User, error)
	// ChannelHeader is what the channel's header bar shows actor.
	ChannelHeader(ctx context.Context, actor, channelID string) (*ChannelHeader, error)
	// Users returns the users of the workspace among ids, in the order of
	// ids, for the server's own use (no actor to authorise).
	Users(ctx context.Context, workspaceID string, ids []string) ([]User, error)
	// UsersByHandle returns the users of the workspace with these handles,
	// in the order given, for the server's own use.
	UsersByHandle(ctx context.Context, workspaceID string, handles []string) ([]User, error)
}
