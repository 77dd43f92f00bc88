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

// setBool sets *to when from is given.
func setBool(from *bool, to *bool) {
	if from != nil {
		*to = *from
	}
}

// setInt sets *to when from is given and within [lo, hi], else EINVALID
// naming the key.
func setInt(key string, from *int, to *int, lo, hi int) error {
	if from == nil {
		return nil
	}
	if *from < lo || *from > hi {
		return parley.Errorf(parley.EINVALID, "%s must be %d to %d", key, lo, hi)
	}
	*to = *from
	return nil
}

// apply sets c's hot and view keys that p gives.
func (p HotPatch) apply(c *parley.LiveConfig) error {
	setBool(p.HotEnabled, &c.HotEnabled)
	setBool(p.HotDryRun, &c.HotDryRun)
	setBool(p.ViewEnabled, &c.ViewEnabled)
	setBool(p.ViewDryRun, &c.ViewDryRun)
	for _, f := range []struct {
		key    string
		from   *int
		to     *int
		lo, hi int
	}{
		{"hot_on_rate", p.HotOnRate, &c.HotOnRate, 1, parley.MaxHotRate},
		{"hot_off_rate", p.HotOffRate, &c.HotOffRate, 0, parley.MaxHotRate},
		{"hot_window_seconds", p.HotWindowSeconds, &c.HotWindowSeconds, 1, parley.MaxHotWindowSeconds},
		{"hot_ttl_seconds", p.HotTTLSeconds, &c.HotTTLSeconds, 1, parley.MaxHotTTLSeconds},
		{"hot_batch_ms", p.HotBatchMs, &c.HotBatchMs, 0, parley.MaxHotBatchMs},
		{"hot_typing_interval_ms", p.HotTypingIntervalMs, &c.HotTypingIntervalMs, 0, parley.MaxHotTypingIntervalMs},
		{"view_min_members", p.ViewMinMembers, &c.ViewMinMembers, 0, 1 << 30},
		{"view_summary_seconds", p.ViewSummarySeconds, &c.ViewSummarySeconds, 1, parley.MaxViewSummarySeconds},
		{"view_replay_max", p.ViewReplayMax, &c.ViewReplayMax, 0, parley.MaxViewReplayMax},
	} {
		if err := setInt(f.key, f.from, f.to, f.lo, f.hi); err != nil {
			return err
		}
	}
	if (p.HotOnRate != nil || p.HotOffRate != nil) && c.HotOffRate >= c.HotOnRate {
		return parley.Errorf(parley.EINVALID, "hot_off_rate (%d) must be below hot_on_rate (%d)", c.HotOffRate, c.HotOnRate)
	}
	return nil
}
