package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"parley"
	"parley/client"
)

// Plan is what the setup phase made and every worker process reads: the
// workspace, its users with their tokens, and the channels the scenario
// uses. It holds tokens: it is written 0600.
type Plan struct {
	BaseURL     string     `json:"base_url"`
	WorkspaceID string     `json:"workspace_id"`
	Owner       PlanUser   `json:"owner"`
	Users       []PlanUser `json:"users"`
	General     string     `json:"general"`  // #general: everyone is in it
	Channels    []string   `json:"channels"` // every channel of the workspace's setup, #general first
	// Spike is join-spike's channel: the owner and the watchers are in it.
	Spike string `json:"spike,omitempty"`
	// Audience is the audience scenario's setup.
	Audience *audiencePlan `json:"audience,omitempty"`
	// Start is the origin of every process's timeline.
	Start time.Time `json:"start"`
}

// PlanUser is one user of the run.
type PlanUser struct {
	ID    string `json:"id"`
	Token string `json:"token"`
}

// seedFile is the part of `parley seed`'s JSON the load tester reads.
type seedFile struct {
	BaseURL     string     `json:"base_url"`
	WorkspaceID string     `json:"workspace_id"`
	Owner       PlanUser   `json:"owner"`
	Users       []PlanUser `json:"users"`
	Channels    []struct {
		ID string `json:"id"`
	} `json:"channels"`
}

// planFromSeed reads `parley seed --out` output.
func planFromSeed(path string) (*Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read seed: %w", err)
	}
	var s seedFile
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("decode seed %s: %w", path, err)
	}
	if s.WorkspaceID == "" || s.Owner.Token == "" || len(s.Channels) == 0 {
		return nil, fmt.Errorf("seed %s: no workspace, owner token or channels", path)
	}
	p := &Plan{BaseURL: s.BaseURL, WorkspaceID: s.WorkspaceID, Owner: s.Owner, Users: s.Users, General: s.Channels[0].ID}
	for _, c := range s.Channels {
		p.Channels = append(p.Channels, c.ID)
	}
	return p, nil
}

// ParseSourceIPs reads "127.0.0.1-127.0.0.8" or "127.0.0.1,127.0.0.2" (or
// a mix) into addresses; "" gives none (the system picks).
func ParseSourceIPs(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := netip.ParseAddr(lo)
		if err != nil {
			return nil, fmt.Errorf("source address %q: %w", lo, err)
		}
		b := a
		if isRange {
			if b, err = netip.ParseAddr(hi); err != nil {
				return nil, fmt.Errorf("source address %q: %w", hi, err)
			}
		}
		if b.Less(a) || a.Is4() != b.Is4() {
			return nil, fmt.Errorf("source range %q runs backwards", part)
		}
		for ip := a; ; ip = ip.Next() {
			out = append(out, ip)
			if len(out) > 4096 {
				return nil, errors.New("more than 4096 source addresses")
			}
			if ip == b {
				break
			}
		}
	}
	return out, nil
}

// httpClients returns one HTTP client per source address (or one for the
// system's choice): each user's API calls leave from its address.
func httpClients(ips []netip.Addr) []*http.Client {
	mk := func(local net.Addr) *http.Client {
		d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, LocalAddr: local}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = d.DialContext
		tr.MaxIdleConnsPerHost = 256
		tr.MaxIdleConns = 1024
		return &http.Client{Timeout: client.DefaultTimeout, Transport: tr}
	}
	if len(ips) == 0 {
		return []*http.Client{mk(nil)}
	}
	out := make([]*http.Client, len(ips))
	for i, ip := range ips {
		out[i] = mk(&net.TCPAddr{IP: ip.AsSlice()})
	}
	return out
}

// setupAPI makes a workspace through the public API: an owner, users
// signing up (argon2 on the server, and the signup rate limit per client
// address — this path suits up to a few hundred users), extra channels
// that users join round-robin.
func setupAPI(ctx context.Context, cfg *Config, hcs []*http.Client) (*Plan, error) {
	run := strconv.FormatInt(time.Now().UnixNano()%1e12, 36)
	const pw = "loadtest-password-1"
	owner := client.New(cfg.URL, client.WithHTTPClient(hcs[0]), client.WithLogger(cfg.Log))
	oa, err := signup(ctx, owner, "lt"+run+"-owner", pw)
	if err != nil {
		return nil, fmt.Errorf("setup: owner signup: %w", err)
	}
	ws, err := owner.CreateWorkspace(ctx, "Load test "+run, "lt-"+run)
	if err != nil {
		return nil, fmt.Errorf("setup: workspace: %w", err)
	}
	// The server says its signup limit; refuse a size it would take
	// minutes to sign up, rather than hammering it.
	b, err := owner.Boot(ctx, parley.BootQuery{WorkspaceID: ws.ID})
	if err == nil && b.Limits != nil {
		if rl, ok := b.Limits.RateLimits["signup_per_ip"]; ok && rl.PerMinute > 0 {
			budget := len(hcs)*rl.Burst + int(float64(len(hcs))*rl.PerMinute) // one minute's worth
			if cfg.Users > budget {
				return nil, fmt.Errorf("setup: %d signups from %d source address(es) exceed the server's signup limit (%.0f/min, burst %d per address) for a one-minute setup: seed the database with `parley seed` and pass --seed, or add --source-ips",
					cfg.Users, len(hcs), rl.PerMinute, rl.Burst)
			}
		}
	}
	p := &Plan{BaseURL: cfg.URL, WorkspaceID: ws.ID, Owner: PlanUser{ID: oa.User.ID, Token: oa.Token}}
	page, err := owner.ListChannels(ctx, ws.ID, parley.ChannelQuery{Q: "general", Limit: 1})
	if err != nil || len(page.Channels) != 1 {
		return nil, fmt.Errorf("setup: find #general: %v", err)
	}
	p.General = page.Channels[0].ID
	p.Channels = []string{p.General}
	for i := 1; i <= cfg.Channels; i++ {
		ch, err := owner.CreateChannel(ctx, ws.ID, parley.NewChannel{Name: "load-" + strconv.Itoa(i), Kind: parley.KindPublic})
		if err != nil {
			return nil, fmt.Errorf("setup: channel: %w", err)
		}
		p.Channels = append(p.Channels, ch.ID)
	}
	inv, err := owner.CreateInvite(ctx, ws.ID, parley.InviteParams{})
	if err != nil {
		return nil, fmt.Errorf("setup: invite: %w", err)
	}
	p.Users = make([]PlanUser, cfg.Users)
	var g errgroup.Group
	g.SetLimit(4) // argon2 costs the server a core per signup
	for i := range cfg.Users {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			c := client.New(cfg.URL, client.WithHTTPClient(hcs[i%len(hcs)]), client.WithLogger(cfg.Log))
			a, err := signup(ctx, c, "lt"+run+"-"+strconv.Itoa(i+1), pw)
			if err == nil {
				_, err = c.AcceptInvite(ctx, inv.Code)
			}
			if err == nil && len(p.Channels) > 1 {
				_, err = c.JoinChannel(ctx, p.Channels[1+i%(len(p.Channels)-1)])
			}
			if err != nil {
				return fmt.Errorf("setup: user %d: %w", i+1, err)
			}
			p.Users[i] = PlanUser{ID: a.User.ID, Token: a.Token}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return p, ctx.Err()
}

// signup creates an account, waiting out the signup rate limit (a refused
// signup created nothing, so it is safe to repeat).
func signup(ctx context.Context, c *client.Client, handle, pw string) (*client.Auth, error) {
	for {
		a, err := c.Signup(ctx, handle+"@loadtest.parley.test", pw, handle, handle)
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests {
			return a, err
		}
		wait := max(ae.RetryAfter, time.Second)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// prepareScenario adds what a scenario needs beyond users and channels.
func prepareScenario(ctx context.Context, cfg *Config, p *Plan, hcs []*http.Client) error {
	if cfg.Scenario == ScenarioAudience {
		return prepareAudience(ctx, cfg, p, hcs)
	}
	if cfg.Scenario != ScenarioJoinSpike {
		return nil
	}
	owner := client.New(cfg.URL, client.WithHTTPClient(hcs[0]), client.WithToken(p.Owner.Token), client.WithLogger(cfg.Log))
	name := "spike-" + strconv.FormatInt(time.Now().UnixNano()%1e12, 36)
	ch, err := owner.CreateChannel(ctx, p.WorkspaceID, parley.NewChannel{Name: name, Kind: parley.KindPublic})
	if err != nil {
		return fmt.Errorf("join-spike: create channel: %w", err)
	}
	p.Spike = ch.ID
	var ids []string
	for _, u := range p.Users[:min(cfg.Watchers, len(p.Users))] {
		ids = append(ids, u.ID)
	}
	for len(ids) > 0 {
		n := min(len(ids), parley.MaxAddMembers)
		if _, err := owner.AddMembers(ctx, ch.ID, ids[:n]); err != nil {
			return fmt.Errorf("join-spike: add watchers: %w", err)
		}
		ids = ids[n:]
	}
	return nil
}
