package liveconfig

import (
	"testing"

	"parley"
)

func TestHotPatch(t *testing.T) {
	base := parley.DefaultLiveConfig()
	checkPatches(t, base, []patchCase{
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
	})
}
