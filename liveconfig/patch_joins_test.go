package liveconfig

import (
	"encoding/json"
	"testing"

	"parley"
)

func TestJoinPatch(t *testing.T) {
	base := parley.DefaultLiveConfig()
	for _, tc := range []struct {
		patch string
		ok    bool
	}{
		{`{"join_rate_channel_node": 200, "join_rate_channel_cluster": 2000, "join_burst": 100}`, true},
		{`{"join_rate_channel_node": 0, "join_rate_channel_cluster": 0}`, true}, // no limits
		{`{"join_rate_channel_node": -1}`, false},
		{`{"join_rate_channel_cluster": -1}`, false},
		{`{"join_rate_channel_cluster": 1000001}`, false},
		{`{"join_burst": 0}`, false},
		{`{"join_burst": 1000001}`, false},
		{`{"join_limit_enabled": false, "join_limit_dry_run": true}`, true},
		{`{"slow_mode_enabled": false, "slow_mode_dry_run": true}`, true},
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
