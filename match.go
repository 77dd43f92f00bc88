package parley

import "strings"

// The directory's matching rules, the one definition that both
// implementations of DirectoryQueries apply (the query cache adds a
// character mask in front to rule candidates out cheaply; the store
// narrows candidates in SQL first). A query matches a user by handle or
// display name, and a channel by name, in one of three tiers: exact, prefix
// (of the whole string or of one of its words) and fuzzy (the query's bytes
// appear in order: "jsmth" finds "john.smith"). Fuzzy matching looks at
// handles and channel names only: a fuzzy pass over display names would
// match most of a big workspace for any query with a space in it.

// Match tiers, best first.
const (
	MatchExact uint8 = iota
	MatchPrefix
	MatchFuzzy
)

// How a user matched within a tier: by handle before by name. In the fuzzy
// tier (handles only), MatchHandle means anchored (the handle starts with
// the query's first byte: "jsm" for john.smith) and MatchName loose ("smt").
const (
	MatchHandle uint8 = iota
	MatchName
)

// FoldQuery lower-cases and trims what was typed, and drops one leading
// sigil ('@' or '#').
func FoldQuery(q string) string {
	q = strings.ToLower(strings.TrimSpace(q))
	if len(q) > 0 && (q[0] == '@' || q[0] == '#') {
		q = strings.TrimSpace(q[1:])
	}
	return q
}

// MatchUser rates how a user (handle, lower-cased display name) matches the
// folded query q. An empty query matches everyone as a prefix.
func MatchUser(handle, name, q string) (tier, sub uint8, ok bool) {
	switch {
	case q == "":
		return MatchPrefix, MatchHandle, true
	case handle == q:
		return MatchExact, MatchHandle, true
	case name == q:
		return MatchExact, MatchName, true
	case strings.HasPrefix(handle, q):
		return MatchPrefix, MatchHandle, true
	case WordPrefix(name, q) >= 0:
		return MatchPrefix, MatchName, true
	case Subsequence(handle, q):
		if handle[0] == q[0] {
			return MatchFuzzy, MatchHandle, true
		}
		return MatchFuzzy, MatchName, true
	}
	return 0, 0, false
}

// MatchChannel rates how a channel name (lower case; words separated by
// '-', '_' or '.') matches the folded query q.
func MatchChannel(name, q string) (tier uint8, ok bool) {
	switch {
	case q == "":
		return MatchPrefix, true
	case name == q:
		return MatchExact, true
	case strings.HasPrefix(name, q):
		return MatchPrefix, true
	}
	for i := 1; i < len(name); i++ {
		if c := name[i-1]; (c == '-' || c == '_' || c == '.') && strings.HasPrefix(name[i:], q) {
			return MatchPrefix, true
		}
	}
	if Subsequence(name, q) {
		return MatchFuzzy, true
	}
	return 0, false
}

// WordPrefix returns the offset of the first word of name (the name itself,
// or what follows a space) that starts with q, or -1.
func WordPrefix(name, q string) int {
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

// Subsequence reports whether the bytes of q appear in s in order.
func Subsequence[S string | []byte](s S, q string) bool {
	j := 0
	for i := 0; i < len(s) && j < len(q); i++ {
		if s[i] == q[j] {
			j++
		}
	}
	return j == len(q)
}
