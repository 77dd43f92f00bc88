package querycache

import (
	"slices"
	"sort"
	"strings"

	"parley"
)

// Ranking users for the switcher and mention suggestions. Hits are ordered
// by match tier (exact, prefix, fuzzy); within a tier the preferred users
// (the caller's DM partners in the switcher, the channel's members in
// mention suggestions) come first, then recent activity, then handle
// matches before name matches, then alphabetically.
//
// Nothing scans every user unless it has to: exact and prefix hits come
// from binary searches over the sorted handle and name-word indexes, walked
// in rank order and abandoned as soon as nothing further along can enter
// the top k. Fuzzy hits (handles only) come from one pass over the handle
// order that a 64-bit character mask filters before any string is looked
// at, and that stops as soon as k of them are found.

// userHit is one user found, with what ranks it.
type userHit struct {
	idx  uint32
	tier uint8
	pref bool  // a preferred user (see above)
	act  int64 // recent activity, higher first
	sub  uint8 // subHandle or subName
	key  string
}

func (a *userHit) before(b *userHit) bool {
	switch {
	case a.tier != b.tier:
		return a.tier < b.tier
	case a.pref != b.pref:
		return a.pref
	case a.act != b.act:
		return a.act > b.act
	case a.sub != b.sub:
		return a.sub < b.sub
	case a.key != b.key:
		return a.key < b.key
	}
	return a.idx < b.idx
}

// topK keeps the best k items seen, in order.
type topK[T any] struct {
	k      int
	before func(a, b *T) bool
	items  []T
}

func (t *topK[T]) full() bool { return len(t.items) >= t.k }

// admits reports whether x would enter the top k.
func (t *topK[T]) admits(x *T) bool {
	return !t.full() || t.before(x, &t.items[len(t.items)-1])
}

func (t *topK[T]) add(x T) {
	if t.k <= 0 || !t.admits(&x) {
		return
	}
	i := sort.Search(len(t.items), func(i int) bool { return t.before(&x, &t.items[i]) })
	if t.full() {
		t.items = t.items[:len(t.items)-1]
	}
	t.items = slices.Insert(t.items, i, x)
}

// prefSet is the set of preferred users of a search.
type prefSet struct {
	ids []uint32         // sorted
	act map[uint32]int64 // activity of each; nil: none known
	// small sets are rated one by one up front (and skipped by the walks);
	// large ones (a big channel's members) are looked up as the walks go.
	small bool
}

func (p *prefSet) has(idx uint32) bool {
	_, ok := slices.BinarySearch(p.ids, idx)
	return ok
}

// smallPref is the size up to which a preferred set is rated one by one.
const smallPref = 1024

// userSearch is one search over a workspace's users. The caller holds the
// workspace's read lock.
type userSearch struct {
	w     *workspace
	q     string
	qmask uint64
	pref  prefSet
	top   topK[userHit]
}

// searchUsers returns the best k active users for q (folded).
func (w *workspace) searchUsers(q string, k int, pref prefSet) []userHit {
	s := &userSearch{w: w, q: q, qmask: maskOf(q), pref: pref,
		top: topK[userHit]{k: k, before: (*userHit).before}}
	if pref.small {
		for _, idx := range pref.ids {
			s.consider(idx, 0, 0, 0, false)
		}
	}
	s.walkExact()
	s.walkHandles()
	s.walkNames()
	if handleQuery(q) {
		s.walkFuzzy()
	}
	return s.top.items
}

// consider rates user idx. From a walk (walked true) the user counts only
// if the walk is where it ranks (that tier and sub, and for names that
// word), so that nobody is counted twice.
func (s *userSearch) consider(idx uint32, tier, sub uint8, off uint32, walked bool) {
	su := s.w.users[idx]
	if su == nil {
		return
	}
	k := &s.w.keys[idx]
	t, sb, ok := matchUser(k, s.q, s.qmask)
	if !ok {
		return
	}
	h := userHit{idx: idx, tier: t, sub: sb, key: k.handle}
	if walked && (t != tier || sb != sub) {
		return
	}
	if sb == subName && t != tierFuzzy {
		o := parley.WordPrefix(k.name, s.q)
		if walked && t == tierPrefix && uint32(o) != off {
			return
		}
		h.key = k.name[o:]
	}
	if walked {
		if s.pref.small {
			if s.pref.has(idx) {
				return
			}
		} else {
			h.pref = s.pref.has(idx)
		}
	} else {
		h.pref, h.act = true, s.pref.act[idx]
	}
	if !s.top.admits(&h) || su.rec.Load().deactivated {
		return
	}
	s.top.add(h)
}

// hopeless reports whether no hit at (tier, sub, key, idx) or after it in
// a walk can enter the top k any more. Walks go in (key, idx) order.
func (s *userSearch) hopeless(tier, sub uint8, key string, idx uint32) bool {
	if !s.top.full() {
		return false
	}
	bound := userHit{tier: tier, sub: sub, key: key, idx: idx, pref: !s.pref.small && len(s.pref.ids) > 0}
	return !bound.before(&s.top.items[len(s.top.items)-1])
}

func (s *userSearch) walkExact() {
	w := s.w
	if s.q == "" {
		return
	}
	if i := w.handleLB(s.q); i < len(w.byHandle) && w.keys[w.byHandle[i]].handle == s.q {
		s.consider(w.byHandle[i], tierExact, subHandle, 0, true)
	}
	for i := w.nameLB(s.q); i < len(w.byName) && w.nameKey(w.byName[i]) == s.q; i++ {
		if r := w.byName[i]; r.off == 0 {
			if s.hopeless(tierExact, subName, s.q, r.idx) {
				return
			}
			s.consider(r.idx, tierExact, subName, 0, true)
		}
	}
}

func (s *userSearch) walkHandles() {
	w := s.w
	for i := w.handleLB(s.q); i < len(w.byHandle); i++ {
		idx := w.byHandle[i]
		h := w.keys[idx].handle
		if !strings.HasPrefix(h, s.q) || s.hopeless(tierPrefix, subHandle, h, idx) {
			return
		}
		s.consider(idx, tierPrefix, subHandle, 0, true)
	}
}

func (s *userSearch) walkNames() {
	w := s.w
	for i := w.nameLB(s.q); i < len(w.byName); i++ {
		r := w.byName[i]
		key := w.nameKey(r)
		if !strings.HasPrefix(key, s.q) || s.hopeless(tierPrefix, subName, key, r.idx) {
			return
		}
		s.consider(r.idx, tierPrefix, subName, r.off, true)
	}
}

func (s *userSearch) walkFuzzy() {
	w := s.w
	if s.hopeless(tierFuzzy, subAnchored, "", 0) {
		return
	}
	// The handles that start with the query's first character rank first.
	lo := w.handleLB(s.q[:1])
	hi := w.handleLB(string(rune(s.q[0] + 1)))
	if s.fuzzyRange(lo, hi, subAnchored) || s.hopeless(tierFuzzy, subLoose, "", 0) {
		return
	}
	if !s.fuzzyRange(0, lo, subLoose) {
		s.fuzzyRange(hi, len(w.byHandle), subLoose)
	}
}

// fuzzyRange tests the handles at positions [lo, hi) of byHandle against
// the query: the mask first, then the subsequence over the packed handle
// text, and only for a hit the user's record. It reports whether it stopped
// because nothing further can enter the top k.
func (s *userSearch) fuzzyRange(lo, hi int, sub uint8) (stopped bool) {
	w := s.w
	masks := w.handleMasks[lo:hi]
	for j, m := range masks {
		if m&s.qmask != s.qmask {
			continue
		}
		i := lo + j
		if !parley.Subsequence(w.handleAt(i), s.q) {
			continue
		}
		idx := w.byHandle[i]
		if s.hopeless(tierFuzzy, sub, w.keys[idx].handle, idx) {
			return true
		}
		s.consider(idx, tierFuzzy, sub, 0, true)
	}
	return false
}

// chanHit is one channel found by the switcher.
type chanHit struct {
	ci     uint32
	tier   uint8
	member bool
	act    int64
	name   string
}

// before ranks channels: tier, the caller's own first, recent activity,
// name.
func (a *chanHit) before(b *chanHit) bool {
	switch {
	case a.tier != b.tier:
		return a.tier < b.tier
	case a.member != b.member:
		return a.member
	case a.act != b.act:
		return a.act > b.act
	}
	return a.name < b.name
}
