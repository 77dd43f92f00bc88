// Package presence tracks who is online, away or offline, aggregated over a
// user's devices (sessions) and over the nodes those sessions are on, and
// tells only the watchers who asked about a user (Slack's presence
// subscriptions). The gateway calls it: Connect, Disconnect and Activity
// for its sessions, a Watcher per session for presence_sub.
//
// Per node, a user with sessions here has one small record (sessions, last
// activity); this node's contribution for them is online, away (no
// activity for AwayAfter, or set away by hand) or, Grace after the last
// session here went, offline. Every change of a contribution is published
// once on the user's presence topic (parley.TopicPresence) as a bus-only
// "presence.changed" event {user_id, presence, node_id, boot, v}; heartbeats
// never touch presence, so an idle user costs no bus traffic.
//
// A node subscribes to a user's presence topic only while some local
// watcher wants that user (ref-counted), keeps the other nodes'
// contributions for that user, and reports the aggregate: online if any
// node says online, else away if any says away, else offline; a user set
// away by hand is away wherever they are. When a user is newly watched on
// a node, the node asks every node at once (one "presence.query" on the
// control topic for up to 500 users); each answers on the asking node's
// topic, and the watchers get the first status when every live node has
// answered (one bus round trip) or after QueryTimeout. Versions (boot, v)
// make answers and changes commute.
//
// Liveness: a node's contributions stand while the node is alive — by
// Membership when given (package nodes), else by the trackers' own
// heartbeats (every Heartbeat, expiry NodeExpiry). When a node dies or says
// bye, its users stay for Grace more (their clients reconnect elsewhere)
// and then go, so a user on a dead node turns offline at most NodeExpiry +
// Grace + 2 × SweepInterval after the crash. Manual away is replicated to every
// node (a small map of users set away) and fetched from a peer at start.
//
// Time: one sweeper goroutine per tracker applies grace, away and expiry
// deadlines from a heap (at most one away and one grace entry per user);
// one dispatcher goroutine calls the watchers. There is no goroutine or
// timer per user.
//
// This package must not know about sockets, storage or HTTP; it is lossy
// like the bus (presence is ephemeral; the current state is re-sent on
// watch), and it never forwards raw presence-topic events to clients. See
// docs/presence.md for message flow, costs and failure behaviour.
package presence
