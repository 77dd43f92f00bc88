package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"parley"
)

// joinCfg is a live configuration with the join limiter set to j.
func joinCfg(j parley.JoinLimitConfig) parley.StaticConfig {
	c := parley.DefaultLiveConfig()
	c.JoinLimitConfig = j
	return parley.StaticConfig(c)
}

// joinTeam is a workspace with n members besides its owner, and the env.
func joinTeam(t *testing.T, n int, adjust func(*Config)) (*env, *account, *parley.Workspace, []*account) {
	t.Helper()
	e := newEnv(t, adjust)
	owner := mustAccount(t, e.store, "owner")
	ws := mustWorkspace(t, e.store, owner)
	var us []*account
	for i := range n {
		us = append(us, mustAccount(t, e.store, fmt.Sprintf("u%d", i)))
	}
	mustJoin(t, e.store, ws, owner, us...)
	return e, owner, ws, us
}

func joinOutcome(e *env, outcome string) float64 {
	return testutil.ToFloat64(e.api.joins.outcomes.WithLabelValues(outcome))
}

// TestJoinLimiterLocal: beyond a channel's per-node burst a join is 429
// with Retry-After; another channel has its own bucket; the bucket refills
// with time; the refusals are counted as local.
func TestJoinLimiterLocal(t *testing.T) {
	e, owner, ws, us := joinTeam(t, 4, func(c *Config) {
		c.Registerer = prometheus.NewRegistry()
		c.Live = joinCfg(parley.JoinLimitConfig{JoinLimitEnabled: true, JoinRateChannelNode: 1, JoinBurst: 2})
	})
	hot := mustChannel(t, e.store, ws, owner, parley.KindPublic)
	calm := mustChannel(t, e.store, ws, owner, parley.KindPublic)
	join := func(u *account, ch *parley.Channel) *response {
		return e.call("POST", "/channels/"+ch.ID+"/join", u.Token, nil)
	}
	mustOK(t, "join 1", join(us[0], hot))
	mustOK(t, "join 2", join(us[1], hot))
	mustRateLimited(t, "join 3 beyond the burst", join(us[2], hot), 2*time.Second)
	if ch, err := e.store.GetChannel(context.Background(), owner.ID, hot.ID); err != nil || ch.MemberCount != 3 {
		t.Fatalf("after a refused join: %+v, %v; want 3 members (the refused join wrote nothing)", ch, err)
	}
	mustOK(t, "another channel", join(us[2], calm))
	e.clock.Advance(time.Second)
	mustOK(t, "join 3 a second later", join(us[2], hot))
	if got := joinOutcome(e, "limited_local"); got != 1 {
		t.Errorf("limited_local = %v, want 1", got)
	}
	if got := joinOutcome(e, "accepted"); got != 4 {
		t.Errorf("accepted = %v, want 4", got)
	}
}

// TestJoinLimiterClusterShare: each node takes the cluster rate divided by
// the live nodes; when the node count changes the share follows.
func TestJoinLimiterClusterShare(t *testing.T) {
	var nodes atomic.Int64
	nodes.Store(4)
	e, owner, ws, us := joinTeam(t, 7, func(c *Config) {
		c.Registerer = prometheus.NewRegistry()
		c.LiveNodes = func() int { return int(nodes.Load()) }
		// 8 a second across 4 nodes: 2 here, a burst of 4 split in 4.
		c.Live = joinCfg(parley.JoinLimitConfig{JoinLimitEnabled: true, JoinRateChannelNode: 1000,
			JoinRateChannelCluster: 8, JoinBurst: 4})
	})
	ch := mustChannel(t, e.store, ws, owner, parley.KindPublic)
	join := func(u *account) *response { return e.call("POST", "/channels/"+ch.ID+"/join", u.Token, nil) }
	mustOK(t, "first join", join(us[0]))
	mustRateLimited(t, "second join at once", join(us[1]), time.Second)
	e.clock.Advance(500 * time.Millisecond) // a 2/s share refills in 0.5 s
	mustOK(t, "after half a second", join(us[1]))
	if got := joinOutcome(e, "limited_cluster"); got != 1 {
		t.Errorf("limited_cluster = %v, want 1", got)
	}
	// Down to one node: the whole rate and burst are this node's (the
	// share's buckets start over full at the new rate).
	nodes.Store(1)
	e.clock.Advance(10 * time.Millisecond) // the local bucket (1000/s) refills
	for i := 2; i < 6; i++ {
		mustOK(t, fmt.Sprintf("one node: join %d", i), join(us[i]))
	}
	mustRateLimited(t, "one node: beyond the burst", join(us[6]), time.Second)
}

// TestJoinLimiterDryRunAndOff: dry run lets every join through and counts
// the would-be refusals; disabled counts nothing.
func TestJoinLimiterDryRunAndOff(t *testing.T) {
	for _, tc := range []struct {
		name         string
		cfg          parley.JoinLimitConfig
		wantDry, acc float64
	}{
		{"dry_run", parley.JoinLimitConfig{JoinLimitEnabled: true, JoinLimitDryRun: true, JoinRateChannelNode: 1, JoinBurst: 1}, 3, 1},
		{"off", parley.JoinLimitConfig{JoinLimitEnabled: false, JoinRateChannelNode: 1, JoinBurst: 1}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, owner, ws, us := joinTeam(t, 4, func(c *Config) {
				c.Registerer = prometheus.NewRegistry()
				c.Live = joinCfg(tc.cfg)
			})
			ch := mustChannel(t, e.store, ws, owner, parley.KindPublic)
			for i, u := range us {
				mustOK(t, fmt.Sprintf("join %d", i), e.call("POST", "/channels/"+ch.ID+"/join", u.Token, nil))
			}
			if got := joinOutcome(e, "dry_run_local"); got != tc.wantDry {
				t.Errorf("dry_run_local = %v, want %v", got, tc.wantDry)
			}
			if got := joinOutcome(e, "accepted"); got != tc.acc {
				t.Errorf("accepted = %v, want %v", got, tc.acc)
			}
			if got := joinOutcome(e, "limited_local"); got != 0 {
				t.Errorf("limited_local = %v, want 0", got)
			}
		})
	}
}

// TestJoinLimiterInvites: accepting an invite (which joins #general) is
// limited per invite code.
func TestJoinLimiterInvites(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Live = joinCfg(parley.JoinLimitConfig{JoinLimitEnabled: true, JoinRateChannelNode: 1, JoinBurst: 1})
	})
	owner := mustAccount(t, e.store, "owner")
	ws := mustWorkspace(t, e.store, owner)
	inv, err := e.store.CreateInvite(context.Background(), owner.ID, ws.ID, parley.InviteParams{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := mustAccount(t, e.store, "a"), mustAccount(t, e.store, "b")
	e.must(http.StatusOK, "POST", "/invites/"+inv.Code+"/accept", a.Token, nil, nil)
	mustRateLimited(t, "second acceptance at once", e.call("POST", "/invites/"+inv.Code+"/accept", b.Token, nil), time.Second)
	e.clock.Advance(time.Second)
	e.must(http.StatusOK, "POST", "/invites/"+inv.Code+"/accept", b.Token, nil, nil)
}

// TestSlowModeOverHTTP: the channel update takes the limits (400 out of
// range, 403 for a member who may not manage the channel) and a post over
// them is 429 with Retry-After and a message that says why.
func TestSlowModeOverHTTP(t *testing.T) {
	e, owner, ws, us := joinTeam(t, 1, func(*Config) {})
	ch := mustChannel(t, e.store, ws, owner, parley.KindPublic)
	bob := us[0]
	e.must(http.StatusOK, "POST", "/channels/"+ch.ID+"/join", bob.Token, nil, nil)
	e.must(http.StatusBadRequest, "PATCH", "/channels/"+ch.ID, owner.Token, map[string]any{"slow_mode_seconds": -1}, nil)
	e.must(http.StatusBadRequest, "PATCH", "/channels/"+ch.ID, owner.Token, map[string]any{"post_limit_per_minute": 1 << 40}, nil)
	e.must(http.StatusBadRequest, "PATCH", "/channels/"+ch.ID, owner.Token, map[string]any{"slow_mode_seconds": "ten"}, nil)
	e.must(http.StatusForbidden, "PATCH", "/channels/"+ch.ID, bob.Token, map[string]any{"slow_mode_seconds": 30}, nil)
	var got parley.Channel
	e.must(http.StatusOK, "PATCH", "/channels/"+ch.ID, owner.Token, map[string]any{"slow_mode_seconds": 30}, &got)
	if got.SlowModeSeconds != 30 {
		t.Fatalf("PATCH answered %+v", got)
	}
	post := func(u *account) *response {
		return e.call("POST", "/channels/"+ch.ID+"/messages", u.Token, map[string]string{"text": "hi"})
	}
	mustOK(t, "bob's first post", post(bob))
	r := post(bob)
	mustRateLimited(t, "bob's second post", r, 30*time.Second)
	if r.Header.Get("Retry-After") != "30" {
		t.Errorf("Retry-After %q, want 30", r.Header.Get("Retry-After"))
	}
	mustOK(t, "the owner is exempt", post(owner))
	mustOK(t, "the owner is exempt", post(owner))
}
