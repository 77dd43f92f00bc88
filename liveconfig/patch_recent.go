package liveconfig

import "parley"

// RecentPatch holds the recent-events buffer keys of a change.
type RecentPatch struct {
	RecentEnabled *bool `json:"recent_enabled,omitempty"`
	RecentDryRun  *bool `json:"recent_dry_run,omitempty"`
	RecentEvents  *int  `json:"recent_events,omitempty"`
}

// apply sets c's recent-buffer keys that p gives.
func (p RecentPatch) apply(c *parley.LiveConfig) error {
	setBool(p.RecentEnabled, &c.RecentEnabled)
	setBool(p.RecentDryRun, &c.RecentDryRun)
	return setInt("recent_events", p.RecentEvents, &c.RecentEvents, 1, parley.MaxRecentEvents)
}
