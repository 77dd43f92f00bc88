package gateway

import (
	"time"

	"parley"
	"parley/gateway/order"
)

// sequencer turns the bus's copies of a channel's durable events (any
// order, duplicates possible, some lost) into the channel's log order: its
// deliver function gets each seq once, in seq order, per channel, with gaps
// filled from the store. Ephemeral events (seq 0) pass straight through.
// *order.Sequencer implements it.
type sequencer interface {
	// Track starts following a channel whose log stood at lastSeq.
	Track(channelID string, lastSeq int64)
	// Untrack stops following it.
	Untrack(channelID string)
	// Push hands over an event from the bus.
	Push(ev parley.Event)
	// CatchUp fetches whatever the log has past the current position now.
	CatchUp(channelID string)
	// Close stops the fills under way.
	Close()
}

var _ sequencer = (*order.Sequencer)(nil)

// fillLimit is how many events one catch-up read of a session asks for.
const fillLimit = 500

// fetchTimeout bounds one store read of a session catch-up.
const fetchTimeout = 10 * time.Second

// newSequencer builds the node's channel sequencer; package order
// registers its metrics (parley_gateway_gap_fills_total and others).
func newSequencer(g *Gateway) sequencer {
	return order.New(order.Config{
		Fetch:      g.store.ChannelLog,
		Deliver:    g.hub.guardEvents(channelTopic, g.hub.deliverOrdered),
		HoldBack:   g.cfg.HoldBack,
		Logger:     g.log,
		Registerer: g.cfg.Registerer,
	})
}
