package parley

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
