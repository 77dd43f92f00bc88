package liveconfig

import (
	"testing"

	"parley"
)

func TestJoinPatch(t *testing.T) {
	base := parley.DefaultLiveConfig()
	checkPatches(t, base, []patchCase{
		{`{"join_rate_channel_node": 200, "join_rate_channel_cluster": 2000, "join_burst": 100}`, true},
		{`{"join_rate_channel_node": 0, "join_rate_channel_cluster": 0}`, true}, // no limits
		{`{"join_rate_channel_node": -1}`, false},
		{`{"join_rate_channel_cluster": -1}`, false},
		{`{"join_rate_channel_cluster": 1000001}`, false},
		{`{"join_burst": 0}`, false},
		{`{"join_burst": 1000001}`, false},
		{`{"join_limit_enabled": false, "join_limit_dry_run": true}`, true},
		{`{"slow_mode_enabled": false, "slow_mode_dry_run": true}`, true},
	})
}
