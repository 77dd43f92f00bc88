package gateway

import (
	"fmt"
	"runtime/debug"
	"slices"
	"strings"

	"parley"
)

// Panic containment. A panic in delivery is a bug, but it must cost the
// sessions it touched a reconnect, not the node every session: the
// partitions and the goroutines that run the bus's callbacks into the
// gateway (subscriptions, the sequencer's output, session catch-up reads,
// handover requests, presence watches) recover, log the panic with its
// stack, count it in parley_panics_total{where}, close the touched
// sessions' sockets with 4009 and go on.
//
// What the session keeps decides whether its resume loses nothing:
//
//   - resync: the panic hit a channel event of the ordered stream, an
//     ephemeral event or a flush. The session stays; its socket is closed
//     4009 and each channel it follows is read again from the log after its
//     position, so the resume replays whatever the panic kept from it.
//   - end: anything else (a user or workspace topic's event, a request run
//     on the partition, the sweep) may have left the session missing what
//     no log holds. The session is removed and its socket closed 4009; the
//     resume is answered invalid_session and the client boots again and
//     catches up with /sync.

// Labels of parley_panics_total for the gateway.
const (
	panicPartition = "gateway_partition" // a partition goroutine
	panicBus       = "gateway_bus"       // a bus subscription or the sequencer's output
	panicFill      = "gateway_fill"      // a session's catch-up read
	panicHandover  = "gateway_handover"  // a handover request from another node
	panicPresence  = "gateway_presence"  // a presence watch's callback
	panicConn      = "gateway_conn"      // reading one client frame
	panicPreview   = "gateway_preview"   // the store read that starts a preview
)

type afterPanic uint8

const (
	resyncSession afterPanic = iota
	endSession
)

// closeInternal is the reason of the 4009 sent to a session after a panic.
const closeInternal = "internal error"

// logPanic logs and counts a recovered panic.
func (g *Gateway) logPanic(where string, v any, attrs ...any) {
	g.metrics.panics.WithLabelValues(where).Inc()
	attrs = append(attrs, "where", where, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	g.log.Error("gateway recovered a panic", attrs...)
}

// Bus side.

// guardEvents wraps a bus callback: a panic is logged and counted, and the
// local sessions of the event's topic (topicOf) are quarantined on every
// partition.
func (h *hub) guardEvents(topicOf func(parley.Event) string, fn func(parley.Event)) func(parley.Event) {
	return func(ev parley.Event) {
		defer func() {
			if v := recover(); v != nil {
				h.busPanicked(v, topicOf(ev), ev)
			}
		}()
		fn(ev)
	}
}

// firstTopic is the topic a mux's event came on.
func firstTopic(ev parley.Event) string {
	if len(ev.Topics) == 0 {
		return ""
	}
	return ev.Topics[0]
}

// channelTopic is the topic of a channel's ordered stream.
func channelTopic(ev parley.Event) string { return parley.TopicChannel(ev.ChannelID) }

// busPanicked handles a panic in the delivery of ev on topic before it
// reached the partitions: the topic's local sessions may have missed it.
// A channel's sessions read the log again; the others start over.
func (h *hub) busPanicked(v any, topic string, ev parley.Event) {
	h.g.logPanic(panicBus, v, "topic", topic, "event_type", ev.Type, "channel_id", ev.ChannelID, "seq", ev.Seq)
	if topic == "" {
		return
	}
	how := endSession
	if strings.HasPrefix(topic, parley.TopicPrefixChannel) || parley.IsEphemeralEvent(ev.Type) {
		how = resyncSession
	}
	for _, p := range h.g.parts {
		p.postAsync(func() {
			set := p.index[topic]
			if set == nil {
				return
			}
			for _, s := range slices.Clone(set.list) {
				if s != nil {
					p.quarantine(s, how)
				}
			}
		})
	}
}

// guardPresence wraps a presence watch's callback for s: a panic closes
// the session's socket (it owes nothing: presence is ephemeral, and the
// watch reports current statuses again on the next presence_sub).
func (g *Gateway) guardPresence(s *session, fn func(userID, status string)) func(userID, status string) {
	return func(userID, status string) {
		defer func() {
			if v := recover(); v != nil {
				g.logPanic(panicPresence, v, "session_id", s.id, "user_id", s.userID)
				s.p.postAsync(func() { s.p.quarantine(s, resyncSession) })
			}
		}()
		fn(userID, status)
	}
}
