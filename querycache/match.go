package querycache

import "strings"

// Matching. A query matches a user by handle or display name, and a channel
// by name, in one of three tiers: exact, prefix (of the whole string or of
// one of its words), and fuzzy (the query's characters appear in order,
// not necessarily together: "jsmth" finds "john.smith"). Fuzzy matching
// looks at handles (and channel names) only: names are found by the
// prefix of any of their words, and a fuzzy pass over display names would
// match most of a big workspace for any query with a space in it.

// Match tiers, best first.
const (
	tierExact uint8 = iota
	tierPrefix
	tierFuzzy
)

// How a user matched within a tier: by handle, or by name; in the fuzzy
// tier (handles only), anchored (the handle starts with the query's first
// character: "jsm" for john.smith) before loose ("smt" for john.smith).
const (
	subHandle uint8 = iota
	subName

	subAnchored = subHandle
	subLoose    = subName
)

// foldQuery lower-cases and trims what was typed, and drops one leading
// sigil ('@' or '#').
func foldQuery(q string) string {
	q = strings.ToLower(strings.TrimSpace(q))
	if len(q) > 0 && (q[0] == '@' || q[0] == '#') {
		q = strings.TrimSpace(q[1:])
	}
	return q
}

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

// subsequence reports whether the bytes of q appear in s in order.
func subsequence[S string | []byte](s S, q string) bool {
	j := 0
	for i := 0; i < len(s) && j < len(q); i++ {
		if s[i] == q[j] {
			j++
		}
	}
	return j == len(q)
}

// wordPrefix returns the offset of the first word of name (the name itself,
// or what follows a space) that starts with q, or -1.
func wordPrefix(name, q string) int {
	if strings.HasPrefix(name, q) {
		return 0
	}
	for i := 1; i < len(name); i++ {
		if name[i-1] == ' ' && name[i] != ' ' && strings.HasPrefix(name[i:], q) {
			return i
		}
	}
	return -1
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
	switch {
	case q == "":
		return tierPrefix, subHandle, true
	case k.mask&qmask != qmask: // every tier needs every character of q
		return 0, 0, false
	case k.handle == q:
		return tierExact, subHandle, true
	case k.name == q:
		return tierExact, subName, true
	case strings.HasPrefix(k.handle, q):
		return tierPrefix, subHandle, true
	case wordPrefix(k.name, q) >= 0:
		return tierPrefix, subName, true
	case subsequence(k.handle, q):
		if k.handle[0] == q[0] {
			return tierFuzzy, subAnchored, true
		}
		return tierFuzzy, subLoose, true
	}
	return 0, 0, false
}

// directoryMatch is the user directory's filter, the same as the store's:
// a prefix of the handle, of the name, or of a word of the name.
func directoryMatch(k *userKey, q string) bool {
	return q == "" || strings.HasPrefix(k.handle, q) || wordPrefix(k.name, q) >= 0
}

// matchChannel rates how a channel name matches q. Names are lower case
// already; their words are separated by '-', '_' or '.'.
func matchChannel(name string, mask uint64, q string, qmask uint64) (tier uint8, ok bool) {
	switch {
	case q == "":
		return tierPrefix, true
	case mask&qmask != qmask: // every tier needs every character of q
		return 0, false
	case name == q:
		return tierExact, true
	case strings.HasPrefix(name, q):
		return tierPrefix, true
	}
	for i := 1; i < len(name); i++ {
		if c := name[i-1]; (c == '-' || c == '_' || c == '.') && strings.HasPrefix(name[i:], q) {
			return tierPrefix, true
		}
	}
	if subsequence(name, q) {
		return tierFuzzy, true
	}
	return 0, false
}
