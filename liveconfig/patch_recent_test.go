package liveconfig

import (
	"testing"

	"parley"
)

func TestRecentPatch(t *testing.T) {
	base := parley.DefaultLiveConfig()
	checkPatches(t, base, []patchCase{
		{`{"recent_events": 500}`, true},
		{`{"recent_events": 0}`, false},
		{`{"recent_events": 100001}`, false},
		{`{"recent_enabled": false, "recent_dry_run": true}`, true},
	})
	if d := base.RecentConfig; !d.RecentEnabled || d.RecentDryRun || d.RecentEvents != 1000 {
		t.Errorf("defaults %+v", d)
	}
}
