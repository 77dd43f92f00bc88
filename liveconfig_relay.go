package parley

// RelayConfig holds the live keys of the outbox relay: how long a channel's
// committed events may stay unacknowledged on the bus before a relay
// publishes them from the log, and how often each node's relay looks
// (docs/delivery.md). Their sum is the bulk of the delivery bound of an
// event whose node died between its commit and its publish.
type RelayConfig struct {
	// RelayGraceMS: an outbox row older than this is published by the
	// relay. It must stay well above a normal acknowledgement (100 ms and
	// a bus flush), or the relay publishes what was published already
	// (harmless: the gateways drop duplicates, but it is bus traffic).
	RelayGraceMS int `json:"relay_grace_ms"`
	// RelayIntervalMS: how often every node's relay looks for old rows.
	RelayIntervalMS int `json:"relay_interval_ms"`
}

// DefaultRelayConfig is the default of a new installation: 1 s of grace,
// a pass every 250 ms.
func DefaultRelayConfig() RelayConfig {
	return RelayConfig{RelayGraceMS: 1000, RelayIntervalMS: 250}
}

// Bounds of the relay keys.
const (
	MinRelayGraceMS    = 100
	MaxRelayGraceMS    = 600_000
	MinRelayIntervalMS = 10
	MaxRelayIntervalMS = 60_000
)
