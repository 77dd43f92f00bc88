package querycache

import (
	"context"
	"slices"
	"time"

	"parley"
)

// Loading a workspace. The order is what makes it lossless:
//
//  1. register the workspace as loading, so that the event goroutine
//     buffers its events in pending from now on;
//  2. subscribe to its directory topic and Flush, so that the bus server
//     routes every later event to us;
//  3. read the snapshot from the store (one consistent read);
//  4. under writeMu: merge its users into the node's shared users, apply
//     the buffered events the snapshot does not contain yet (channel events
//     by seq, user versions by updated_at), and mark it ready.
//
// An event committed before the snapshot is in the snapshot; one committed
// after it arrives after the subscription, so it is either buffered or
// applied live.

// maxLoadAttempts bounds the reloads of a workspace whose buffered events
// did not fit its snapshot (see errResync).
const maxLoadAttempts = 3

// load loads the workspace (called through singleflight: once at a time per
// workspace).
func (c *Cache) load(ctx context.Context, workspaceID string) (*workspace, error) {
	for attempt := 1; ; attempt++ {
		w, err := c.loadOnce(ctx, workspaceID, attempt == maxLoadAttempts)
		if err != errResync {
			return w, wrap("load workspace", err)
		}
		c.metrics.resyncs.Inc()
		c.log.Info("reloading workspace: buffered events did not fit the snapshot", "workspace_id", workspaceID, "attempt", attempt)
	}
}

func (c *Cache) loadOnce(ctx context.Context, workspaceID string, last bool) (*workspace, error) {
	c.writeMu.Lock()
	if c.closed {
		c.writeMu.Unlock()
		return nil, errClosed
	}
	c.mu.Lock()
	if w := c.wss[workspaceID]; w != nil && w.ready.Load() {
		c.mu.Unlock()
		c.writeMu.Unlock()
		return w, nil
	}
	w := newWorkspace(workspaceID)
	c.wss[workspaceID] = w
	c.mu.Unlock()
	c.writeMu.Unlock()

	fail := func(err error) (*workspace, error) {
		c.writeMu.Lock()
		c.dropLoadingLocked(w)
		c.writeMu.Unlock()
		return nil, err
	}
	if err := c.mux.Subscribe(parley.TopicDirectory(workspaceID)); err != nil {
		return fail(err)
	}
	if err := c.bus.Flush(); err != nil {
		return fail(err)
	}
	start := time.Now()
	b := &builder{w: w}
	if err := c.store.ReadDirectory(ctx, workspaceID, parley.DirectoryVisitor{
		User: b.user, Channel: b.channel, Member: b.member,
	}); err != nil {
		return fail(err)
	}
	b.finish()

	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.closed {
		c.dropLoadingLocked(w)
		return nil, errClosed
	}
	if err := c.installLocked(w, !last); err != nil {
		c.evictLocked(w, "resync")
		return nil, err
	}
	c.metrics.loaded(time.Since(start))
	c.log.Debug("workspace loaded", "workspace_id", workspaceID, "users", w.live, "channels", len(w.chans),
		"took", time.Since(start))
	return w, nil
}

// dropLoadingLocked forgets a workspace whose load failed. Caller holds
// writeMu.
func (c *Cache) dropLoadingLocked(w *workspace) {
	c.mu.Lock()
	if c.wss[w.id] == w {
		delete(c.wss, w.id)
	}
	c.mu.Unlock()
	if err := c.mux.Unsubscribe(parley.TopicDirectory(w.id)); err != nil {
		c.log.Warn("unsubscribe", "workspace_id", w.id, "err", err)
	}
}

// installLocked shares the loaded users with the node, applies the events
// buffered during the load and makes the workspace ready. With strict, an
// event that does not fit the snapshot fails the install with errResync
// (the caller reloads); otherwise it is skipped. Caller holds writeMu.
func (c *Cache) installLocked(w *workspace, strict bool) error {
	w.mu.Lock()
	for idx, su := range w.users {
		rec := su.rec.Load()
		ex := c.users[rec.id]
		if ex == nil {
			su.refs = 1
			c.users[rec.id] = su
			c.nusers.Add(1)
			continue
		}
		// Another warm workspace holds the user already: share its object,
		// keeping whichever version is newer.
		if cur := ex.rec.Load(); cur.updated >= rec.updated {
			w.users[idx] = ex
			w.rekey(uint32(idx), cur)
		} else {
			ex.rec.Store(rec)
			w.users[idx] = ex
		}
		ex.refs++
	}
	// The workspace holds its references from here on: evicting it (on a
	// resync) releases them.
	w.ready.Store(true)
	pending := w.pending
	w.pending = nil
	var resync bool
	for _, ev := range pending {
		if err := c.applyLocked(w, ev); err == errResync {
			resync = true
		}
	}
	ids := make([]string, 0, len(w.chans))
	for _, ch := range w.chans {
		if ch != nil {
			ids = append(ids, ch.id)
		}
	}
	w.mu.Unlock()
	if resync && strict {
		return errResync
	}
	c.mu.Lock()
	for _, id := range ids {
		c.channels[id] = w
	}
	c.mu.Unlock()
	w.lastUsed.Store(c.now().UnixNano())
	return nil
}

// builder turns the rows of a directory read into a workspace.
type builder struct {
	w      *workspace
	recs   []*userRec
	lastID string   // channel id of the previous membership row
	last   *channel // its channel (nil: unknown)
}

func (b *builder) user(u *parley.User, role parley.Role) {
	if _, dup := b.w.userIdx[u.ID]; dup {
		return
	}
	b.w.userIdx[u.ID] = uint32(len(b.recs))
	b.recs = append(b.recs, newUserRec(u))
	b.w.roles = append(b.w.roles, roleCode(role))
}

func (b *builder) channel(c *parley.Channel) {
	ch := newChannel(c)
	ch.snapSeq = c.LastSeq
	ch.members = make([]uint32, 0, max(c.MemberCount, 0))
	// Share the participants' id strings with the users.
	for i, id := range ch.dmUsers {
		if idx, ok := b.w.userIdx[id]; ok {
			ch.dmUsers[i] = b.recs[idx].id
		}
	}
	b.w.chanIdx[c.ID] = uint32(len(b.w.chans))
	b.w.chans = append(b.w.chans, ch)
}

func (b *builder) member(channelID, userID string) {
	if channelID != b.lastID {
		b.lastID, b.last = channelID, nil
		if ci, ok := b.w.chanIdx[channelID]; ok {
			b.last = b.w.chans[ci]
		}
	}
	if b.last == nil {
		return
	}
	if u, ok := b.w.userIdx[userID]; ok {
		b.last.members = append(b.last.members, u)
	}
}

// finish sorts the memberships, lays out each user's channel list in one
// shared array, and builds the search indexes.
func (b *builder) finish() {
	w := b.w
	n := len(b.recs)
	w.users = make([]*sharedUser, n)
	w.keys = make([]userKey, n)
	for i, rec := range b.recs {
		su := &sharedUser{}
		su.rec.Store(rec)
		w.users[i] = su
		w.keys[i] = rec.key()
	}
	w.live = n
	counts := make([]int32, n)
	total := 0
	for _, ch := range w.chans {
		slices.Sort(ch.members)
		ch.members = slices.Compact(ch.members)
		for _, u := range ch.members {
			counts[u]++
		}
		total += len(ch.members)
	}
	backing := make([]uint32, total)
	w.userChans = make([][]uint32, n)
	off := 0
	for u, k := range counts {
		w.userChans[u] = backing[off : off : off+int(k)]
		off += int(k)
	}
	for ci, ch := range w.chans {
		for _, u := range ch.members {
			w.userChans[u] = append(w.userChans[u], uint32(ci))
		}
	}
	for ci, ch := range w.chans {
		w.syncChannel(uint32(ci))
		if !ch.kind.IsDM() {
			w.named = append(w.named, uint32(ci))
		}
	}
	w.buildIndexes()
}
