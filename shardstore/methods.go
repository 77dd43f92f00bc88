package shardstore

import (
	"context"
	"slices"

	"parley"
	"parley/storeguard"
	"parley/tenantdir"
)

// The parley.Store methods that act in one workspace: each resolves its
// workspace (by id, or from a channel or message id) and runs on that
// shard's guarded store; writes are refused while the workspace is
// read-only.

func (r *Router) onWS(ctx context.Context, ws string) (parley.Store, error) {
	p, _, err := r.route(ctx, ws)
	if err != nil {
		return nil, err
	}
	return p.g, nil
}

func (r *Router) onWSWrite(ctx context.Context, ws string) (parley.Store, error) {
	p, err := r.routeWrite(ctx, ws)
	if err != nil {
		return nil, err
	}
	return p.g, nil
}

func (r *Router) onChannel(ctx context.Context, id string, write bool) (parley.Store, error) {
	p, err := r.routeID(ctx, kindChannel, id, write)
	if err != nil {
		return nil, err
	}
	return p.g, nil
}

func (r *Router) onMessage(ctx context.Context, id string, write bool) (parley.Store, error) {
	p, err := r.routeID(ctx, kindMessage, id, write)
	if err != nil {
		return nil, err
	}
	return p.g, nil
}

// Workspaces.

// CreateWorkspace places the new workspace (the catalogue's policy: the
// least loaded shard of the node's region), copies actor's row there, and
// creates it on that shard. A slug is unique across shards: every shard is
// asked first (for workspaces that predate routing, which the catalogue
// does not know), and the placement reserves it in the control database,
// so that of two creations of one slug racing on two shards one gets 409.
// When the creation fails after the placement, the placement is removed
// (unplace), so the directory never points at a shard without the
// workspace.
func (r *Router) CreateWorkspace(ctx context.Context, actor, name, slug string) (*parley.Workspace, error) {
	if err := parley.ValidateName("name", name); err != nil {
		return nil, err
	}
	if err := parley.ValidateSlug(slug); err != nil {
		return nil, err
	}
	me, err := r.def.g.GetMe(ctx, actor)
	if err != nil {
		return nil, err
	}
	if me.Deactivated { // refused before a placement is made for nothing
		return nil, parley.Errorf(parley.EFORBIDDEN, "your account is deactivated")
	}
	taken, err := each(r, ctx, "slug taken", func(ctx context.Context, p *pool) (bool, error) {
		var t bool
		err := p.g.Run(ctx, storeguard.Read, func(ctx context.Context) (err error) {
			t, err = p.s.SlugTaken(ctx, slug)
			return err
		})
		return t, err
	})
	if err != nil {
		return nil, err
	}
	if slices.Contains(taken, true) {
		return nil, parley.Errorf(parley.ECONFLICT, "slug %q is taken", slug)
	}
	id := parley.NewID(parley.PrefixWorkspace)
	rec, err := r.cfg.Catalogue.Place(ctx, tenantdir.Placement{WorkspaceID: id, Region: r.cfg.Region, Slug: slug})
	if err != nil {
		return nil, err
	}
	p, err := r.poolByID(ctx, rec.ShardID)
	if err != nil {
		// The shard was never reached: nothing to check there.
		r.unplace(rec.ShardID, id, err, false)
		return nil, err
	}
	r.placed.Store(id, rec.ShardID)
	if err := r.ensureUser(ctx, p, actor); err != nil {
		// The workspace itself was not attempted (a user copy, if one
		// was made, is harmless without it).
		r.unplace(rec.ShardID, id, err, false)
		return nil, err
	}
	var w *parley.Workspace
	err = p.g.Run(ctx, storeguard.Write, func(ctx context.Context) (err error) {
		w, err = p.s.CreateWorkspaceWithID(ctx, id, actor, name, slug)
		return err
	})
	if err != nil {
		r.unplace(rec.ShardID, id, err, true)
		return nil, err
	}
	r.m.created.WithLabelValues(p.id).Inc()
	return w, nil
}

func (r *Router) GetWorkspace(ctx context.Context, actor, workspaceID string) (*parley.Workspace, error) {
	s, err := r.onWS(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	return s.GetWorkspace(ctx, actor, workspaceID)
}

func (r *Router) CreateInvite(ctx context.Context, actor, workspaceID string, ip parley.InviteParams) (*parley.Invite, error) {
	s, err := r.onWSWrite(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	return s.CreateInvite(ctx, actor, workspaceID, ip)
}

// inviteWorkspace finds the workspace of an invite code on every shard.
// Codes are secrets: they are not cached.
func (r *Router) inviteWorkspace(ctx context.Context, code string) (string, error) {
	return r.scatterFind(ctx, "invite", func(ctx context.Context, p *pool) (string, error) {
		var ws string
		err := p.g.Run(ctx, storeguard.Read, func(ctx context.Context) (err error) {
			ws, err = p.s.InviteWorkspace(ctx, code)
			return err
		})
		return ws, err
	})
}

func (r *Router) AcceptInvite(ctx context.Context, actor, code string) (*parley.Workspace, error) {
	ws, err := r.inviteWorkspace(ctx, code)
	if err != nil {
		return nil, err
	}
	p, err := r.routeWrite(ctx, ws)
	if err != nil {
		return nil, err
	}
	if _, err := r.def.g.GetMe(ctx, actor); err != nil {
		return nil, err
	}
	if err := r.ensureUser(ctx, p, actor); err != nil {
		return nil, err
	}
	return p.g.AcceptInvite(ctx, actor, code)
}

func (r *Router) InvitePreview(ctx context.Context, code string) (*parley.InvitePreview, error) {
	ws, err := r.inviteWorkspace(ctx, code)
	if err != nil {
		return nil, err
	}
	s, err := r.onWS(ctx, ws)
	if err != nil {
		return nil, err
	}
	return s.InvitePreview(ctx, code)
}

func (r *Router) SetMemberRole(ctx context.Context, actor, workspaceID, userID string, role parley.Role) error {
	s, err := r.onWSWrite(ctx, workspaceID)
	if err != nil {
		return err
	}
	return s.SetMemberRole(ctx, actor, workspaceID, userID, role)
}

// Channels.

func (r *Router) ListChannels(ctx context.Context, actor, workspaceID string, q parley.ChannelQuery) (*parley.ChannelPage, error) {
	s, err := r.onWS(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	return s.ListChannels(ctx, actor, workspaceID, q)
}

func (r *Router) CreateChannel(ctx context.Context, actor, workspaceID string, c parley.NewChannel) (*parley.Channel, error) {
	s, err := r.onWSWrite(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	return s.CreateChannel(ctx, actor, workspaceID, c)
}

func (r *Router) OpenDM(ctx context.Context, actor, workspaceID string, userIDs []string) (*parley.Channel, bool, error) {
	s, err := r.onWSWrite(ctx, workspaceID)
	if err != nil {
		return nil, false, err
	}
	return s.OpenDM(ctx, actor, workspaceID, userIDs)
}

func (r *Router) GetChannel(ctx context.Context, actor, channelID string) (*parley.Channel, error) {
	s, err := r.onChannel(ctx, channelID, false)
	if err != nil {
		return nil, err
	}
	return s.GetChannel(ctx, actor, channelID)
}

func (r *Router) UpdateChannel(ctx context.Context, actor, channelID string, p parley.ChannelPatch) (*parley.Channel, error) {
	s, err := r.onChannel(ctx, channelID, true)
	if err != nil {
		return nil, err
	}
	return s.UpdateChannel(ctx, actor, channelID, p)
}

func (r *Router) ArchiveChannel(ctx context.Context, actor, channelID string) (*parley.Channel, error) {
	s, err := r.onChannel(ctx, channelID, true)
	if err != nil {
		return nil, err
	}
	return s.ArchiveChannel(ctx, actor, channelID)
}

func (r *Router) JoinChannel(ctx context.Context, actor, channelID string) (*parley.Channel, error) {
	s, err := r.onChannel(ctx, channelID, true)
	if err != nil {
		return nil, err
	}
	return s.JoinChannel(ctx, actor, channelID)
}

func (r *Router) LeaveChannel(ctx context.Context, actor, channelID string) error {
	s, err := r.onChannel(ctx, channelID, true)
	if err != nil {
		return err
	}
	return s.LeaveChannel(ctx, actor, channelID)
}

func (r *Router) AddMembers(ctx context.Context, actor, channelID string, userIDs []string) (*parley.Channel, error) {
	s, err := r.onChannel(ctx, channelID, true)
	if err != nil {
		return nil, err
	}
	return s.AddMembers(ctx, actor, channelID, userIDs)
}

func (r *Router) RemoveMember(ctx context.Context, actor, channelID, userID string) error {
	s, err := r.onChannel(ctx, channelID, true)
	if err != nil {
		return err
	}
	return s.RemoveMember(ctx, actor, channelID, userID)
}

func (r *Router) ListMembers(ctx context.Context, actor, channelID, cursor string, limit int) (*parley.MemberPage, error) {
	s, err := r.onChannel(ctx, channelID, false)
	if err != nil {
		return nil, err
	}
	return s.ListMembers(ctx, actor, channelID, cursor, limit)
}

func (r *Router) MarkRead(ctx context.Context, actor, channelID string, seq int64) (*parley.ReadState, error) {
	s, err := r.onChannel(ctx, channelID, true)
	if err != nil {
		return nil, err
	}
	return s.MarkRead(ctx, actor, channelID, seq)
}

// Messages.

func (r *Router) PostMessage(ctx context.Context, actor, channelID string, m parley.NewMessage) (*parley.Message, bool, error) {
	s, err := r.onChannel(ctx, channelID, true)
	if err != nil {
		return nil, false, err
	}
	return s.PostMessage(ctx, actor, channelID, m)
}

func (r *Router) ListMessages(ctx context.Context, actor, channelID string, q parley.HistoryQuery) (*parley.MessagePage, error) {
	s, err := r.onChannel(ctx, channelID, false)
	if err != nil {
		return nil, err
	}
	return s.ListMessages(ctx, actor, channelID, q)
}

func (r *Router) ListReplies(ctx context.Context, actor, rootID string, afterSeq int64, limit int) (*parley.MessagePage, error) {
	s, err := r.onMessage(ctx, rootID, false)
	if err != nil {
		return nil, err
	}
	return s.ListReplies(ctx, actor, rootID, afterSeq, limit)
}

func (r *Router) ListPins(ctx context.Context, actor, channelID string) (*parley.MessagePage, error) {
	s, err := r.onChannel(ctx, channelID, false)
	if err != nil {
		return nil, err
	}
	return s.ListPins(ctx, actor, channelID)
}

func (r *Router) GetMessage(ctx context.Context, actor, messageID string) (*parley.Message, error) {
	s, err := r.onMessage(ctx, messageID, false)
	if err != nil {
		return nil, err
	}
	return s.GetMessage(ctx, actor, messageID)
}

func (r *Router) EditMessage(ctx context.Context, actor, messageID, text string) (*parley.Message, error) {
	s, err := r.onMessage(ctx, messageID, true)
	if err != nil {
		return nil, err
	}
	return s.EditMessage(ctx, actor, messageID, text)
}

func (r *Router) DeleteMessage(ctx context.Context, actor, messageID string) error {
	s, err := r.onMessage(ctx, messageID, true)
	if err != nil {
		return err
	}
	return s.DeleteMessage(ctx, actor, messageID)
}

func (r *Router) AddReaction(ctx context.Context, actor, messageID, emoji string) (*parley.Message, error) {
	s, err := r.onMessage(ctx, messageID, true)
	if err != nil {
		return nil, err
	}
	return s.AddReaction(ctx, actor, messageID, emoji)
}

func (r *Router) RemoveReaction(ctx context.Context, actor, messageID, emoji string) (*parley.Message, error) {
	s, err := r.onMessage(ctx, messageID, true)
	if err != nil {
		return nil, err
	}
	return s.RemoveReaction(ctx, actor, messageID, emoji)
}

func (r *Router) Pin(ctx context.Context, actor, messageID string) (*parley.Message, error) {
	s, err := r.onMessage(ctx, messageID, true)
	if err != nil {
		return nil, err
	}
	return s.Pin(ctx, actor, messageID)
}

func (r *Router) Unpin(ctx context.Context, actor, messageID string) (*parley.Message, error) {
	s, err := r.onMessage(ctx, messageID, true)
	if err != nil {
		return nil, err
	}
	return s.Unpin(ctx, actor, messageID)
}

// Events.

func (r *Router) ListEvents(ctx context.Context, actor, channelID string, afterSeq int64, limit int) (*parley.EventPage, error) {
	s, err := r.onChannel(ctx, channelID, false)
	if err != nil {
		return nil, err
	}
	return s.ListEvents(ctx, actor, channelID, afterSeq, limit)
}

// Sync splits the channels by shard, asks each shard for its own, and
// merges. A channel no shard has is not_found; the channels of a shard
// that does not answer are unavailable, the others are answered.
func (r *Router) Sync(ctx context.Context, actor string, channels map[string]int64) (map[string]parley.SyncResult, error) {
	if err := parley.ValidateSync(channels); err != nil {
		return nil, err
	}
	out := make(map[string]parley.SyncResult, len(channels))
	byShard := map[*pool]map[string]int64{}
	for id, seq := range channels {
		p, err := r.routeID(ctx, kindChannel, id, false)
		if err != nil {
			code := parley.ErrorCode(err)
			if code == parley.EINTERNAL {
				code = parley.EUNAVAILABLE
			}
			out[id] = parley.SyncResult{Error: code}
			continue
		}
		if byShard[p] == nil {
			byShard[p] = map[string]int64{}
		}
		byShard[p][id] = seq
	}
	type part struct {
		want map[string]int64
		got  map[string]parley.SyncResult
		err  error
	}
	parts := make(chan part, len(byShard))
	for p, want := range byShard {
		go func() {
			got, err := p.g.Sync(ctx, actor, want)
			parts <- part{want, got, err}
		}()
	}
	for range byShard {
		pt := <-parts
		if pt.err != nil {
			if c := parley.ErrorCode(pt.err); c == parley.EINVALID {
				return nil, pt.err
			}
			for id := range pt.want {
				out[id] = parley.SyncResult{Error: parley.EUNAVAILABLE}
			}
			continue
		}
		for id, res := range pt.got {
			out[id] = res
		}
	}
	return out, nil
}

// Gateway.

func (r *Router) SessionChannels(ctx context.Context, userID, workspaceID string) ([]parley.ChannelRef, error) {
	s, err := r.onWS(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	return s.SessionChannels(ctx, userID, workspaceID)
}

func (r *Router) ChannelLog(ctx context.Context, channelID string, afterSeq int64, limit int) ([]parley.Event, error) {
	s, err := r.onChannel(ctx, channelID, false)
	if err != nil {
		return nil, err
	}
	return s.ChannelLog(ctx, channelID, afterSeq, limit)
}

func (r *Router) ChannelMember(ctx context.Context, userID, channelID string) (bool, error) {
	s, err := r.onChannel(ctx, channelID, false)
	if parley.ErrorCode(err) == parley.ENOTFOUND {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return s.ChannelMember(ctx, userID, channelID)
}

// Directory and boot.

func (r *Router) ReadDirectory(ctx context.Context, workspaceID string, v parley.DirectoryVisitor) error {
	s, err := r.onWS(ctx, workspaceID)
	if err != nil {
		return err
	}
	return s.ReadDirectory(ctx, workspaceID, v)
}

func (r *Router) ChannelWorkspace(ctx context.Context, channelID string) (string, error) {
	return r.workspaceOf(ctx, kindChannel, channelID)
}

func (r *Router) Boot(ctx context.Context, actor string, q parley.BootQuery) (*parley.Boot, error) {
	s, err := r.onWS(ctx, q.WorkspaceID)
	if err != nil {
		return nil, err
	}
	return s.Boot(ctx, actor, q)
}

func (r *Router) WorkspaceUsers(ctx context.Context, workspaceID string, ids []string) ([]parley.User, error) {
	s, err := r.onWS(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	return s.WorkspaceUsers(ctx, workspaceID, ids)
}

// Threads and search.

func (r *Router) ListThreads(ctx context.Context, actor, workspaceID string, q parley.ThreadQuery) (*parley.ThreadPage, error) {
	s, err := r.onWS(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	return s.ListThreads(ctx, actor, workspaceID, q)
}

func (r *Router) FollowThread(ctx context.Context, actor, rootID string) (*parley.Thread, error) {
	s, err := r.onMessage(ctx, rootID, true)
	if err != nil {
		return nil, err
	}
	return s.FollowThread(ctx, actor, rootID)
}

func (r *Router) UnfollowThread(ctx context.Context, actor, rootID string) (*parley.Thread, error) {
	s, err := r.onMessage(ctx, rootID, true)
	if err != nil {
		return nil, err
	}
	return s.UnfollowThread(ctx, actor, rootID)
}

func (r *Router) MarkThreadRead(ctx context.Context, actor, rootID string) (*parley.Thread, error) {
	s, err := r.onMessage(ctx, rootID, true)
	if err != nil {
		return nil, err
	}
	return s.MarkThreadRead(ctx, actor, rootID)
}

func (r *Router) Search(ctx context.Context, actor, workspaceID string, q parley.SearchQuery) (*parley.SearchPage, error) {
	s, err := r.onWS(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	return s.Search(ctx, actor, workspaceID, q)
}

// Settings: the control database's.

func (r *Router) LoadLiveConfig(ctx context.Context) (parley.LiveConfig, error) {
	return r.def.g.LoadLiveConfig(ctx)
}

func (r *Router) SaveLiveConfig(ctx context.Context, c parley.LiveConfig) error {
	return r.def.g.SaveLiveConfig(ctx, c)
}

// Lifecycle (deactivation is in users.go).

func (r *Router) RemoveWorkspaceMember(ctx context.Context, actor, workspaceID, userID string) error {
	s, err := r.onWSWrite(ctx, workspaceID)
	if err != nil {
		return err
	}
	return s.RemoveWorkspaceMember(ctx, actor, workspaceID, userID)
}

func (r *Router) TransferOwnership(ctx context.Context, actor, workspaceID, userID string) error {
	s, err := r.onWSWrite(ctx, workspaceID)
	if err != nil {
		return err
	}
	return s.TransferOwnership(ctx, actor, workspaceID, userID)
}

func (r *Router) DeleteWorkspace(ctx context.Context, actor, workspaceID, confirm string) error {
	s, err := r.onWSWrite(ctx, workspaceID)
	if err != nil {
		return err
	}
	if err := s.DeleteWorkspace(ctx, actor, workspaceID, confirm); err != nil {
		return err
	}
	// The deletion succeeded, so confirm is the workspace's slug, which
	// the store freed on its shard: free the catalogue's reservation too.
	r.freeSlug(workspaceID, confirm)
	return nil
}

// DeletedWorkspaces merges every shard's list. When a shard does not
// answer it returns the others' ids with an EUNAVAILABLE error, so that a
// caller cannot take the list for whole (purge.Resume lists again later).
func (r *Router) DeletedWorkspaces(ctx context.Context) ([]string, error) {
	parts, failed, err := eachPartial(r, ctx, "deleted workspaces", func(ctx context.Context, p *pool) ([]string, error) {
		return p.g.DeletedWorkspaces(ctx)
	})
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, part := range parts {
		for _, id := range part {
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	if len(failed) > 0 {
		// The ids listed, and an error saying the list is not whole: the
		// purger starts these and lists again later (purge.Resume).
		return out, parley.Errorf(parley.EUNAVAILABLE, "deleted workspaces of shards %v not listed", failed)
	}
	return out, nil
}

// PurgeWorkspace runs on the workspace's shard; once the shard holds
// nothing of it, its directory entry goes too (unplacePurged), so that a
// purged workspace is not_found everywhere, as in a single database. A
// purge resumed after a restart ends the same way: its last call finds the
// shard empty. A workspace the directory does not know has no entry.
func (r *Router) PurgeWorkspace(ctx context.Context, workspaceID string, batch int) (bool, error) {
	p, rec, err := r.route(ctx, workspaceID)
	if err != nil {
		return false, err
	}
	if err := WriteAllowed(rec); err != nil {
		r.m.readOnly.Inc()
		return false, err
	}
	done, err := p.g.PurgeWorkspace(ctx, workspaceID, batch)
	if err != nil || !done {
		return done, err
	}
	if rec.WorkspaceID != "" {
		r.unplacePurged(p.id, workspaceID)
	}
	return true, nil
}
