package querycache

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"parley"
)

// Applying directory events. They arrive on the Mux's one goroutine, in bus
// order per workspace topic. Each is applied under writeMu and the
// workspace's write lock; events of a workspace still loading are buffered.

// errResync says that an event does not fit the cache's copy (a membership
// change that arrived after a later one, a channel or user it has never
// heard of): the copy can no longer be trusted and the workspace is
// reloaded from the store.
var errResync = errors.New("directory event does not fit the cached workspace")

// onEvent is the Mux's handler.
func (c *Cache) onEvent(ev parley.Event) {
	if len(ev.Topics) == 0 {
		return
	}
	wsID, ok := strings.CutPrefix(ev.Topics[0], parley.TopicDirectory(""))
	if !ok {
		return
	}
	c.metrics.eventCount.Add(1)
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.RLock()
	w := c.wss[wsID]
	c.mu.RUnlock()
	switch {
	case w == nil:
		return // evicted, or a message left over from an old subscription
	case ev.Type == parley.EventWorkspaceDeleted:
		c.evictLocked(w, "deleted")
		return
	case !w.ready.Load():
		w.pending = append(w.pending, ev)
		return
	}
	w.mu.Lock()
	err := c.applyLocked(w, ev)
	w.mu.Unlock()
	if err == errResync {
		c.metrics.resyncs.Inc()
		c.log.Info("evicting workspace: event does not fit", "workspace_id", wsID, "type", ev.Type,
			"channel_id", ev.ChannelID, "seq", ev.Seq)
		c.evictLocked(w, "resync")
	} else if err != nil {
		c.log.Warn("directory event not applied", "workspace_id", wsID, "type", ev.Type, "err", err)
	}
}

// applyLocked applies one event to w. Caller holds writeMu and w.mu.
func (c *Cache) applyLocked(w *workspace, ev parley.Event) error {
	switch ev.Type {
	case parley.EventUserCreated, parley.EventUserUpdated, parley.EventUserStatus, parley.EventUserDeactivated:
		var d parley.UserEventData
		if err := json.Unmarshal(ev.Data, &d); err != nil || d.User == nil {
			return errors.Join(errors.New("bad user event"), err)
		}
		if ev.Type == parley.EventUserDeactivated {
			d.User.Deactivated = true
		}
		c.applyUserLocked(w, d.User)
		return nil

	case parley.EventWorkspaceMemberJoined, parley.EventWorkspaceMemberLeft, parley.EventWorkspaceMemberUpdated:
		var d parley.WorkspaceMemberData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		return c.applyWorkspaceMemberLocked(w, ev.Type, &d)

	case parley.EventChannelCreated, parley.EventChannelUpdated, parley.EventChannelArchived, parley.EventChannelDeleted:
		var d parley.ChannelEventData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		return c.applyChannelLocked(w, ev, &d)

	case parley.EventMemberJoined, parley.EventMemberLeft:
		var d parley.MemberEventData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		return applyMemberLocked(w, ev, &d)
	}
	return nil // workspace.updated and anything new: nothing the cache keeps
}

// applyUserLocked stores a newer version of a user for the whole node and
// re-indexes it in w.
func (c *Cache) applyUserLocked(w *workspace, u *parley.User) {
	rec := newUserRec(u)
	su := c.users[rec.id]
	if su == nil {
		return // in no warm workspace: nothing to keep
	}
	if cur := su.rec.Load(); rec.updated > cur.updated || (rec.updated == cur.updated && rec.deactivated && !cur.deactivated) {
		su.rec.Store(rec)
	}
	// Every workspace re-indexes the user when its own copy of the event
	// arrives; the shared record may have been updated by another's.
	if idx, ok := w.actor(rec.id); ok {
		w.rekey(idx, su.rec.Load())
	}
}

// applyWorkspaceMemberLocked adds, removes or re-roles a member.
func (c *Cache) applyWorkspaceMemberLocked(w *workspace, typ string, d *parley.WorkspaceMemberData) error {
	idx, present := w.actor(d.UserID)
	switch typ {
	case parley.EventWorkspaceMemberLeft:
		if present {
			su := w.users[idx]
			w.removeUser(idx)
			c.releaseLocked(su)
		}
		return nil
	case parley.EventWorkspaceMemberUpdated:
		if !present {
			return errResync
		}
		w.roles[idx] = roleCode(d.Role)
		return nil
	}
	if present {
		w.roles[idx] = roleCode(d.Role)
		if d.User != nil {
			c.applyUserLocked(w, d.User)
		}
		return nil
	}
	if d.User == nil {
		return errResync
	}
	rec := newUserRec(d.User)
	su := c.users[rec.id]
	if su == nil {
		su = &sharedUser{}
		su.rec.Store(rec)
		c.users[rec.id] = su
		c.nusers.Add(1)
	} else if cur := su.rec.Load(); rec.updated > cur.updated {
		su.rec.Store(rec)
	}
	su.refs++
	if old, ok := w.userIdx[rec.id]; ok && w.users[old] == nil {
		delete(w.userIdx, rec.id) // came back: a fresh index
	}
	w.addUser(su, d.Role)
	// The channels joined with the workspace (#general) have no
	// member.joined of their own. A join the cache cannot place (a channel
	// it does not know, or one that changed since) reloads the workspace.
	for _, jc := range d.Channels {
		ci, known := w.chanIdx[jc.ChannelID]
		u, ok := w.actor(d.UserID)
		if !known || !ok {
			return errResync
		}
		ch := w.chans[ci]
		if jc.LastSeq < ch.lastSeq {
			return errResync
		}
		w.addMember(ci, u)
		ch.memberCount = jc.MemberCount
	}
	return nil
}

// applyChannelLocked creates, updates, archives or deletes a channel.
// Channel events carry the whole channel; one older than what the cache has
// (by seq) changes nothing.
func (c *Cache) applyChannelLocked(w *workspace, ev parley.Event, d *parley.ChannelEventData) error {
	ci, known := w.chanIdx[d.ChannelID]
	if ev.Type == parley.EventChannelDeleted {
		if known {
			w.removeChannel(ci)
			c.mu.Lock()
			delete(c.channels, d.ChannelID)
			c.mu.Unlock()
		}
		return nil
	}
	if d.Channel == nil {
		return errResync
	}
	if !known {
		if ev.Type != parley.EventChannelCreated {
			return errResync
		}
		ch := newChannel(d.Channel)
		ch.lastSeq = ev.Seq
		// channel.created comes before the first members' rows, which get
		// no member.joined: they are the DM's participants, or the creator.
		first := ch.dmUsers
		if !ch.kind.IsDM() {
			first = []string{ch.createdBy}
		}
		for _, id := range first {
			idx, ok := w.actor(id)
			if !ok {
				return errResync
			}
			ch.members = append(ch.members, idx)
		}
		if int64(len(ch.members)) != ch.memberCount {
			return errResync
		}
		ch.members = sortedUnique(ch.members)
		w.addChannel(ch)
		if w.ready.Load() {
			c.mu.Lock()
			c.channels[ch.id] = w
			c.mu.Unlock()
		}
		return nil
	}
	ch := w.chans[ci]
	if ev.Seq <= ch.lastSeq {
		return nil // in the snapshot already, or overtaken by a later event
	}
	ch.set(d.Channel)
	ch.lastSeq = ev.Seq
	w.syncChannel(ci)
	return nil
}

// applyMemberLocked applies member.joined or member.left. Membership
// changes do not commute, so one that arrives after a later event of its
// channel (possible on PostgreSQL, where concurrent transactions may
// publish out of order) makes the workspace reload.
func applyMemberLocked(w *workspace, ev parley.Event, d *parley.MemberEventData) error {
	ci, known := w.chanIdx[d.ChannelID]
	if !known {
		return errResync
	}
	ch := w.chans[ci]
	switch {
	case ev.Seq <= ch.snapSeq:
		return nil // in the snapshot
	case ev.Seq <= ch.lastSeq:
		return errResync
	}
	u, ok := w.actor(d.UserID)
	if !ok {
		return errResync
	}
	if ev.Type == parley.EventMemberJoined {
		w.addMember(ci, u)
	} else {
		w.removeMember(ci, u)
	}
	ch.memberCount = d.MemberCount
	ch.lastSeq = ev.Seq
	ch.updated = max(ch.updated, ev.CreatedAt.UnixMicro())
	return nil
}

func sortedUnique(s []uint32) []uint32 {
	slices.Sort(s)
	return slices.Compact(s)
}
