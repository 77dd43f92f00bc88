package querycache

import (
	"encoding/binary"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"parley"
)

// workspace is one warm workspace: its users (by a dense index), channels
// and memberships, and the sorted indexes the queries walk.
//
// Queries hold mu for reading while they run (microseconds). Changes hold
// Cache.writeMu and then mu for writing, so that there is one writer at a
// time for the whole cache and no lock order to get wrong.
type workspace struct {
	id string

	lastUsed atomic.Int64 // unix ns of the last query
	ready    atomic.Bool  // loaded and kept fresh; set once

	// pending holds the events that arrived while the workspace was loading;
	// guarded by Cache.writeMu.
	pending []parley.Event

	mu sync.RWMutex // guards everything below

	users     []*sharedUser // by user index; nil once the user left
	keys      []userKey     // by user index
	roles     []uint8       // by user index (roleCode)
	userChans [][]uint32    // by user index: channel indexes, sorted
	userIdx   map[string]uint32
	live      int // users not nil

	byHandle    []uint32 // live user indexes sorted by handle
	handleMasks []uint64 // maskOf(handle) of byHandle[i], for the fuzzy scan
	// handleRef[i] locates byHandle[i]'s handle in handleText (offset<<6 |
	// length): the fuzzy scan reads handles from this one array, in order,
	// instead of chasing a pointer per user.
	handleRef  []uint32
	handleText []byte
	pos        []uint32  // by user index: its position in byHandle
	byName     []nameRef // every word of every live user's name, sorted

	chans   []*channel // by channel index; nil once deleted
	chanIdx map[string]uint32
	// chanMasks is, by channel index, the name's maskOf with listedBit set
	// for the channels the switcher lists (public and private, not
	// archived), 0 for the others: the switcher's scan reads this array
	// and looks at a channel itself only when its mask fits the query.
	chanMasks []uint64
	// named lists the channels that are not DMs (most of a big
	// workspace's channels are DMs), the only ones the switcher scans.
	named []uint32
}

// listedBit marks a channel the switcher may list (maskOf never sets it).
const listedBit = 1 << 63

// syncChannel recomputes chanMasks[ci] after a change to the channel.
func (w *workspace) syncChannel(ci uint32) {
	for len(w.chanMasks) <= int(ci) {
		w.chanMasks = append(w.chanMasks, 0)
	}
	ch := w.chans[ci]
	if ch == nil || ch.kind.IsDM() || ch.archived != 0 {
		w.chanMasks[ci] = 0
		return
	}
	w.chanMasks[ci] = ch.mask | listedBit
}

// nameRef is one word of a user's name: its key is the name from that word
// on, so that a prefix search over byName finds "smith" in "John Smith".
type nameRef struct {
	idx uint32
	off uint32
}

// touch marks the workspace used at now. Queries on every core call it, so
// it writes the shared word at most once a second.
func (w *workspace) touch(now time.Time) {
	if t := now.UnixNano(); t-w.lastUsed.Load() > int64(time.Second) {
		w.lastUsed.Store(t)
	}
}

func newWorkspace(id string) *workspace {
	return &workspace{id: id, userIdx: map[string]uint32{}, chanIdx: map[string]uint32{}}
}

func (w *workspace) nameKey(r nameRef) string { return w.keys[r.idx].name[r.off:] }

// handleLB returns the first position in byHandle whose handle is >= h.
func (w *workspace) handleLB(h string) int {
	i, _ := slices.BinarySearchFunc(w.byHandle, h, func(idx uint32, h string) int {
		return strings.Compare(w.keys[idx].handle, h)
	})
	return i
}

// nameLB returns the first position in byName whose key is >= k.
func (w *workspace) nameLB(k string) int {
	i, _ := slices.BinarySearchFunc(w.byName, k, func(r nameRef, k string) int {
		return strings.Compare(w.nameKey(r), k)
	})
	return i
}

// namePos finds ref's position in byName (keys are unique per user).
func (w *workspace) namePos(key string, idx uint32) (int, bool) {
	return slices.BinarySearchFunc(w.byName, nameRef{}, func(r nameRef, _ nameRef) int {
		if c := strings.Compare(w.nameKey(r), key); c != 0 {
			return c
		}
		return cmpU32(r.idx, idx)
	})
}

// sortEntry carries a sort key's first eight bytes as an integer, so that
// sorting a whole index compares integers and rarely follows the string.
type sortEntry[T any] struct {
	pre uint64
	key string
	v   T
}

func (a *sortEntry[T]) cmp(b *sortEntry[T], tie int) int {
	switch {
	case a.pre < b.pre:
		return -1
	case a.pre > b.pre:
		return 1
	}
	if c := strings.Compare(a.key, b.key); c != 0 {
		return c
	}
	return tie
}

func prefix8(s string) uint64 {
	var b [8]byte
	copy(b[:], s)
	return binary.BigEndian.Uint64(b[:])
}

func cmpU32(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// buildIndexes sorts byHandle and byName from scratch (after a load).
func (w *workspace) buildIndexes() {
	var handles []sortEntry[uint32]
	var names []sortEntry[nameRef]
	for i, u := range w.users {
		if u == nil {
			continue
		}
		h := w.keys[i].handle
		handles = append(handles, sortEntry[uint32]{pre: prefix8(h), key: h, v: uint32(i)})
		name := w.keys[i].name
		wordStarts(name, func(off int) {
			k := name[off:]
			names = append(names, sortEntry[nameRef]{pre: prefix8(k), key: k, v: nameRef{idx: uint32(i), off: uint32(off)}})
		})
	}
	slices.SortFunc(handles, func(a, b sortEntry[uint32]) int { return a.cmp(&b, cmpU32(a.v, b.v)) })
	slices.SortFunc(names, func(a, b sortEntry[nameRef]) int { return a.cmp(&b, cmpU32(a.v.idx, b.v.idx)) })
	w.byHandle = make([]uint32, len(handles))
	for i, e := range handles {
		w.byHandle[i] = e.v
	}
	w.byName = make([]nameRef, len(names))
	for i, e := range names {
		w.byName[i] = e.v
	}
	w.handleMasks = make([]uint64, len(w.byHandle))
	w.handleRef = make([]uint32, len(w.byHandle))
	w.pos = make([]uint32, len(w.users))
	size := 0
	for _, idx := range w.byHandle {
		size += len(w.keys[idx].handle)
	}
	w.handleText = make([]byte, 0, size)
	for i, idx := range w.byHandle {
		h := w.keys[idx].handle
		w.handleMasks[i] = maskOf(h)
		w.handleRef[i] = w.packHandle(h)
		w.pos[idx] = uint32(i)
	}
}

// packHandle appends h to handleText and returns its reference. Handles
// are at most 32 bytes (parley.ValidateHandle).
func (w *workspace) packHandle(h string) uint32 {
	off := len(w.handleText)
	w.handleText = append(w.handleText, h...)
	return uint32(off)<<6 | uint32(len(h)&63)
}

// handleAt is the handle of byHandle[i], from handleText.
func (w *workspace) handleAt(i int) []byte {
	ref := w.handleRef[i]
	off := ref >> 6
	return w.handleText[off : off+ref&63]
}

// renumber sets pos for byHandle[from:] after an insertion or removal
// there (O(users): joins and renames are rare next to queries).
func (w *workspace) renumber(from int) {
	for len(w.pos) < len(w.users) {
		w.pos = append(w.pos, 0)
	}
	for i := from; i < len(w.byHandle); i++ {
		w.pos[w.byHandle[i]] = uint32(i)
	}
}

// index puts user idx (whose key is set) into the sorted indexes.
func (w *workspace) index(idx uint32) {
	w.indexHandle(idx)
	w.indexName(idx)
}

// unindex takes user idx (with its current key) out of the sorted indexes.
func (w *workspace) unindex(idx uint32) {
	w.unindexHandle(idx)
	w.unindexName(idx)
}

func (w *workspace) indexHandle(idx uint32) {
	h := w.keys[idx].handle
	i := w.handleLB(h)
	w.byHandle = slices.Insert(w.byHandle, i, idx)
	w.handleMasks = slices.Insert(w.handleMasks, i, maskOf(h))
	w.handleRef = slices.Insert(w.handleRef, i, w.packHandle(h))
	w.renumber(i)
}

func (w *workspace) unindexHandle(idx uint32) {
	h := w.keys[idx].handle
	for i := w.handleLB(h); i < len(w.byHandle) && w.keys[w.byHandle[i]].handle == h; i++ {
		if w.byHandle[i] == idx {
			w.byHandle = slices.Delete(w.byHandle, i, i+1)
			w.handleMasks = slices.Delete(w.handleMasks, i, i+1)
			w.handleRef = slices.Delete(w.handleRef, i, i+1)
			w.renumber(i)
			return
		}
	}
}

func (w *workspace) indexName(idx uint32) {
	name := w.keys[idx].name
	wordStarts(name, func(off int) {
		j, _ := w.namePos(name[off:], idx)
		w.byName = slices.Insert(w.byName, j, nameRef{idx: idx, off: uint32(off)})
	})
}

func (w *workspace) unindexName(idx uint32) {
	name := w.keys[idx].name
	wordStarts(name, func(off int) {
		if j, ok := w.namePos(name[off:], idx); ok {
			w.byName = slices.Delete(w.byName, j, j+1)
		}
	})
}

// rekey makes user idx's index entries follow rec (a rename), keeping the
// key's strings shared with rec when nothing changed.
func (w *workspace) rekey(idx uint32, rec *userRec) {
	nk := rec.key()
	old := w.keys[idx]
	if old.handle != nk.handle {
		w.unindexHandle(idx)
		w.keys[idx].handle = nk.handle
		w.indexHandle(idx)
	}
	if old.name != nk.name {
		w.unindexName(idx)
		w.keys[idx].name = nk.name
		w.indexName(idx)
	}
	w.keys[idx] = nk // share rec's strings
}

// addUser makes su a member of the workspace with role and returns its
// index. The caller counts the reference.
func (w *workspace) addUser(su *sharedUser, role parley.Role) uint32 {
	rec := su.rec.Load()
	idx := uint32(len(w.users))
	w.users = append(w.users, su)
	w.keys = append(w.keys, rec.key())
	w.roles = append(w.roles, roleCode(role))
	w.userChans = append(w.userChans, nil)
	w.userIdx[rec.id] = idx
	w.live++
	w.index(idx)
	return idx
}

// removeUser takes user idx out of the workspace and its channels. The
// caller drops the reference.
func (w *workspace) removeUser(idx uint32) {
	w.unindex(idx)
	for _, ci := range w.userChans[idx] {
		if ch := w.chans[ci]; ch != nil {
			ch.members = removeSorted(ch.members, idx)
		}
	}
	delete(w.userIdx, w.users[idx].rec.Load().id)
	w.users[idx], w.keys[idx], w.userChans[idx] = nil, userKey{}, nil
	w.live--
}

// addChannel adds a channel with its first members.
func (w *workspace) addChannel(ch *channel) uint32 {
	ci := uint32(len(w.chans))
	w.chans = append(w.chans, ch)
	w.chanIdx[ch.id] = ci
	w.syncChannel(ci)
	if !ch.kind.IsDM() {
		w.named = append(w.named, ci)
	}
	members := ch.members
	ch.members = nil
	for _, u := range members {
		w.addMember(ci, u)
	}
	return ci
}

// removeChannel takes a channel and its memberships away.
func (w *workspace) removeChannel(ci uint32) {
	ch := w.chans[ci]
	for _, u := range ch.members {
		w.userChans[u] = removeSorted(w.userChans[u], ci)
	}
	delete(w.chanIdx, ch.id)
	w.chans[ci] = nil
	w.syncChannel(ci)
}

func (w *workspace) addMember(ci, u uint32) {
	ch := w.chans[ci]
	ch.members = insertSorted(ch.members, u)
	w.userChans[u] = insertSorted(w.userChans[u], ci)
}

func (w *workspace) removeMember(ci, u uint32) {
	ch := w.chans[ci]
	ch.members = removeSorted(ch.members, u)
	w.userChans[u] = removeSorted(w.userChans[u], ci)
}

// isMember reports whether user u is a member of channel ci.
func (w *workspace) isMember(ci, u uint32) bool {
	_, ok := slices.BinarySearch(w.userChans[u], ci)
	return ok
}

// role returns the role of user u.
func (w *workspace) role(u uint32) parley.Role { return roles[w.roles[u]] }

// actor returns the index of a live member of the workspace, or false.
func (w *workspace) actor(userID string) (uint32, bool) {
	idx, ok := w.userIdx[userID]
	return idx, ok && w.users[idx] != nil
}

// canSee applies the store's visibility rule to channel ci for user u:
// members see it; other workspace members see it when it is public and
// they are not guests.
func (w *workspace) canSee(ci, u uint32) bool {
	if w.isMember(ci, u) {
		return true
	}
	return w.chans[ci].kind == parley.KindPublic && w.role(u) != parley.RoleGuest
}

func insertSorted(s []uint32, v uint32) []uint32 {
	i, found := slices.BinarySearch(s, v)
	if found {
		return s
	}
	return slices.Insert(s, i, v)
}

func removeSorted(s []uint32, v uint32) []uint32 {
	i, found := slices.BinarySearch(s, v)
	if !found {
		return s
	}
	return slices.Delete(s, i, i+1)
}
