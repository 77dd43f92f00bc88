package edge

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"parley"
)

func request(remote string, xff ...string) *http.Request {
	r, _ := http.NewRequest("GET", "http://example.com/", nil)
	r.RemoteAddr = remote
	for _, v := range xff {
		r.Header.Add("X-Forwarded-For", v)
	}
	return r
}

func TestClientIP(t *testing.T) {
	proxies := MustProxies("10.0.0.0/8", "::1", "2001:db8:1::/48")
	for _, tc := range []struct {
		name    string
		proxies Proxies
		remote  string
		xff     []string
		want    string
	}{
		{"no proxies: header ignored", Proxies{}, "198.51.100.7:4000", []string{"203.0.113.1"}, "198.51.100.7"},
		{"untrusted peer: header ignored", proxies, "198.51.100.7:4000", []string{"203.0.113.1"}, "198.51.100.7"},
		{"one proxy", proxies, "10.0.0.2:4000", []string{"203.0.113.1"}, "203.0.113.1"},
		{"client-supplied entries on the left are ignored", proxies, "10.0.0.2:4000", []string{"1.1.1.1, 203.0.113.1"}, "203.0.113.1"},
		{"two proxies", proxies, "10.0.0.2:4000", []string{"1.1.1.1, 203.0.113.1, 10.9.9.9"}, "203.0.113.1"},
		{"several header lines read as one list", proxies, "10.0.0.2:4000", []string{"1.1.1.1, 203.0.113.1", "10.9.9.9"}, "203.0.113.1"},
		{"trusted peer without header", proxies, "10.0.0.2:4000", nil, "10.0.0.2"},
		{"only proxies in the chain", proxies, "10.0.0.2:4000", []string{"10.0.0.3"}, "10.0.0.3"},
		{"garbage from a trusted hop stops the walk", proxies, "10.0.0.2:4000", []string{"1.1.1.1, bogus"}, "10.0.0.2"},
		{"ports in entries", proxies, "10.0.0.2:4000", []string{"[2001:db8:2::5]:443"}, "2001:db8:2::5"},
		{"IPv6 peer", proxies, "[::1]:4000", []string{"203.0.113.1"}, "203.0.113.1"},
		{"IPv4-mapped peer", proxies, "[::ffff:10.0.0.2]:4000", []string{"203.0.113.1"}, "203.0.113.1"},
		{"mapped entries unmapped", proxies, "10.0.0.2:4000", []string{"::ffff:203.0.113.1"}, "203.0.113.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.proxies.ClientIP(request(tc.remote, tc.xff...)); got != tc.want {
				t.Errorf("ClientIP = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseProxies(t *testing.T) {
	p, err := ParseProxies([]string{"10.0.0.0/8", " 192.168.1.1 ", "", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.String(); got != "10.0.0.0/8,192.168.1.1/32,fd00::/8" {
		t.Errorf("String = %q", got)
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0"} {
		if _, err := ParseProxies([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestIPKey(t *testing.T) {
	for in, want := range map[string]string{
		"203.0.113.1":          "203.0.113.1",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"2001:db8:1:2::9":      "2001:db8:1:2::/64",
		"not an ip":            "not an ip",
	} {
		if got := IPKey(in); got != want {
			t.Errorf("IPKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLimiterEvictsIdleKeys(t *testing.T) {
	k := NewLimiter(parley.Rate{PerMinute: 60, Burst: 2}, 1000)
	now := time.Unix(1_000_000, 0)
	for i := range 500 {
		if wait, _ := k.Reserve(fmt.Sprint("ip-", i), now); wait != 0 {
			t.Fatalf("first reserve of a key waited %v", wait)
		}
	}
	if k.Len() != 500 {
		t.Fatalf("size %d, want 500", k.Len())
	}
	// Two seconds later every bucket is full again: the next sweep drops
	// them all but the key being used.
	now = now.Add(sweepEvery + 2*time.Second)
	k.Reserve("fresh", now)
	if k.Len() != 1 {
		t.Errorf("after sweep size %d, want 1", k.Len())
	}
	// The cap holds even for a flood of keys in one instant.
	small := NewLimiter(parley.Rate{PerMinute: 1, Burst: 1}, 10)
	for i := range 100 {
		small.Reserve(fmt.Sprint("k", i), now)
	}
	if small.Len() > 10 {
		t.Errorf("size %d over the cap of 10", small.Len())
	}
}

func TestAllowAllOrNothing(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	a := NewLimiter(parley.Rate{PerMinute: 60, Burst: 3}, 100)
	b := NewLimiter(parley.Rate{PerMinute: 60, Burst: 1}, 100)
	if i, _ := AllowAll(now, Check{a, "x"}, Check{b, "y"}); i != -1 {
		t.Fatalf("refused by %d", i)
	}
	// b refuses; a's token must be given back.
	for range 5 {
		i, wait := AllowAll(now, Check{a, "x"}, Check{b, "y"})
		if i != 1 || wait <= 0 {
			t.Fatalf("got (%d, %v), want b to refuse with a wait", i, wait)
		}
	}
	if wait, _ := a.Reserve("x", now); wait != 0 {
		t.Errorf("a lost tokens to refused requests")
	}
}

func TestLimiterSetRate(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := NewLimiter(parley.Rate{PerMinute: 60, Burst: 1}, 0)
	if !l.Allow("k", now) || l.Allow("k", now) {
		t.Fatal("burst of 1 not enforced")
	}
	l.SetRate(parley.Rate{PerMinute: 60, Burst: 3})
	for i := range 3 {
		if !l.Allow("k", now) {
			t.Fatalf("after raising the burst, call %d refused", i)
		}
	}
	if l.Allow("k", now) {
		t.Error("new burst of 3 not enforced")
	}
	l.SetRate(parley.RateOff)
	for range 100 {
		if !l.Allow("k", now) {
			t.Fatal("off limiter refused")
		}
	}
}
