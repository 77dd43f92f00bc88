package liveconfig

import (
	"testing"

	"parley"
)

func TestRelayPatch(t *testing.T) {
	base := parley.DefaultLiveConfig()
	checkPatches(t, base, []patchCase{
		{`{"relay_grace_ms": 2000, "relay_interval_ms": 100}`, true},
		{`{"relay_grace_ms": 99}`, false},
		{`{"relay_grace_ms": 600001}`, false},
		{`{"relay_interval_ms": 9}`, false},
		{`{"relay_interval_ms": 60001}`, false},
	})
	if d := base.RelayConfig; d.RelayGraceMS != 1000 || d.RelayIntervalMS != 250 {
		t.Errorf("defaults %+v", d)
	}
}
