package liveconfig

import (
	"encoding/json"
	"testing"

	"parley"
)

func TestHotPatch(t *testing.T) {
	base := parley.DefaultLiveConfig()
	for _, tc := range []struct {
		patch string
		ok    bool
	}{
		{`{"hot_on_rate": 50, "hot_off_rate": 25}`, true},
		{`{"hot_off_rate": 20}`, false}, // not below the default on rate 20
		{`{"hot_on_rate": 0}`, false},
		{`{"hot_on_rate": -5}`, false},
		{`{"hot_batch_ms": 1001}`, false},
		{`{"hot_batch_ms": 0}`, true},
		{`{"view_summary_seconds": 0}`, false},
		{`{"view_summary_seconds": 61}`, false},
		{`{"view_min_members": -1}`, false},
		{`{"view_replay_max": 10001}`, false},
		{`{"view_enabled": false, "view_dry_run": true, "hot_dry_run": true}`, true},
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
		var got map[string]any
		json.Unmarshal(out, &got)
		var want map[string]any
		json.Unmarshal([]byte(tc.patch), &want)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %v, want %v", tc.patch, k, got[k], v)
			}
		}
	}
}
