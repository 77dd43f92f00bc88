package storeguard

// One method per parley.Store method, each under its purpose (the table
// purposeOf at the end lists them).

import (
	"context"

	"parley"
)

func (g *Guard) SessionChannels(ctx context.Context, userID, workspaceID string) ([]parley.ChannelRef, error) {
	return call(g, ctx, Boot, func(ctx context.Context) ([]parley.ChannelRef, error) {
		return g.s.SessionChannels(ctx, userID, workspaceID)
	})
}

func (g *Guard) ChannelLog(ctx context.Context, channelID string, afterSeq int64, limit int) ([]parley.Event, error) {
	return call(g, ctx, Boot, func(ctx context.Context) ([]parley.Event, error) {
		return g.s.ChannelLog(ctx, channelID, afterSeq, limit)
	})
}

func (g *Guard) ChannelMember(ctx context.Context, userID, channelID string) (bool, error) {
	return call(g, ctx, Read, func(ctx context.Context) (bool, error) { return g.s.ChannelMember(ctx, userID, channelID) })
}

func (g *Guard) CreateUser(ctx context.Context, u parley.NewUser) (*parley.User, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.User, error) { return g.s.CreateUser(ctx, u) })
}

func (g *Guard) UserCredentials(ctx context.Context, email string) (*parley.User, string, error) {
	type pair struct {
		a *parley.User
		b string
	}
	v, err := call(g, ctx, Read, func(ctx context.Context) (pair, error) {
		a, b, err := g.s.UserCredentials(ctx, email)
		return pair{a, b}, err
	})
	return v.a, v.b, err
}

func (g *Guard) CreateSession(ctx context.Context, s parley.Session) error {
	_, err := call(g, ctx, Write, func(ctx context.Context) (struct{}, error) { return struct{}{}, g.s.CreateSession(ctx, s) })
	return err
}

func (g *Guard) SessionByToken(ctx context.Context, tokenHash string) (*parley.Session, error) {
	return call(g, ctx, Read, func(ctx context.Context) (*parley.Session, error) { return g.s.SessionByToken(ctx, tokenHash) })
}

func (g *Guard) RevokeSession(ctx context.Context, tokenHash string) error {
	_, err := call(g, ctx, Write, func(ctx context.Context) (struct{}, error) { return struct{}{}, g.s.RevokeSession(ctx, tokenHash) })
	return err
}

func (g *Guard) GetMe(ctx context.Context, actor string) (*parley.User, error) {
	return call(g, ctx, Read, func(ctx context.Context) (*parley.User, error) { return g.s.GetMe(ctx, actor) })
}

func (g *Guard) UpdateMe(ctx context.Context, actor string, p parley.UserPatch) (*parley.User, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.User, error) { return g.s.UpdateMe(ctx, actor, p) })
}

func (g *Guard) SetStatus(ctx context.Context, actor string, s parley.Status) (*parley.User, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.User, error) { return g.s.SetStatus(ctx, actor, s) })
}

func (g *Guard) UsersBatch(ctx context.Context, actor string, ids []string) ([]parley.User, error) {
	return call(g, ctx, Read, func(ctx context.Context) ([]parley.User, error) { return g.s.UsersBatch(ctx, actor, ids) })
}

func (g *Guard) ListWorkspaceUsers(ctx context.Context, actor, workspaceID string, q parley.UserQuery) (*parley.UserPage, error) {
	return call(g, ctx, Read, func(ctx context.Context) (*parley.UserPage, error) {
		return g.s.ListWorkspaceUsers(ctx, actor, workspaceID, q)
	})
}

func (g *Guard) CreateWorkspace(ctx context.Context, actor, name, slug string) (*parley.Workspace, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.Workspace, error) {
		return g.s.CreateWorkspace(ctx, actor, name, slug)
	})
}

func (g *Guard) GetWorkspace(ctx context.Context, actor, workspaceID string) (*parley.Workspace, error) {
	return call(g, ctx, Read, func(ctx context.Context) (*parley.Workspace, error) { return g.s.GetWorkspace(ctx, actor, workspaceID) })
}

func (g *Guard) ListWorkspaces(ctx context.Context, actor string) ([]parley.Workspace, error) {
	return call(g, ctx, Read, func(ctx context.Context) ([]parley.Workspace, error) { return g.s.ListWorkspaces(ctx, actor) })
}

func (g *Guard) CreateInvite(ctx context.Context, actor, workspaceID string, p parley.InviteParams) (*parley.Invite, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.Invite, error) { return g.s.CreateInvite(ctx, actor, workspaceID, p) })
}

func (g *Guard) AcceptInvite(ctx context.Context, actor, code string) (*parley.Workspace, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.Workspace, error) { return g.s.AcceptInvite(ctx, actor, code) })
}

func (g *Guard) InvitePreview(ctx context.Context, code string) (*parley.InvitePreview, error) {
	return call(g, ctx, Read, func(ctx context.Context) (*parley.InvitePreview, error) { return g.s.InvitePreview(ctx, code) })
}

func (g *Guard) SetMemberRole(ctx context.Context, actor, workspaceID, userID string, role parley.Role) error {
	_, err := call(g, ctx, Write, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, g.s.SetMemberRole(ctx, actor, workspaceID, userID, role)
	})
	return err
}

func (g *Guard) ListChannels(ctx context.Context, actor, workspaceID string, q parley.ChannelQuery) (*parley.ChannelPage, error) {
	return call(g, ctx, Read, func(ctx context.Context) (*parley.ChannelPage, error) {
		return g.s.ListChannels(ctx, actor, workspaceID, q)
	})
}

func (g *Guard) CreateChannel(ctx context.Context, actor, workspaceID string, c parley.NewChannel) (*parley.Channel, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.Channel, error) {
		return g.s.CreateChannel(ctx, actor, workspaceID, c)
	})
}

func (g *Guard) OpenDM(ctx context.Context, actor, workspaceID string, userIDs []string) (*parley.Channel, bool, error) {
	type pair struct {
		a *parley.Channel
		b bool
	}
	v, err := call(g, ctx, Write, func(ctx context.Context) (pair, error) {
		a, b, err := g.s.OpenDM(ctx, actor, workspaceID, userIDs)
		return pair{a, b}, err
	})
	return v.a, v.b, err
}

func (g *Guard) GetChannel(ctx context.Context, actor, channelID string) (*parley.Channel, error) {
	return call(g, ctx, Read, func(ctx context.Context) (*parley.Channel, error) { return g.s.GetChannel(ctx, actor, channelID) })
}

func (g *Guard) UpdateChannel(ctx context.Context, actor, channelID string, p parley.ChannelPatch) (*parley.Channel, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.Channel, error) { return g.s.UpdateChannel(ctx, actor, channelID, p) })
}

func (g *Guard) ArchiveChannel(ctx context.Context, actor, channelID string) (*parley.Channel, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.Channel, error) { return g.s.ArchiveChannel(ctx, actor, channelID) })
}

func (g *Guard) JoinChannel(ctx context.Context, actor, channelID string) (*parley.Channel, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.Channel, error) { return g.s.JoinChannel(ctx, actor, channelID) })
}

func (g *Guard) LeaveChannel(ctx context.Context, actor, channelID string) error {
	_, err := call(g, ctx, Write, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, g.s.LeaveChannel(ctx, actor, channelID)
	})
	return err
}

func (g *Guard) AddMembers(ctx context.Context, actor, channelID string, userIDs []string) (*parley.Channel, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.Channel, error) {
		return g.s.AddMembers(ctx, actor, channelID, userIDs)
	})
}

func (g *Guard) RemoveMember(ctx context.Context, actor, channelID, userID string) error {
	_, err := call(g, ctx, Write, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, g.s.RemoveMember(ctx, actor, channelID, userID)
	})
	return err
}

func (g *Guard) ListMembers(ctx context.Context, actor, channelID, cursor string, limit int) (*parley.MemberPage, error) {
	return call(g, ctx, Read, func(ctx context.Context) (*parley.MemberPage, error) {
		return g.s.ListMembers(ctx, actor, channelID, cursor, limit)
	})
}

func (g *Guard) MarkRead(ctx context.Context, actor, channelID string, seq int64) (*parley.ReadState, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.ReadState, error) { return g.s.MarkRead(ctx, actor, channelID, seq) })
}

func (g *Guard) PostMessage(ctx context.Context, actor, channelID string, m parley.NewMessage) (*parley.Message, bool, error) {
	type pair struct {
		a *parley.Message
		b bool
	}
	v, err := call(g, ctx, Write, func(ctx context.Context) (pair, error) {
		a, b, err := g.s.PostMessage(ctx, actor, channelID, m)
		return pair{a, b}, err
	})
	return v.a, v.b, err
}

func (g *Guard) ListMessages(ctx context.Context, actor, channelID string, q parley.HistoryQuery) (*parley.MessagePage, error) {
	return call(g, ctx, History, func(ctx context.Context) (*parley.MessagePage, error) {
		return g.s.ListMessages(ctx, actor, channelID, q)
	})
}

func (g *Guard) ListReplies(ctx context.Context, actor, rootID string, afterSeq int64, limit int) (*parley.MessagePage, error) {
	return call(g, ctx, History, func(ctx context.Context) (*parley.MessagePage, error) {
		return g.s.ListReplies(ctx, actor, rootID, afterSeq, limit)
	})
}

func (g *Guard) ListPins(ctx context.Context, actor, channelID string) (*parley.MessagePage, error) {
	return call(g, ctx, History, func(ctx context.Context) (*parley.MessagePage, error) { return g.s.ListPins(ctx, actor, channelID) })
}

func (g *Guard) GetMessage(ctx context.Context, actor, messageID string) (*parley.Message, error) {
	return call(g, ctx, Read, func(ctx context.Context) (*parley.Message, error) { return g.s.GetMessage(ctx, actor, messageID) })
}

func (g *Guard) EditMessage(ctx context.Context, actor, messageID, text string) (*parley.Message, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.Message, error) {
		return g.s.EditMessage(ctx, actor, messageID, text)
	})
}

func (g *Guard) DeleteMessage(ctx context.Context, actor, messageID string) error {
	_, err := call(g, ctx, Write, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, g.s.DeleteMessage(ctx, actor, messageID)
	})
	return err
}

func (g *Guard) AddReaction(ctx context.Context, actor, messageID, emoji string) (*parley.Message, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.Message, error) {
		return g.s.AddReaction(ctx, actor, messageID, emoji)
	})
}

func (g *Guard) RemoveReaction(ctx context.Context, actor, messageID, emoji string) (*parley.Message, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.Message, error) {
		return g.s.RemoveReaction(ctx, actor, messageID, emoji)
	})
}

func (g *Guard) Pin(ctx context.Context, actor, messageID string) (*parley.Message, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.Message, error) { return g.s.Pin(ctx, actor, messageID) })
}

func (g *Guard) Unpin(ctx context.Context, actor, messageID string) (*parley.Message, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.Message, error) { return g.s.Unpin(ctx, actor, messageID) })
}

func (g *Guard) ListEvents(ctx context.Context, actor, channelID string, afterSeq int64, limit int) (*parley.EventPage, error) {
	return call(g, ctx, History, func(ctx context.Context) (*parley.EventPage, error) {
		return g.s.ListEvents(ctx, actor, channelID, afterSeq, limit)
	})
}

func (g *Guard) Sync(ctx context.Context, actor string, channels map[string]int64) (map[string]parley.SyncResult, error) {
	return call(g, ctx, History, func(ctx context.Context) (map[string]parley.SyncResult, error) { return g.s.Sync(ctx, actor, channels) })
}

func (g *Guard) ReadDirectory(ctx context.Context, workspaceID string, v parley.DirectoryVisitor) error {
	_, err := call(g, ctx, Boot, func(ctx context.Context) (struct{}, error) { return struct{}{}, g.s.ReadDirectory(ctx, workspaceID, v) })
	return err
}

func (g *Guard) ChannelWorkspace(ctx context.Context, channelID string) (string, error) {
	return call(g, ctx, Read, func(ctx context.Context) (string, error) { return g.s.ChannelWorkspace(ctx, channelID) })
}

func (g *Guard) Boot(ctx context.Context, actor string, q parley.BootQuery) (*parley.Boot, error) {
	return call(g, ctx, Boot, func(ctx context.Context) (*parley.Boot, error) { return g.s.Boot(ctx, actor, q) })
}

func (g *Guard) WorkspaceUsers(ctx context.Context, workspaceID string, ids []string) ([]parley.User, error) {
	return call(g, ctx, Boot, func(ctx context.Context) ([]parley.User, error) { return g.s.WorkspaceUsers(ctx, workspaceID, ids) })
}

func (g *Guard) ListThreads(ctx context.Context, actor, workspaceID string, q parley.ThreadQuery) (*parley.ThreadPage, error) {
	return call(g, ctx, History, func(ctx context.Context) (*parley.ThreadPage, error) {
		return g.s.ListThreads(ctx, actor, workspaceID, q)
	})
}

func (g *Guard) FollowThread(ctx context.Context, actor, rootID string) (*parley.Thread, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.Thread, error) { return g.s.FollowThread(ctx, actor, rootID) })
}

func (g *Guard) UnfollowThread(ctx context.Context, actor, rootID string) (*parley.Thread, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.Thread, error) { return g.s.UnfollowThread(ctx, actor, rootID) })
}

func (g *Guard) MarkThreadRead(ctx context.Context, actor, rootID string) (*parley.Thread, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.Thread, error) { return g.s.MarkThreadRead(ctx, actor, rootID) })
}

func (g *Guard) Search(ctx context.Context, actor, workspaceID string, q parley.SearchQuery) (*parley.SearchPage, error) {
	return call(g, ctx, Search, func(ctx context.Context) (*parley.SearchPage, error) { return g.s.Search(ctx, actor, workspaceID, q) })
}

func (g *Guard) LoadLiveConfig(ctx context.Context) (parley.LiveConfig, error) {
	return call(g, ctx, Read, func(ctx context.Context) (parley.LiveConfig, error) { return g.s.LoadLiveConfig(ctx) })
}

func (g *Guard) SaveLiveConfig(ctx context.Context, c parley.LiveConfig) error {
	_, err := call(g, ctx, Write, func(ctx context.Context) (struct{}, error) { return struct{}{}, g.s.SaveLiveConfig(ctx, c) })
	return err
}

// Close closes the guarded store; it is never refused.
func (g *Guard) Close() error { return g.s.Close() }

// purposeOf names each method's purpose (for tests and docs).
var purposeOf = map[string]Purpose{
	"SessionChannels":    Boot,
	"ChannelLog":         Boot,
	"ChannelMember":      Read,
	"CreateUser":         Write,
	"UserCredentials":    Read,
	"CreateSession":      Write,
	"SessionByToken":     Read,
	"RevokeSession":      Write,
	"GetMe":              Read,
	"UpdateMe":           Write,
	"SetStatus":          Write,
	"UsersBatch":         Read,
	"ListWorkspaceUsers": Read,
	"CreateWorkspace":    Write,
	"GetWorkspace":       Read,
	"ListWorkspaces":     Read,
	"CreateInvite":       Write,
	"AcceptInvite":       Write,
	"InvitePreview":      Read,
	"SetMemberRole":      Write,
	// Lifecycle (lifecycle.go). DeletedWorkspaces is a read at start-up.
	"DeactivateUser":         Write,
	"ReactivateUser":         Write,
	"OperatorSetDeactivated": Write,
	"RemoveWorkspaceMember":  Write,
	"TransferOwnership":      Write,
	"DeleteWorkspace":        Write,
	"DeletedWorkspaces":      Read,
	"PurgeWorkspace":         Write,
	"ListChannels":           Read,
	"CreateChannel":          Write,
	"OpenDM":                 Write,
	"GetChannel":             Read,
	"UpdateChannel":          Write,
	"ArchiveChannel":         Write,
	"JoinChannel":            Write,
	"LeaveChannel":           Write,
	"AddMembers":             Write,
	"RemoveMember":           Write,
	"ListMembers":            Read,
	"MarkRead":               Write,
	"PostMessage":            Write,
	"ListMessages":           History,
	"ListReplies":            History,
	"ListPins":               History,
	"GetMessage":             Read,
	"EditMessage":            Write,
	"DeleteMessage":          Write,
	"AddReaction":            Write,
	"RemoveReaction":         Write,
	"Pin":                    Write,
	"Unpin":                  Write,
	"ListEvents":             History,
	"Sync":                   History,
	"ReadDirectory":          Boot,
	"ChannelWorkspace":       Read,
	"Boot":                   Boot,
	"WorkspaceUsers":         Boot,
	"ListThreads":            History,
	"FollowThread":           Write,
	"UnfollowThread":         Write,
	"MarkThreadRead":         Write,
	"Search":                 Search,
	"LoadLiveConfig":         Read,
	"SaveLiveConfig":         Write,
}
