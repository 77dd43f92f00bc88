package liveconfig

import "parley"

// RelayPatch holds the outbox relay keys of a change (docs/delivery.md).
type RelayPatch struct {
	RelayGraceMS    *int `json:"relay_grace_ms,omitempty"`
	RelayIntervalMS *int `json:"relay_interval_ms,omitempty"`
}

// apply sets c's relay keys that p gives.
func (p RelayPatch) apply(c *parley.LiveConfig) error {
	return setInts([]intKey{
		{"relay_grace_ms", p.RelayGraceMS, &c.RelayGraceMS, parley.MinRelayGraceMS, parley.MaxRelayGraceMS},
		{"relay_interval_ms", p.RelayIntervalMS, &c.RelayIntervalMS, parley.MinRelayIntervalMS, parley.MaxRelayIntervalMS},
	})
}
