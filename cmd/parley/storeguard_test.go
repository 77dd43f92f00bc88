package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"parley"
	"parley/internal/faultproxy"
	"parley/internal/testpg"
	"parley/liveconfig"
)

// guardNode is an in-process node on PostgreSQL reached through a fault
// proxy.
type guardNode struct {
	n     *node
	proxy *faultproxy.Proxy
	api   string // http://host:port/api/v1
	admin string // http://host:port
}

// startGuardNode runs a demo node whose database connection goes through a
// fault-injecting proxy in front of a fresh PostgreSQL database.
func startGuardNode(t testing.TB, patch liveconfig.StoreGuardPatch) *guardNode {
	t.Helper()
	u, err := url.Parse(testpg.New(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = proxy.Addr()
	var n *node
	switch tt := t.(type) {
	case *testing.T:
		n = startInProcess(tt, "--db", u.String())
	default:
		t.Fatal("startGuardNode needs a *testing.T")
	}
	t.Cleanup(func() {
		proxy.Heal() // let the node close its connections cleanly
		n.Close()
		proxy.Close()
	})
	if _, err := n.config.Update(context.Background(), liveconfig.Patch{StoreGuardPatch: patch}, false); err != nil {
		t.Fatal(err)
	}
	return &guardNode{n: n, proxy: proxy,
		api:   "http://" + n.apiLn.Addr().String() + "/api/v1",
		admin: "http://" + n.adminLn.Addr().String()}
}

var guardHTTP = &http.Client{Timeout: 20 * time.Second}

// loadHTTP bounds the load's requests more tightly: those caught inside
// the database when it stalls only come back when it heals.
var loadHTTP = &http.Client{Timeout: 5 * time.Second}

// call makes one API request and returns its status, Retry-After and body.
func (g *guardNode) call(method, path, token string, body any) (int, string, []byte, error) {
	return g.callWith(guardHTTP, method, path, token, body)
}

func (g *guardNode) callWith(hc *http.Client, method, path, token string, body any) (int, string, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, g.api+path, rd)
	if err != nil {
		return 0, "", nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := hc.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Retry-After"), raw, nil
}

func (g *guardNode) login(t testing.TB, email string) (token, userID string) {
	t.Helper()
	st, _, raw, err := g.call("POST", "/auth/login", "", map[string]string{"email": email, "password": demoPassword})
	if err != nil || st != 200 {
		t.Fatalf("login %s: %d %s %v", email, st, raw, err)
	}
	var r struct {
		Token string  `json:"token"`
		User  apiUser `json:"user"`
	}
	json.Unmarshal(raw, &r)
	return r.Token, r.User.ID
}

// load keeps workers requesting GET /workspaces until stop is called; it
// returns the statuses seen (0: a transport error).
type load struct {
	mu       sync.Mutex
	statuses map[int]int
	stop     chan struct{}
	wg       sync.WaitGroup
}

func (g *guardNode) startLoad(token string, workers int) *load {
	l := &load{statuses: map[int]int{}, stop: make(chan struct{})}
	for range workers {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				st, _, _, _ := g.callWith(loadHTTP, "GET", "/workspaces", token, nil)
				l.mu.Lock()
				l.statuses[st]++
				l.mu.Unlock()
			}
		})
	}
	return l
}

func (l *load) end() map[int]int {
	close(l.stop)
	l.wg.Wait()
	return l.statuses
}

func waitCond(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }

// TestStoreGuardFaultyPostgres stalls, resets and slows the real database
// through a TCP proxy: each fault trips the breaker, the API then fails
// fast with 503 and Retry-After, health answers, the query cache and open
// gateway sessions keep working, and the node recovers by itself once the
// proxy heals.
func TestStoreGuardFaultyPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("fault injection against PostgreSQL")
	}
	g := startGuardNode(t, liveconfig.StoreGuardPatch{
		StoreGuardSlowCallMs: ptr(300), StoreGuardMinCalls: ptr(5), StoreGuardErrorRatePct: ptr(50),
		StoreGuardOpenSeconds: ptr(1), StoreGuardWindowSeconds: ptr(5)})
	alice, aliceID := g.login(t, "alice@demo.parley.dev")
	bob, _ := g.login(t, "bob@demo.parley.dev")
	st, _, raw, err := g.call("GET", "/workspaces", alice, nil)
	if err != nil || st != 200 {
		t.Fatalf("GET /workspaces: %d %s %v", st, raw, err)
	}
	var wss struct {
		Workspaces []struct{ ID string } `json:"workspaces"`
	}
	json.Unmarshal(raw, &wss)
	ws := wss.Workspaces[0].ID
	_, _, raw, _ = g.call("GET", "/workspaces/"+ws+"/channels", bob, nil)
	var chs struct {
		Channels []struct{ ID, Name string } `json:"channels"`
	}
	json.Unmarshal(raw, &chs)
	general := ""
	for _, c := range chs.Channels {
		if c.Name == "general" {
			general = c.ID
		}
	}
	if general == "" {
		t.Fatalf("no #general in %s", raw)
	}
	// Bob's gateway session is open before the faults; the query cache is
	// warm.
	frames := dialGateway(t, strings.Replace(g.api, "http", "ws", 1)+"/gateway")
	frames.send(t, map[string]string{"op": "identify", "token": bob, "workspace_id": ws})
	frames.waitOp(t, "ready")
	frames.send(t, map[string]any{"op": "focus", "channel_ids": []string{general}})
	typing := func() {
		data, _ := json.Marshal(map[string]string{"channel_id": general, "user_id": aliceID})
		g.n.bus.Publish([]parley.Event{{WorkspaceID: ws, ChannelID: general, Type: parley.EventTypingStarted,
			Data: data, CreatedAt: time.Now(), Topics: []string{parley.TopicChannel(general)}}})
	}
	// Typing reaches a session that has the channel in focus: once the
	// first arrives, the focus is in place.
	waitCond(t, "typing to reach the focused session", 30*time.Second, func() bool {
		typing()
		frames.mu.Lock()
		defer frames.mu.Unlock()
		for _, f := range frames.frames {
			if f.T == parley.EventTypingStarted {
				return true
			}
		}
		return false
	})
	if _, err := g.n.cache.Users(context.Background(), ws, []string{aliceID}); err != nil {
		t.Fatal(err)
	}

	for _, fault := range []struct {
		name   string
		inject func()
	}{
		{"black hole", g.proxy.BlackHole},
		{"resets", g.proxy.ResetAll},
		{"latency", func() { g.proxy.AddLatency(600 * time.Millisecond) }},
	} {
		t.Run(fault.name, func(t *testing.T) {
			l := g.startLoad(alice, 8)
			fault.inject()
			waitCond(t, "the breaker to open", 60*time.Second, func() bool { return g.n.guarded.State() == "open" })

			// While open, the API fails fast: any answer at all while the
			// database cannot answer is one the guard gave.
			st, retry, raw, err := g.call("GET", "/workspaces", alice, nil)
			if err != nil || st != http.StatusServiceUnavailable || retry == "" {
				t.Fatalf("GET /workspaces with the breaker open: %d Retry-After %q %s %v", st, retry, raw, err)
			}
			// Health answers (its own bounded ping says the store is down).
			res, err := guardHTTP.Get(g.admin + "/healthz")
			if err != nil {
				t.Fatalf("/healthz during the fault: %v", err)
			}
			res.Body.Close()
			// The query cache answers from memory.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			us, err := g.n.cache.Users(ctx, ws, []string{aliceID})
			cancel()
			if err != nil || len(us) != 1 {
				t.Fatalf("cached users during the fault: %v %v", us, err)
			}
			// An open gateway session still gets what the bus carries.
			frames.mu.Lock()
			before := 0
			for _, f := range frames.frames {
				if f.T == parley.EventTypingStarted {
					before++
				}
			}
			frames.mu.Unlock()
			typing()
			frames.waitEvents(t, parley.EventTypingStarted, before+1)

			g.proxy.Heal()
			waitCond(t, "the API to recover", 60*time.Second, func() bool {
				st, _, _, _ := g.call("GET", "/workspaces", alice, nil)
				return st == 200 && g.n.guarded.State() == "closed"
			})
			// The load's own requests may all have been caught in the
			// fault before the breaker opened (they wait it out, status 0
			// for a client timeout), so whether one of them met the open
			// breaker depends on timing; the direct call above did. What
			// the load must never see is another error.
			seen := l.end()
			for st := range seen {
				if st != 0 && st != http.StatusOK && st != http.StatusServiceUnavailable {
					t.Fatalf("the load saw status %d: %v", st, seen)
				}
			}
			t.Logf("statuses under %s: %v", fault.name, fmt.Sprint(seen))
		})
	}
}

// TestLostConnectionWithGuardOff: with the store guard switched off, a
// broken database connection still answers 503 with Retry-After (the
// database is unavailable, not the request wrong), never 500, and the node
// serves again once the connection heals.
func TestLostConnectionWithGuardOff(t *testing.T) {
	if testing.Short() {
		t.Skip("fault injection against PostgreSQL")
	}
	g := startGuardNode(t, liveconfig.StoreGuardPatch{StoreGuardEnabled: ptr(false)})
	alice, _ := g.login(t, "alice@demo.parley.dev")
	if st, _, raw, err := g.call("GET", "/workspaces", alice, nil); err != nil || st != 200 {
		t.Fatalf("GET /workspaces: %d %s %v", st, raw, err)
	}
	g.proxy.ResetAll()
	var st int
	var retry string
	var raw []byte
	waitCond(t, "a request to meet the broken connection", 30*time.Second, func() bool {
		var err error
		st, retry, raw, err = g.call("GET", "/workspaces", alice, nil)
		if err != nil {
			t.Fatalf("GET /workspaces during resets: %v", err)
		}
		return st != 200
	})
	if st != http.StatusServiceUnavailable || retry == "" || !strings.Contains(string(raw), `"unavailable"`) {
		t.Fatalf("GET /workspaces with the connection reset: %d Retry-After %q %s, want 503 unavailable with Retry-After", st, retry, raw)
	}
	g.proxy.Heal()
	waitCond(t, "the API to recover", 60*time.Second, func() bool {
		st, _, _, _ := g.call("GET", "/workspaces", alice, nil)
		return st == 200
	})
}

// TestStoreGuardFilesAndIntegrations: the routes that reach the database
// through the file service or the integration store without a session (a
// webhook post, a signed download) answer 503 with Retry-After while the
// database is black-holed and the breaker open, instead of hanging on it.
func TestStoreGuardFilesAndIntegrations(t *testing.T) {
	if testing.Short() {
		t.Skip("fault injection against PostgreSQL")
	}
	g := startGuardNode(t, liveconfig.StoreGuardPatch{
		StoreGuardSlowCallMs: ptr(300), StoreGuardConsecutiveFailures: ptr(3),
		StoreGuardOpenSeconds: ptr(30), StoreGuardWindowSeconds: ptr(5)})
	alice, _ := g.login(t, "alice@demo.parley.dev")
	_, _, raw, _ := g.call("GET", "/workspaces", alice, nil)
	var wss struct {
		Workspaces []struct{ ID string } `json:"workspaces"`
	}
	json.Unmarshal(raw, &wss)
	ws := wss.Workspaces[0].ID
	_, _, raw, _ = g.call("GET", "/workspaces/"+ws+"/channels", alice, nil)
	var chs struct {
		Channels []struct{ ID, Name string } `json:"channels"`
	}
	json.Unmarshal(raw, &chs)
	general := ""
	for _, c := range chs.Channels {
		if c.Name == "general" {
			general = c.ID
		}
	}
	st, _, raw, err := g.call("POST", "/channels/"+general+"/webhooks", alice, map[string]string{"name": "ci"})
	if err != nil || st != 201 {
		t.Fatalf("create webhook: %d %s %v", st, raw, err)
	}
	var hook struct {
		URL string `json:"url"`
	}
	json.Unmarshal(raw, &hook)
	hookPath := hook.URL[strings.Index(hook.URL, "/api/v1")+len("/api/v1"):]
	req, _ := http.NewRequest("POST", g.api+"/workspaces/"+ws+"/files?name=notes.txt", strings.NewReader("some notes"))
	req.Header.Set("Authorization", "Bearer "+alice)
	res, err := guardHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 201 {
		t.Fatalf("upload: %d %s", res.StatusCode, raw)
	}
	var file struct {
		URL string `json:"url"`
	}
	json.Unmarshal(raw, &file)
	filePath := file.URL[strings.Index(file.URL, "/api/v1")+len("/api/v1"):]
	if st, _, raw, err := g.call("GET", filePath, "", nil); err != nil || st != 200 || string(raw) != "some notes" {
		t.Fatalf("signed download: %d %q %v", st, raw, err)
	}

	l := g.startLoad(alice, 4)
	g.proxy.BlackHole()
	waitCond(t, "the breaker to open", 60*time.Second, func() bool { return g.n.guarded.State() == "open" })
	fast := &http.Client{Timeout: 5 * time.Second} // a call that reaches the black hole outlives it
	for _, c := range []struct{ method, path string }{
		{"POST", hookPath},
		{"GET", filePath},
	} {
		var body any
		if c.method == "POST" {
			body = map[string]string{"text": "build passed"}
		}
		st, retry, raw, err := g.callWith(fast, c.method, c.path, "", body)
		if err != nil || st != http.StatusServiceUnavailable || retry == "" {
			t.Errorf("%s %s with the database black-holed: %d Retry-After %q %s %v, want 503 with Retry-After",
				c.method, strings.SplitN(c.path, "/", 3)[1], st, retry, raw, err)
		}
	}
	g.proxy.Heal()
	l.end()
}
