// Package gateway is Parley's real-time WebSocket gateway: it upgrades
// GET /api/v1/gateway, speaks the session protocol of PROTOCOL.md (hello,
// identify, resume, heartbeats, events), and delivers the events of the bus
// to the sessions that may see them.
//
// The shape, from the bus inwards:
//
//   - hub.go: one bus subscription per topic per node, reference-counted by
//     the local sessions that need it. Channel events go through the
//     per-channel sequencer (package gateway/order) so that the node sees
//     each channel's durable events once, in seq order, with gaps filled
//     from the store.
//   - partition.go: P partitions each own a share of the sessions and an
//     index topic → sessions. An event is encoded once; each partition
//     enqueues the shared bytes to its sessions and flushes each touched
//     session once.
//   - session.go, ring.go: a session's seq (s), its bounded send queue and
//     its replay buffer are one ring; resume replays from it.
//   - conn.go, transport.go: the socket side, on lesismal/nbio (epoll, no
//     goroutine per connection, non-blocking buffered writes).
//   - jit.go: just-in-time users. Message events carry the user objects
//     (author, mentions) a session has not been sent yet, resolved once per
//     event through a UserDirectory (the query cache).
//
// The gateway authorises only through the store (SessionByToken,
// GetWorkspace, SessionChannels, ChannelMember); it never writes to the
// store, and it must not know which database or bus implementation is behind
// its interfaces.
package gateway
