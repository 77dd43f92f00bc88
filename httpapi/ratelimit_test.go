package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"parley"
	"parley/internal/edge"
	"parley/liveconfig"
	"parley/natsbus"
	"parley/sqlstore"
)

// callFrom is e.call as a client at ip behind a trusted proxy on
// loopback, with extra cookies.
func (e *env) callFrom(ip, method, path, token string, body any, cookies ...*http.Cookie) *response {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.srv.URL+Prefix+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("X-Forwarded-For", ip)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return &response{Status: res.StatusCode, Header: res.Header, Body: raw}
}

var loopbackProxy = edge.MustProxies("127.0.0.1", "::1")

// mustRateLimited fails unless r is the API's 429: code rate_limited and a
// Retry-After of a whole number of seconds within max.
func mustRateLimited(t *testing.T, what string, r *response, maxWait time.Duration) {
	t.Helper()
	if r.Status != http.StatusTooManyRequests || r.errCode() != parley.ERATELIMITED {
		t.Fatalf("%s: %d %s, want 429 rate_limited", what, r.Status, r.Body)
	}
	secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || secs < 1 || time.Duration(secs)*time.Second > maxWait {
		t.Fatalf("%s: Retry-After %q, want 1s..%v", what, r.Header.Get("Retry-After"), maxWait)
	}
}

func mustOK(t *testing.T, what string, r *response) {
	t.Helper()
	if r.Status/100 != 2 {
		t.Fatalf("%s: %d %s, want success", what, r.Status, r.Body)
	}
}

// TestTiersLimitPerUserAndPerIP: in every tier a burst beyond the
// per-user limit is 429 with Retry-After, another user from another
// address is unaffected, and the per-IP bucket holds users who share an
// address.
func TestTiersLimitPerUserAndPerIP(t *testing.T) {
	tight := Rate{PerMinute: 60, Burst: 3}   // per user
	tightIP := Rate{PerMinute: 60, Burst: 5} // per IP
	for _, tc := range []struct {
		tier Tier
		set  func(r *parley.LiveRates)
		do   func(tm *team, u *account, ip string, i int) *response
	}{
		{TierMessage, func(r *parley.LiveRates) { r.MessageUser, r.MessageIP = tight, tightIP },
			func(tm *team, u *account, ip string, i int) *response {
				ch := mustChannel(tm.e.t, tm.e.store, tm.ws, u, parley.KindPublic)
				return tm.e.callFrom(ip, "POST", "/channels/"+ch.ID+"/messages", u.Token, map[string]string{"text": "hi"})
			}},
		{TierWrite, func(r *parley.LiveRates) { r.WriteUser, r.WriteIP = tight, tightIP },
			func(tm *team, u *account, ip string, i int) *response {
				ch := mustChannel(tm.e.t, tm.e.store, tm.ws, u, parley.KindPublic)
				m := mustPost(tm.e.t, tm.e.store, u, ch, "hi")
				return tm.e.callFrom(ip, "PUT", "/messages/"+m.ID+"/reactions/tada", u.Token, nil)
			}},
		{TierCreate, func(r *parley.LiveRates) { r.CreateUser, r.CreateIP = tight, tightIP },
			func(tm *team, u *account, ip string, i int) *response {
				return tm.e.callFrom(ip, "POST", "/workspaces/"+tm.ws.ID+"/channels", u.Token,
					map[string]string{"name": "c-" + uniq(), "kind": "public"})
			}},
		{TierSearch, func(r *parley.LiveRates) { r.SearchUser, r.SearchIP = tight, tightIP },
			func(tm *team, u *account, ip string, i int) *response {
				return tm.e.callFrom(ip, "GET", "/workspaces/"+tm.ws.ID+"/search?q=hello", u.Token, nil)
			}},
	} {
		t.Run(string(tc.tier), func(t *testing.T) {
			reg := prometheus.NewRegistry()
			e := newEnv(t, func(c *Config) {
				c.TrustedProxies = loopbackProxy
				c.Registerer = reg
				tc.set(&c.Rates)
			})
			tm := &team{e: e, owner: mustAccount(t, e.store, "owner"), bob: mustAccount(t, e.store, "bob"), cat: mustAccount(t, e.store, "cat")}
			tm.ws = mustWorkspace(t, e.store, tm.owner)
			mustJoin(t, e.store, tm.ws, tm.owner, tm.bob, tm.cat)
			const ipA, ipB, ipC = "198.51.100.1", "198.51.100.2", "198.51.100.3"

			for i := range 3 {
				mustOK(t, fmt.Sprintf("bob's call %d", i), tc.do(tm, tm.bob, ipA, i))
			}
			mustRateLimited(t, "bob beyond his burst", tc.do(tm, tm.bob, ipA, 3), 2*time.Second)
			// cat shares bob's address: the address has 2 of its 5 left.
			mustOK(t, "cat at A", tc.do(tm, tm.cat, ipA, 0))
			mustOK(t, "cat at A", tc.do(tm, tm.cat, ipA, 1))
			mustRateLimited(t, "cat at A once the address is spent", tc.do(tm, tm.cat, ipA, 2), 2*time.Second)
			// cat elsewhere has her own bucket left (the refused call took
			// none of it); the owner elsewhere is untouched.
			mustOK(t, "cat at B", tc.do(tm, tm.cat, ipB, 3))
			mustOK(t, "owner at C", tc.do(tm, tm.owner, ipC, 0))
			// After Retry-After bob may go on.
			e.clock.Advance(time.Second)
			mustOK(t, "bob a second later", tc.do(tm, tm.bob, ipC, 4))

			for _, key := range []string{"user", "ip"} {
				if got := testutil.ToFloat64(e.api.metrics.rejected.WithLabelValues(string(tc.tier), key)); got != 1 {
					t.Errorf("parley_ratelimit_rejections_total{tier=%s,key=%s} = %v, want 1", tc.tier, key, got)
				}
			}
		})
	}
}

// TestLiveRateChange: a rate_* change in the live configuration applies
// to the next request, without a restart, and "default" gives the node's
// own value back.
func TestLiveRateChange(t *testing.T) {
	clk := newClock()
	st := openStore(t, sqlstore.SQLite, clk.Now)
	bus, err := natsbus.Start(natsbus.Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bus.Close() })
	live := liveconfig.New(liveconfig.Options{Logger: quietLogger(), Refresh: -1})
	if err := live.Start(context.Background(), st, bus); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(live.Stop)
	e := newEnvWithStore(t, st, clk, func(c *Config) { c.Live = live })
	bob := mustAccount(t, st, "bob")
	ws := mustWorkspace(t, st, bob)
	ch := mustChannel(t, st, ws, bob, parley.KindPublic)
	post := func() *response {
		return e.call("POST", "/channels/"+ch.ID+"/messages", bob.Token, map[string]string{"text": "hi"})
	}
	for i := range 5 {
		mustOK(t, fmt.Sprintf("post %d at the default", i), post())
	}
	set := func(r parley.Rate) {
		t.Helper()
		if _, err := live.Update(context.Background(), liveconfig.Patch{RatePatch: liveconfig.RatePatch{RateMessageUser: &r}}, false); err != nil {
			t.Fatal(err)
		}
	}
	set(Rate{PerMinute: 1, Burst: 1})
	mustOK(t, "first post at 1/min", post())
	mustRateLimited(t, "second post at 1/min", post(), time.Minute)
	var b parley.Boot
	e.must(http.StatusOK, "POST", "/boot", bob.Token, map[string]string{"workspace_id": ws.ID}, &b)
	if got := b.Limits.RateLimits["message_per_user"]; got.PerMinute != 1 || got.Burst != 1 {
		t.Errorf("boot reports %+v, want the live 1/min", got)
	}
	set(Rate{}) // back to the node's default
	for i := range 5 {
		mustOK(t, fmt.Sprintf("post %d after the reset", i), post())
	}
}

// TestDefaultsAllowHumanUse: with the default limits, a very busy person
// never meets a 429 (bursts after a reconnect, then an hour of steady
// chatting), while a script creating channels as fast as it can is held
// to its burst.
func TestDefaultsAllowHumanUse(t *testing.T) {
	tm := newTeam(t)
	e := tm.e
	ch := mustChannel(t, e.store, tm.ws, tm.bob, parley.KindPublic)
	var m parley.Message
	step := func(what string, r *response) {
		t.Helper()
		if r.Status == http.StatusTooManyRequests {
			t.Fatalf("%s: a person met a rate limit: %s", what, r.Body)
		}
		mustOK(t, what, r)
	}
	post := func() *response {
		r := e.call("POST", "/channels/"+ch.ID+"/messages", tm.bob.Token, map[string]string{"text": "hello " + uniq()})
		if r.Status == http.StatusCreated {
			r.decode(t, &m)
		}
		return r
	}
	// A reconnect sends the 30 messages queued while offline at once, a
	// flurry of 20 reactions, 10 new channels and DMs, 10 searches.
	for i := range 30 {
		step(fmt.Sprintf("queued message %d", i), post())
	}
	emoji := []string{"tada", "eyes", "heart", "rocket", "smile", "wave", "fire", "100", "ok", "pray"}
	for i := range 20 {
		method := "PUT"
		if i >= 10 {
			method = "DELETE"
		}
		step("reaction", e.call(method, "/messages/"+m.ID+"/reactions/"+emoji[i%10], tm.bob.Token, nil))
	}
	for range 10 {
		step("new channel", e.call("POST", "/workspaces/"+tm.ws.ID+"/channels", tm.bob.Token,
			map[string]string{"name": "c-" + uniq(), "kind": "public"}))
		step("search", e.call("GET", "/workspaces/"+tm.ws.ID+"/search?q=hello", tm.bob.Token, nil))
	}
	// Then an hour of fast chat: a message every 3 s, a reaction and a
	// read marker every 6 s, a search every 30 s, a channel or DM every
	// 2 minutes.
	for s := 3; s <= 3600; s += 3 {
		e.clock.Advance(3 * time.Second)
		step("message", post())
		if s%6 == 0 {
			step("reaction", e.call("PUT", "/messages/"+m.ID+"/reactions/tada", tm.bob.Token, nil))
			step("read marker", e.call("POST", "/channels/"+ch.ID+"/read", tm.bob.Token, map[string]any{"seq": m.Seq}))
		}
		if s%30 == 0 {
			step("search", e.call("GET", "/workspaces/"+tm.ws.ID+"/search?q=hello", tm.bob.Token, nil))
		}
		if s%120 == 0 {
			step("channel", e.call("POST", "/workspaces/"+tm.ws.ID+"/channels", tm.bob.Token,
				map[string]string{"name": "c-" + uniq(), "kind": "public"}))
		}
	}

	// A script creating channels in one instant gets its burst, no more.
	created := 0
	for range 200 {
		r := e.call("POST", "/workspaces/"+tm.ws.ID+"/channels", tm.cat.Token,
			map[string]string{"name": "s-" + uniq(), "kind": "public"})
		if r.Status == http.StatusTooManyRequests {
			break
		}
		mustOK(t, "script channel", r)
		created++
	}
	if want := DefaultRates.CreateUser.Burst; created != want {
		t.Errorf("a script created %d channels in one instant, want the burst of %d", created, want)
	}
}
