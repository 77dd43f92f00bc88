package liveconfig

import (
	"encoding/json"
	"testing"

	"parley"
)

// patchCase is a patch (JSON) and whether Apply must take it.
type patchCase struct {
	patch string
	ok    bool
}

// checkPatches applies each case to base: a refused one must fail with
// EINVALID, a taken one must set every key it names to its value.
func checkPatches(t *testing.T, base parley.LiveConfig, cases []patchCase) {
	t.Helper()
	for _, tc := range cases {
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
