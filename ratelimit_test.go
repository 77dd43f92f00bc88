package parley

import (
	"encoding/json"
	"testing"
)

func TestParseRate(t *testing.T) {
	for in, want := range map[string]Rate{
		"120/min,burst=60": {PerMinute: 120, Burst: 60},
		" 120/MIN ":        {PerMinute: 120, Burst: 120},
		"0.5/min":          {PerMinute: 0.5, Burst: 1},
		"off":              RateOff,
		"default":          {},
		"":                 {},
	} {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if back, _ := ParseRate(got.String()); back != got {
			t.Errorf("%q does not round-trip through %q", in, got.String())
		}
	}
	for _, bad := range []string{"120", "0/min", "-5/min", "NaN/min", "5/min,burst=0", "5/min,60", "5/s", "2000000/min"} {
		if _, err := ParseRate(bad); ErrorCode(err) != EINVALID {
			t.Errorf("ParseRate(%q): err %v, want EINVALID", bad, err)
		}
	}
}

func TestLiveRatesJSON(t *testing.T) {
	c := DefaultLiveConfig()
	c.MessageUser = Rate{PerMinute: 30, Burst: 10}
	c.SearchIP = RateOff
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back LiveConfig
	if err := json.Unmarshal(raw, &back); err != nil || back != c {
		t.Fatalf("round trip %s: %+v, %v", raw, back, err)
	}
	var m map[string]any
	json.Unmarshal(raw, &m)
	if m["rate_message_user"] != "30/min,burst=10" || m["rate_search_ip"] != "off" || m["rate_write_user"] != "default" {
		t.Errorf("JSON %s", raw)
	}
	d := LiveRates{MessageUser: Rate{PerMinute: 1, Burst: 1}, SearchIP: Rate{PerMinute: 2, Burst: 2}}
	got := c.LiveRates.Or(d)
	if got.MessageUser != c.MessageUser || got.SearchIP != RateOff || got.WriteUser != (Rate{}) {
		t.Errorf("Or: %+v", got)
	}
	got = LiveRates{}.Or(d)
	if got != d {
		t.Errorf("Or over defaults: %+v", got)
	}
}
