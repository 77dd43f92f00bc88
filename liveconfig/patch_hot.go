package liveconfig

import "parley"

// HotPatch holds the hot-channel and view-aware delivery keys of a change.
type HotPatch struct {
	HotEnabled          *bool `json:"hot_enabled,omitempty"`
	HotDryRun           *bool `json:"hot_dry_run,omitempty"`
	HotOnRate           *int  `json:"hot_on_rate,omitempty"`
	HotOffRate          *int  `json:"hot_off_rate,omitempty"`
	HotWindowSeconds    *int  `json:"hot_window_seconds,omitempty"`
	HotTTLSeconds       *int  `json:"hot_ttl_seconds,omitempty"`
	HotBatchMs          *int  `json:"hot_batch_ms,omitempty"`
	HotTypingIntervalMs *int  `json:"hot_typing_interval_ms,omitempty"`
	ViewEnabled         *bool `json:"view_enabled,omitempty"`
	ViewDryRun          *bool `json:"view_dry_run,omitempty"`
	ViewMinMembers      *int  `json:"view_min_members,omitempty"`
	ViewSummarySeconds  *int  `json:"view_summary_seconds,omitempty"`
	ViewReplayMax       *int  `json:"view_replay_max,omitempty"`
}

// apply sets c's hot and view keys that p gives.
func (p HotPatch) apply(c *parley.LiveConfig) error {
	setBool(p.HotEnabled, &c.HotEnabled)
	setBool(p.HotDryRun, &c.HotDryRun)
	setBool(p.ViewEnabled, &c.ViewEnabled)
	setBool(p.ViewDryRun, &c.ViewDryRun)
	if err := setInts([]intKey{
		{"hot_on_rate", p.HotOnRate, &c.HotOnRate, 1, parley.MaxHotRate},
		{"hot_off_rate", p.HotOffRate, &c.HotOffRate, 0, parley.MaxHotRate},
		{"hot_window_seconds", p.HotWindowSeconds, &c.HotWindowSeconds, 1, parley.MaxHotWindowSeconds},
		{"hot_ttl_seconds", p.HotTTLSeconds, &c.HotTTLSeconds, 1, parley.MaxHotTTLSeconds},
		{"hot_batch_ms", p.HotBatchMs, &c.HotBatchMs, 0, parley.MaxHotBatchMs},
		{"hot_typing_interval_ms", p.HotTypingIntervalMs, &c.HotTypingIntervalMs, 0, parley.MaxHotTypingIntervalMs},
		{"view_min_members", p.ViewMinMembers, &c.ViewMinMembers, 0, 1 << 30},
		{"view_summary_seconds", p.ViewSummarySeconds, &c.ViewSummarySeconds, 1, parley.MaxViewSummarySeconds},
		{"view_replay_max", p.ViewReplayMax, &c.ViewReplayMax, 0, parley.MaxViewReplayMax},
	}); err != nil {
		return err
	}
	if (p.HotOnRate != nil || p.HotOffRate != nil) && c.HotOffRate >= c.HotOnRate {
		return parley.Errorf(parley.EINVALID, "hot_off_rate (%d) must be below hot_on_rate (%d)", c.HotOffRate, c.HotOnRate)
	}
	return nil
}
