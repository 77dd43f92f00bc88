package liveconfig

import (
	"testing"

	"parley"
)

func TestStoreGuardPatch(t *testing.T) {
	base := parley.DefaultLiveConfig()
	checkPatches(t, base, []patchCase{
		{`{"store_guard_enabled": false, "store_guard_dry_run": true}`, true},
		{`{"store_guard_writes": 1, "store_guard_history": 5, "store_guard_search": 2, "store_guard_boot": 3, "store_guard_reads": 100000}`, true},
		{`{"store_guard_writes": 0}`, false},
		{`{"store_guard_reads": 100001}`, false},
		{`{"store_guard_wait_ms": 0}`, true},
		{`{"store_guard_wait_ms": 1001}`, false},
		{`{"store_guard_error_rate_pct": 0}`, false},
		{`{"store_guard_error_rate_pct": 101}`, false},
		{`{"store_guard_error_rate_pct": 100, "store_guard_min_calls": 1}`, true},
		{`{"store_guard_min_calls": 0}`, false},
		{`{"store_guard_consecutive_failures": 0}`, false},
		{`{"store_guard_consecutive_failures": 5}`, true},
		{`{"store_guard_slow_call_ms": 0}`, false},
		{`{"store_guard_slow_call_ms": 250}`, true},
		{`{"store_guard_window_seconds": 0}`, false},
		{`{"store_guard_open_seconds": 601}`, false},
		{`{"store_guard_open_seconds": 1}`, true},
	})
}
