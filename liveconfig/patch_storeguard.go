package liveconfig

import "parley"

// StoreGuardPatch holds the store guard keys of a change
// (docs/store-guard.md).
type StoreGuardPatch struct {
	StoreGuardEnabled             *bool `json:"store_guard_enabled,omitempty"`
	StoreGuardDryRun              *bool `json:"store_guard_dry_run,omitempty"`
	StoreGuardWrites              *int  `json:"store_guard_writes,omitempty"`
	StoreGuardHistory             *int  `json:"store_guard_history,omitempty"`
	StoreGuardSearch              *int  `json:"store_guard_search,omitempty"`
	StoreGuardBoot                *int  `json:"store_guard_boot,omitempty"`
	StoreGuardReads               *int  `json:"store_guard_reads,omitempty"`
	StoreGuardWaitMs              *int  `json:"store_guard_wait_ms,omitempty"`
	StoreGuardErrorRatePct        *int  `json:"store_guard_error_rate_pct,omitempty"`
	StoreGuardMinCalls            *int  `json:"store_guard_min_calls,omitempty"`
	StoreGuardConsecutiveFailures *int  `json:"store_guard_consecutive_failures,omitempty"`
	StoreGuardSlowCallMs          *int  `json:"store_guard_slow_call_ms,omitempty"`
	StoreGuardWindowSeconds       *int  `json:"store_guard_window_seconds,omitempty"`
	StoreGuardOpenSeconds         *int  `json:"store_guard_open_seconds,omitempty"`
}

// apply sets c's store guard keys that p gives.
func (p StoreGuardPatch) apply(c *parley.LiveConfig) error {
	setBool(p.StoreGuardEnabled, &c.StoreGuardEnabled)
	setBool(p.StoreGuardDryRun, &c.StoreGuardDryRun)
	return setInts([]intKey{
		{"store_guard_writes", p.StoreGuardWrites, &c.StoreGuardWrites, 1, parley.MaxStoreGuardBulkhead},
		{"store_guard_history", p.StoreGuardHistory, &c.StoreGuardHistory, 1, parley.MaxStoreGuardBulkhead},
		{"store_guard_search", p.StoreGuardSearch, &c.StoreGuardSearch, 1, parley.MaxStoreGuardBulkhead},
		{"store_guard_boot", p.StoreGuardBoot, &c.StoreGuardBoot, 1, parley.MaxStoreGuardBulkhead},
		{"store_guard_reads", p.StoreGuardReads, &c.StoreGuardReads, 1, parley.MaxStoreGuardBulkhead},
		{"store_guard_wait_ms", p.StoreGuardWaitMs, &c.StoreGuardWaitMs, 0, parley.MaxStoreGuardWaitMs},
		{"store_guard_error_rate_pct", p.StoreGuardErrorRatePct, &c.StoreGuardErrorRatePct, 1, 100},
		{"store_guard_min_calls", p.StoreGuardMinCalls, &c.StoreGuardMinCalls, 1, parley.MaxStoreGuardMinCalls},
		{"store_guard_consecutive_failures", p.StoreGuardConsecutiveFailures, &c.StoreGuardConsecutiveFailures, 1, parley.MaxStoreGuardMinCalls},
		{"store_guard_slow_call_ms", p.StoreGuardSlowCallMs, &c.StoreGuardSlowCallMs, 1, parley.MaxStoreGuardSlowCallMs},
		{"store_guard_window_seconds", p.StoreGuardWindowSeconds, &c.StoreGuardWindowSeconds, 1, parley.MaxStoreGuardWindowSeconds},
		{"store_guard_open_seconds", p.StoreGuardOpenSeconds, &c.StoreGuardOpenSeconds, 1, parley.MaxStoreGuardOpenSeconds},
	})
}
