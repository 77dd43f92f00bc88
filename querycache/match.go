package querycache

import (
	"strings"

	"parley"
)

// Matching. A query matches a user by handle or display name, and a channel
// by name, in one of three tiers: exact, prefix (of the whole string or of
// one of its words), and fuzzy (the query's characters appear in order,
// not necessarily together: "jsmth" finds "john.smith"). Fuzzy matching
// looks at handles (and channel names) only: names are found by the
// prefix of any of their words, and a fuzzy pass over display names would
// match most of a big workspace for any query with a space in it.

// The tiers and rules are the root's (parley.MatchUser, parley.MatchChannel),
// shared with the store's implementation; this file adds the masks.
const (
	tierExact  = parley.MatchExact
	tierPrefix = parley.MatchPrefix
	tierFuzzy  = parley.MatchFuzzy

	subHandle   = parley.MatchHandle
	subName     = parley.MatchName
	subAnchored = parley.MatchHandle
	subLoose    = parley.MatchName
)

// maskOf sets one bit per kind of byte in s: a–z, 0–9, a few punctuation
// marks and a bucket for everything else (spaces set none). A query can only
// match a string fuzzily when its mask is a subset of the string's: one AND
// rules out most candidates before the subsequence test.
func maskOf(s string) uint64 {
	var m uint64
	for i := 0; i < len(s); i++ {
		m |= 1 << byteBit(s[i])
	}
	return m &^ (1 << 63)
}

// handleQuery reports whether q could match a handle fuzzily at all:
// handles are [a-z0-9._-].
func handleQuery(q string) bool {
	for i := 0; i < len(q); i++ {
		c := q[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return q != ""
}

func byteBit(c byte) uint {
	switch {
	case c >= 'a' && c <= 'z':
		return uint(c - 'a')
	case c >= '0' && c <= '9':
		return 26 + uint(c-'0')
	case c == '.':
		return 36
	case c == '_':
		return 37
	case c == '-':
		return 38
	case c == ' ':
		return 63 // dropped by maskOf
	}
	return 39 + uint(c)%24
}

// wordStarts calls fn with the offset of each word of name.
func wordStarts(name string, fn func(off int)) {
	for i := 0; i < len(name); i++ {
		if name[i] != ' ' && (i == 0 || name[i-1] == ' ') {
			fn(i)
		}
	}
}

// matchUser rates how a user matches q (folded; qmask is maskOf(q)). An
// empty query matches everyone as a prefix.
func matchUser(k *userKey, q string, qmask uint64) (tier, sub uint8, ok bool) {
	if q != "" && k.mask&qmask != qmask { // every tier needs every character of q
		return 0, 0, false
	}
	return parley.MatchUser(k.handle, k.name, q)
}

// directoryMatch is the user directory's filter, the same as the store's:
// a prefix of the handle, of the name, or of a word of the name.
func directoryMatch(k *userKey, q string) bool {
	return q == "" || strings.HasPrefix(k.handle, q) || parley.WordPrefix(k.name, q) >= 0
}

// matchChannel rates how a channel name matches q. Names are lower case
// already; their words are separated by '-', '_' or '.'.
func matchChannel(name string, mask uint64, q string, qmask uint64) (tier uint8, ok bool) {
	if q != "" && mask&qmask != qmask { // every tier needs every character of q
		return 0, false
	}
	return parley.MatchChannel(name, q)
}
