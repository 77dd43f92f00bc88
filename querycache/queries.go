package querycache

import (
	"context"
	"encoding/base64"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"sync"

	"parley"
)

// The queries. Each acquires its workspace (loading it on first use), then
// answers from memory under the workspace's read lock.

// Switcher is the quick switcher: the channels actor can see and the active
// users of the workspace that match q, each list best first and at most
// limit long (parley.ClampLimit). A q starting with '#' looks for channels
// only, one starting with '@' for people only. DMs are found through their
// people.
func (c *Cache) Switcher(ctx context.Context, actor, workspaceID, q string, limit int) (*parley.SwitcherResult, error) {
	c.metrics.queries.WithLabelValues("switcher").Inc()
	w, err := c.acquire(ctx, workspaceID)
	if err != nil {
		return nil, notFoundAs(err, wsNotFound)
	}
	raw := strings.TrimSpace(q)
	fq := parley.FoldQuery(raw)
	k := parley.ClampLimit(limit)
	now := c.now()
	res := &parley.SwitcherResult{Channels: []parley.Channel{}, Users: []parley.User{}}

	w.mu.RLock()
	defer w.mu.RUnlock()
	a, ok := w.actor(actor)
	if !ok {
		return nil, wsNotFound()
	}
	if !strings.HasPrefix(raw, "@") {
		for _, h := range w.searchChannels(a, fq, k) {
			res.Channels = append(res.Channels, w.chans[h.ci].channel(w.id, h.member))
		}
	}
	if !strings.HasPrefix(raw, "#") {
		for _, h := range w.searchUsers(fq, k, w.dmPartners(a)) {
			res.Users = append(res.Users, w.users[h.idx].rec.Load().user(now))
		}
	}
	return res, nil
}

// searchChannels returns the best k public and private channels for user a
// and q: not archived, visible to a, matching.
func (w *workspace) searchChannels(a uint32, q string, k int) []chanHit {
	qmask := maskOf(q)
	guest := w.role(a) == parley.RoleGuest
	own := w.userChans[a]
	top := topK[chanHit]{k: k, before: (*chanHit).before}
	need := qmask | listedBit
	for _, ci := range w.named {
		if w.chanMasks[ci]&need != need {
			continue
		}
		ch := w.chans[ci]
		tier, ok := matchChannel(ch.name, ch.mask, q, qmask)
		if !ok {
			continue
		}
		_, member := slices.BinarySearch(own, ci)
		if !member && (ch.kind != parley.KindPublic || guest) {
			continue
		}
		top.add(chanHit{ci: ci, tier: tier, member: member, act: ch.updated, name: ch.name})
	}
	return top.items
}

// dmPartners is the set of people user a has a DM or group DM with, each
// with the last activity of their most recent one.
func (w *workspace) dmPartners(a uint32) prefSet {
	p := prefSet{small: true}
	for _, ci := range w.userChans[a] {
		ch := w.chans[ci]
		if ch == nil || !ch.kind.IsDM() {
			continue
		}
		for _, u := range ch.members {
			if u == a {
				continue
			}
			if p.act == nil {
				p.act = map[uint32]int64{}
			}
			if t, seen := p.act[u]; !seen || ch.updated > t {
				p.act[u] = ch.updated
			}
		}
	}
	for u := range p.act {
		p.ids = append(p.ids, u)
	}
	slices.Sort(p.ids)
	return p
}

// MentionSuggestions offers the active users of the channel's workspace
// that match q after an "@", the channel's members first, each marked with
// whether they are in the channel. The channel must be visible to actor.
func (c *Cache) MentionSuggestions(ctx context.Context, actor, channelID, q string, limit int) ([]parley.MentionSuggestion, error) {
	c.metrics.queries.WithLabelValues("mentions").Inc()
	w, ci, err := c.visibleChannel(ctx, actor, channelID)
	if err != nil {
		return nil, err
	}
	defer w.mu.RUnlock()
	now := c.now()
	ch := w.chans[ci]
	pref := prefSet{ids: ch.members, small: len(ch.members) <= smallPref}
	hits := w.searchUsers(parley.FoldQuery(q), parley.ClampLimit(limit), pref)
	out := make([]parley.MentionSuggestion, len(hits))
	for i, h := range hits {
		out[i] = parley.MentionSuggestion{User: w.users[h.idx].rec.Load().user(now), InChannel: h.pref}
	}
	return out, nil
}

// visibleChannel finds the channel's workspace and checks that actor may
// see the channel; it returns with the workspace read-locked (the caller
// unlocks).
func (c *Cache) visibleChannel(ctx context.Context, actor, channelID string) (*workspace, uint32, error) {
	w, err := c.channelWorkspace(ctx, channelID)
	if err != nil {
		return nil, 0, notFoundAs(err, chNotFound)
	}
	w.mu.RLock()
	a, ok := w.actor(actor)
	ci, known := w.chanIdx[channelID]
	if !ok || !known || !w.canSee(ci, a) {
		w.mu.RUnlock()
		return nil, 0, chNotFound()
	}
	return w, ci, nil
}

// CanRead authorizes a read of a channel's history and events by actor with
// the store's rule: nil, or ENOTFOUND for a channel of another workspace, a
// private channel actor is not in, or a public one a guest is not in.
func (c *Cache) CanRead(ctx context.Context, actor, channelID string) error {
	w, _, err := c.visibleChannel(ctx, actor, channelID)
	if err != nil {
		return err
	}
	w.mu.RUnlock()
	return nil
}

// ChannelHeader is what a channel's header bar shows.
func (c *Cache) ChannelHeader(ctx context.Context, actor, channelID string) (*parley.ChannelHeader, error) {
	c.metrics.queries.WithLabelValues("header").Inc()
	w, ci, err := c.visibleChannel(ctx, actor, channelID)
	if err != nil {
		return nil, err
	}
	defer w.mu.RUnlock()
	now := c.now()
	a, _ := w.actor(actor)
	ch := w.chans[ci]
	h := &parley.ChannelHeader{
		Channel:        ch.channel(w.id, w.isMember(ci, a)),
		MemberCount:    ch.memberCount,
		Topic:          ch.topic,
		Purpose:        ch.purpose,
		MembersPreview: []parley.User{},
	}
	for _, u := range w.preview(ch, parley.MembersPreviewSize) {
		h.MembersPreview = append(h.MembersPreview, w.users[u].rec.Load().user(now))
	}
	return h, nil
}

// preview returns up to n active members of ch, by handle.
func (w *workspace) preview(ch *channel, n int) []uint32 {
	active := func(u uint32) bool { return w.users[u] != nil && !w.users[u].rec.Load().deactivated }
	var out []uint32
	if len(ch.members) <= 4*smallPref {
		for _, u := range ch.members {
			if active(u) {
				out = append(out, u)
			}
		}
		slices.SortFunc(out, func(a, b uint32) int { return strings.Compare(w.keys[a].handle, w.keys[b].handle) })
		return out[:min(n, len(out))]
	}
	// A big channel: walk everyone by handle until n members turn up.
	for _, u := range w.byHandle {
		if len(out) == n {
			break
		}
		if _, in := slices.BinarySearch(ch.members, u); in && active(u) {
			out = append(out, u)
		}
	}
	return out
}

// Directory pages a workspace's users by handle, as the store's
// ListWorkspaceUsers does (same filter, order and cursors): q matches a
// prefix of the handle, of the name or of a word of the name; deactivated
// users are left out unless uq.IncludeDeactivated.
func (c *Cache) Directory(ctx context.Context, actor, workspaceID string, uq parley.UserQuery) (*parley.UserPage, error) {
	c.metrics.queries.WithLabelValues("directory").Inc()
	after, err := decodeCursor(uq.Cursor)
	if err != nil {
		return nil, err
	}
	w, err := c.acquire(ctx, workspaceID)
	if err != nil {
		return nil, notFoundAs(err, wsNotFound)
	}
	limit := parley.ClampLimit(uq.Limit)
	term := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(uq.Q), "@"))
	now := c.now()

	w.mu.RLock()
	defer w.mu.RUnlock()
	if _, ok := w.actor(actor); !ok {
		return nil, wsNotFound()
	}
	// Deactivated users are skipped unless asked for: page on until
	// limit+1 are found or the index is exhausted.
	var idxs []uint32
	for cur := after; ; {
		want := limit + 1 - len(idxs)
		got := w.directoryPage(term, cur, want)
		for _, u := range got {
			if uq.IncludeDeactivated || !w.users[u].rec.Load().deactivated {
				idxs = append(idxs, u)
			}
		}
		if len(got) < want || len(idxs) > limit {
			break
		}
		cur = w.keys[got[len(got)-1]].handle
	}
	page := &parley.UserPage{Users: make([]parley.User, 0, min(len(idxs), limit))}
	for _, u := range idxs[:min(len(idxs), limit)] {
		page.Users = append(page.Users, w.users[u].rec.Load().user(now))
	}
	if len(idxs) > limit {
		page.NextCursor = encodeCursor(page.Users[limit-1].Handle)
	}
	return page, nil
}

// directoryPage returns up to n users matching term whose handle is after
// the cursor key, by handle. The matches are the users of a range of the
// handle index and those of a range of the name-word index; their handle
// positions are marked in a bitset, which is then read in order from the
// cursor: no sorting, no string comparisons, and work in proportion to the
// matches rather than to the workspace.
func (w *workspace) directoryPage(term, after string, n int) []uint32 {
	start := w.handleLB(after)
	if after != "" && start < len(w.byHandle) && w.keys[w.byHandle[start]].handle == after {
		start++
	}
	if term == "" {
		return slices.Clone(w.byHandle[start:min(start+n, len(w.byHandle))])
	}
	hlo := w.handleLB(term)
	hhi := hlo + sort.Search(len(w.byHandle)-hlo, func(j int) bool {
		return !strings.HasPrefix(w.keys[w.byHandle[hlo+j]].handle, term)
	})
	nlo := w.nameLB(term)
	nhi := nlo + sort.Search(len(w.byName)-nlo, func(j int) bool {
		return !strings.HasPrefix(w.nameKey(w.byName[nlo+j]), term)
	})
	if hlo == hhi && nlo == nhi {
		return nil
	}
	bp := bitsets.Get().(*[]uint64)
	defer bitsets.Put(bp)
	words := (len(w.byHandle) + 63) / 64
	if cap(*bp) < words {
		*bp = make([]uint64, words)
	}
	set := (*bp)[:words]
	clear(set)
	for p := max(hlo, start); p < hhi; p++ {
		set[p/64] |= 1 << (p % 64)
	}
	for _, r := range w.byName[nlo:nhi] {
		if p := int(w.pos[r.idx]); p >= start {
			set[p/64] |= 1 << (p % 64)
		}
	}
	var out []uint32
	for wi := start / 64; wi < len(set) && len(out) < n; wi++ {
		for b := set[wi]; b != 0 && len(out) < n; b &= b - 1 {
			out = append(out, w.byHandle[wi*64+bits.TrailingZeros64(b)])
		}
	}
	return out
}

// bitsets recycles directoryPage's bitsets.
var bitsets = sync.Pool{New: func() any { return new([]uint64) }}

// Users returns the users of the workspace among ids (missing ones left
// out), in the order of ids: for the servers' own use (boot, the gateway's
// just-in-time users), without an actor to authorise.
func (c *Cache) Users(ctx context.Context, workspaceID string, ids []string) ([]parley.User, error) {
	c.metrics.queries.WithLabelValues("users").Inc()
	w, err := c.acquire(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	now := c.now()
	w.mu.RLock()
	defer w.mu.RUnlock()
	out := make([]parley.User, 0, len(ids))
	for _, id := range dedupe(ids) {
		if u, ok := w.actor(id); ok {
			out = append(out, w.users[u].rec.Load().user(now))
		}
	}
	return out, nil
}

// UsersByHandle returns the users of the workspace with these handles
// (handles that name nobody in it left out), in the order given: for the
// gateway's just-in-time users of @mentions.
func (c *Cache) UsersByHandle(ctx context.Context, workspaceID string, handles []string) ([]parley.User, error) {
	c.metrics.queries.WithLabelValues("users").Inc()
	w, err := c.acquire(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	now := c.now()
	w.mu.RLock()
	defer w.mu.RUnlock()
	out := make([]parley.User, 0, len(handles))
	for _, h := range dedupe(handles) {
		if i := w.handleLB(h); i < len(w.byHandle) && w.keys[w.byHandle[i]].handle == h {
			out = append(out, w.users[w.byHandle[i]].rec.Load().user(now))
		}
	}
	return out, nil
}

// UsersBatch returns the users among ids who share a workspace with actor
// (actor always), in the order of ids, as the store's UsersBatch does. It
// answers from the warm workspaces that actor is in; only ids none of them
// has go to the store.
func (c *Cache) UsersBatch(ctx context.Context, actor string, ids []string) ([]parley.User, error) {
	c.metrics.queries.WithLabelValues("batch").Inc()
	if len(ids) > parley.MaxBatchUsers {
		return nil, parley.Errorf(parley.EINVALID, "at most %d user ids per batch", parley.MaxBatchUsers)
	}
	uniq := dedupe(ids)
	found := make(map[string]parley.User, len(uniq))
	now := c.now()
	c.mu.RLock()
	wss := make([]*workspace, 0, len(c.wss))
	for _, w := range c.wss {
		if w.ready.Load() {
			wss = append(wss, w)
		}
	}
	c.mu.RUnlock()
	for _, w := range wss {
		if len(found) == len(uniq) {
			break
		}
		w.mu.RLock()
		if _, in := w.actor(actor); in {
			w.touch(now)
			for _, id := range uniq {
				if _, done := found[id]; done {
					continue
				}
				if u, ok := w.actor(id); ok {
					found[id] = w.users[u].rec.Load().user(now)
				}
			}
		}
		w.mu.RUnlock()
	}
	var missing []string
	for _, id := range uniq {
		if _, ok := found[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		more, err := c.store.UsersBatch(ctx, actor, missing)
		if err != nil {
			return nil, err
		}
		for _, u := range more {
			found[u.ID] = u
		}
	}
	out := make([]parley.User, 0, len(found))
	for _, id := range uniq {
		if u, ok := found[id]; ok {
			out = append(out, u)
		}
	}
	return out, nil
}

// dedupe drops empty and repeated ids, keeping the first of each.
func dedupe(ids []string) []string {
	seen := make(map[string]struct{}, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if _, dup := seen[id]; id == "" || dup {
			continue
		}
		seen[id] = struct{}{}
		out = append(out, id)
	}
	return out
}

// notFoundAs turns a not-found from loading (an unknown workspace or
// channel) into the query's own not-found answer.
func notFoundAs(err error, nf func() error) error {
	if parley.ErrorCode(err) == parley.ENOTFOUND {
		return nf()
	}
	return err
}

// Cursors are the store's: the last handle of the previous page,
// base64url-encoded.

func encodeCursor(key string) string { return base64.RawURLEncoding.EncodeToString([]byte(key)) }

func decodeCursor(cursor string) (string, error) {
	if cursor == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	// Bytes no text column holds are refused as the store refuses them, so
	// the answer does not depend on whether the cache is warm.
	if err != nil || len(b) == 0 || parley.CheckText("cursor", string(b)) != nil {
		return "", parley.Errorf(parley.EINVALID, "invalid cursor")
	}
	return string(b), nil
}
