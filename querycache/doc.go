// Package querycache is the query cache role, Slack's Flannel: per node and
// in memory, each workspace's users, channels (every kind) and memberships,
// loaded from the store on first use in one load however many requests ask
// at once, kept fresh by the directory events on the bus (topic
// parley.TopicDirectory), kept warm for a while after the last query, then
// evicted and unsubscribed. It answers the quick switcher, mention
// suggestions, the user directory, channel headers and batch user lookups in
// microseconds, with no store query once warm.
//
// Users are server-wide in Parley, so a user who is in several warm
// workspaces is held once per node and referenced by each of them; a
// workspace holds only small per-user index entries of its own.
//
// The cache is eventually consistent: a change is visible once its event
// has been applied, normally within milliseconds of the commit. It
// authorises reads with the same rules as the store (workspace members only;
// private channels and DMs only to their members; guests only their own
// channels) from its own copy of the memberships.
//
// It is one of the two implementations of parley.DirectoryQueries (the
// store's, sqlstore.Directory, is the other; contract_test.go holds their
// answers to the same cases). It must not write to the store, and knows
// nothing of HTTP or WebSockets: httpapi calls it as a
// parley.DirectoryQueries, the gateway through its UserDirectory.
package querycache
