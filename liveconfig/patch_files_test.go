package liveconfig

import (
	"encoding/json"
	"testing"

	"parley"
)

func TestFilePatch(t *testing.T) {
	base := parley.DefaultLiveConfig()
	if d := base.FileConfig; d.FileMaxMB != 1024 || d.FileWorkspaceQuotaMB != 10240 {
		t.Fatalf("defaults: %+v", d)
	}
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{`{"file_max_mb": 5, "file_workspace_quota_mb": 0}`, true},
		{`{"file_max_mb": -1}`, false},
		{`{"file_workspace_quota_mb": 1073741825}`, false},
	} {
		var p FilePatch
		if err := json.Unmarshal([]byte(tc.body), &p); err != nil {
			t.Fatal(err)
		}
		c := base
		err := p.apply(&c)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v", tc.body, err)
		}
		if tc.ok && (c.FileMaxMB != 5 || c.FileWorkspaceQuotaMB != 0 || c.Quota().MaxFileBytes != 5<<20) {
			t.Errorf("%s: applied %+v", tc.body, c.FileConfig)
		}
	}
}
