package liveconfig

import (
	"encoding/json"
	"testing"

	"parley"
)

func TestRecentPatch(t *testing.T) {
	base := parley.DefaultLiveConfig()
	for _, tc := range []struct {
		patch string
		ok    bool
	}{
		{`{"recent_events": 500}`, true},
		{`{"recent_events": 0}`, false},
		{`{"recent_events": 100001}`, false},
		{`{"recent_enabled": false, "recent_dry_run": true}`, true},
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
		if err != nil && parley.ErrorCode(err) != parley.EINVALID {
			t.Errorf("%s: code %s, want EINVALID", tc.patch, parley.ErrorCode(err))
		}
		if tc.patch == `{"recent_events": 500}` && c.RecentEvents != 500 {
			t.Errorf("recent_events not applied: %d", c.RecentEvents)
		}
	}
	if d := base.RecentConfig; !d.RecentEnabled || d.RecentDryRun || d.RecentEvents != 1000 {
		t.Errorf("defaults %+v", d)
	}
}
