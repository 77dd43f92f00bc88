package parley

import "context"

// The bus seam. Packages that talk between nodes (the gateway, presence,
// the query cache, live configuration, membership) take these interfaces;
// only cmd/parley knows which bus implements them (natsbus, today). Each is
// small, and a package takes the few it needs, so that a bus without, say,
// request/reply still serves the packages that do not ask for it.
//
// Everything here speaks in topics: dot-separated names such as
// "channel.C1" or "node.N1.handover", never a transport's subjects. A bus
// turns a topic into its own address (natsbus puts its subject prefix,
// "parley." by default, in front), so that the address scheme, and the
// prefix that keeps two deployments or two tests apart on one server, live
// in the bus alone.

// EventBus carries events between nodes: Publish sends each event on each
// of its topics, Subscribe delivers the events of a topic.
type EventBus interface {
	EventPublisher
	// Subscribe calls fn with every event published on topic, one at a
	// time and in bus order; ev.Topics holds the topic it came on. topic
	// may end in wildcards ("*" one token, ">" the rest). The returned
	// function ends the subscription.
	Subscribe(topic string, fn func(Event)) (unsubscribe func() error, err error)
}

// TopicMux funnels many topic subscriptions into one handler goroutine:
// cheaper than a subscription each when a node holds tens of thousands of
// topics. Events of one topic reach the handler in bus order.
type TopicMux interface {
	// Subscribe adds topic; a no-op when it is already subscribed.
	Subscribe(topic string) error
	// Unsubscribe removes topic; a no-op when it is not subscribed. Events
	// of the topic already buffered may still be handled.
	Unsubscribe(topic string) error
	// Close ends every subscription and stops the handler goroutine.
	Close()
}

// MuxBus makes TopicMuxes. A bus that has it is used by the gateway for
// its channel topics; presence and the query cache require it.
type MuxBus interface {
	// NewMux starts a mux whose one goroutine calls fn for every event of
	// its topics; buffer bounds the events waiting for fn (0: the bus's
	// default). fn must not block for long.
	NewMux(buffer int, fn func(Event)) TopicMux
}

// BusLink is the state of a node's link to the bus.
type BusLink interface {
	// Connected reports whether the link is up right now.
	Connected() bool
	// Flush returns once the bus has taken in everything this node sent
	// before it (subscriptions included).
	Flush() error
}

// RawBus carries node-to-node messages that are not events (announcements,
// change notices) as opaque bytes.
type RawBus interface {
	PublishRaw(topic string, data []byte) error
	// SubscribeRaw calls fn with every payload published on topic, one at a
	// time and in bus order.
	SubscribeRaw(topic string, fn func(data []byte)) (unsubscribe func() error, err error)
}

// Requester is request/reply between nodes (session handover).
type Requester interface {
	// Request sends data to whoever handles topic and waits for one reply.
	// A handler's error comes back as a *Error when it carried a code.
	Request(ctx context.Context, topic string, data []byte) ([]byte, error)
	// Handle answers every request on topic with fn's result. stop ends
	// the subscription and waits for the calls of fn under way.
	Handle(topic string, fn func(data []byte) ([]byte, error)) (stop func() error, err error)
}

// Topics of node-to-node messages: what the nodes say to each other rather
// than to clients. Event topics (channel, user, presence, directory) are the
// protocol's and are declared with it.
const (
	// NodesTopic carries membership heartbeats and goodbyes (package nodes).
	NodesTopic = "nodes"
	// ConfigChangedTopic carries live-configuration change notices
	// (package liveconfig).
	ConfigChangedTopic = "config.changed"
)

// NodeTopic is the topic of node-to-node messages of one kind aimed at one
// node, "node.<nodeID>.<kind>": kind "handover" is the gateway's session
// handover (request/reply), "presence" the presence trackers' answers.
func NodeTopic(nodeID, kind string) string { return "node." + nodeID + "." + kind }
