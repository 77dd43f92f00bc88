package liveconfig

import (
	"encoding/json"
	"testing"

	"parley"
)

func TestStoreGuardPatch(t *testing.T) {
	base := parley.DefaultLiveConfig()
	for _, tc := range []struct {
		patch string
		ok    bool
	}{
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
	} {
		var p Patch
		if err := json.Unmarshal([]byte(tc.patch), &p); err != nil {
			t.Fatal(err)
		}
		c, err := p.Apply(base)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok %v", tc.patch, err, tc.ok)
			continue
		}
		if err != nil {
			if parley.ErrorCode(err) != parley.EINVALID {
				t.Errorf("%s: code %s, want %s", tc.patch, parley.ErrorCode(err), parley.EINVALID)
			}
			continue
		}
		out, _ := json.Marshal(c)
		var got, want map[string]any
		json.Unmarshal(out, &got)
		json.Unmarshal([]byte(tc.patch), &want)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %v, want %v", tc.patch, k, got[k], v)
			}
		}
	}
}
