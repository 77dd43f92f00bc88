package httpapi

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"parley"
)

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer // guarded by mu
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// failingStore wraps a real store and makes GetMe fail with err.
type failingStore struct {
	parley.Store
	err error
}

func (s failingStore) GetMe(context.Context, string) (*parley.User, error) { return nil, s.err }

func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t)
	a := mustAccount(t, e.store, "ann")
	for _, r := range []*response{
		e.call("GET", "/me", a.Token, nil),
		e.call("GET", "/me", "", nil),
		e.call("GET", "/nowhere", "", nil),
		e.call("GET", "/openapi.json", "", nil),
	} {
		for k, want := range map[string]string{
			"Content-Type":           "application/json",
			"X-Content-Type-Options": "nosniff",
			"Cache-Control":          "no-store",
		} {
			if got := r.Header.Get(k); got != want {
				t.Errorf("status %d: %s = %q, want %q", r.Status, k, got, want)
			}
		}
	}
}

func TestUnknownRouteAndWrongMethod(t *testing.T) {
	e := newEnv(t)
	r := e.must(http.StatusNotFound, "GET", "/no/such/thing", "", nil, nil)
	if r.errCode() != parley.ENOTFOUND {
		t.Errorf("404 body %s", r.Body)
	}
	r = e.must(http.StatusMethodNotAllowed, "DELETE", "/auth/signup", "", nil, nil)
	if r.errCode() == "" {
		t.Errorf("405 body is not a JSON error: %s", r.Body)
	}
	if allow := r.Header.Get("Allow"); allow != "POST" {
		t.Errorf("Allow = %q, want POST", allow)
	}
	r = e.must(http.StatusMethodNotAllowed, "POST", "/messages/M1", "", nil, nil)
	if allow := r.Header.Get("Allow"); allow != "DELETE, GET, PATCH" {
		t.Errorf("Allow = %q", allow)
	}
}

// A missing or bad token is 401 before anything else: before 404 for an
// unknown object, before body parsing and before the body size limit.
func TestUnauthorizedFirst(t *testing.T) {
	e := newEnv(t)
	big := `{"text":"` + strings.Repeat("x", MaxBodyBytes+10) + `"}`
	for _, tc := range []struct{ method, path, token, body string }{
		{"GET", "/channels/Cnosuch", "", ""},
		{"GET", "/channels/Cnosuch", "bogus-token", ""},
		{"POST", "/channels/Cnosuch/messages", "", "{not json"},
		{"POST", "/channels/Cnosuch/messages", "", big},
		{"PATCH", "/me", "Basic abc", `{"name": 5}`},
		{"GET", "/workspaces/Wnosuch/users?limit=abc", "", ""},
	} {
		var body any
		if tc.body != "" {
			body = tc.body
		}
		r := e.call(tc.method, tc.path, tc.token, body)
		if r.Status != http.StatusUnauthorized || r.errCode() != parley.EUNAUTHORIZED {
			t.Errorf("%s %s (token %q): %d %s, want 401 unauthorized", tc.method, tc.path, tc.token, r.Status, r.Body)
		}
	}
	// A raw Authorization header that is not a bearer token.
	req, _ := http.NewRequest("GET", e.srv.URL+Prefix+"/me", nil)
	req.Header.Set("Authorization", "Basic dXNlcjpwYXNz")
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("basic auth: %d, want 401", res.StatusCode)
	}
}

func TestBadInput(t *testing.T) {
	e := newEnv(t)
	a := mustAccount(t, e.store, "ann")
	ws := mustWorkspace(t, e.store, a)
	for _, tc := range []struct {
		method, path string
		body         any
		want         int
	}{
		{"PATCH", "/me", "{not json", http.StatusBadRequest},
		{"PATCH", "/me", `{"name": 5}`, http.StatusBadRequest},
		{"PATCH", "/me", `{"name": "A"} {"name": "B"}`, http.StatusBadRequest},
		{"PATCH", "/me", "", http.StatusBadRequest},
		{"PATCH", "/me", `{"name": "Ann", "unknown_field": true}`, http.StatusOK},
		{"POST", "/users/batch", `{"ids": "U1"}`, http.StatusBadRequest},
		{"PUT", "/me/status", `{"expires_at": "tomorrow"}`, http.StatusBadRequest},
		{"PATCH", "/me", `{"name": "` + strings.Repeat("x", MaxBodyBytes) + `"}`, http.StatusRequestEntityTooLarge},
		{"GET", "/workspaces/" + ws.ID + "/users?limit=ten", nil, http.StatusBadRequest},
		{"GET", "/workspaces/" + ws.ID + "/users?limit=1000", nil, http.StatusOK},
		{"POST", "/workspaces/" + ws.ID + "/invites", "", http.StatusCreated},
		{"POST", "/workspaces/" + ws.ID + "/invites", `{"max_uses": "many"}`, http.StatusBadRequest},
	} {
		r := e.call(tc.method, tc.path, a.Token, tc.body)
		if r.Status != tc.want {
			t.Errorf("%s %s %.40v: %d %s, want %d", tc.method, tc.path, tc.body, r.Status, r.Body, tc.want)
		}
		if r.Status >= 400 && StatusOf(r.errCode()) != r.Status {
			t.Errorf("%s %s: error code %q for status %d", tc.method, tc.path, r.errCode(), r.Status)
		}
	}
}

func TestInternalErrorIsLoggedAndHidden(t *testing.T) {
	var logs lockedBuffer
	clk := newClock()
	st := openStore(t, "sqlite", clk.Now)
	a := mustAccount(t, st, "ann")
	e := newEnvWithStore(t, failingStore{st, errors.New("disk on fire")}, clk, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	r := e.must(http.StatusInternalServerError, "GET", "/me", a.Token, nil, nil)
	if r.errCode() != parley.EINTERNAL || strings.Contains(string(r.Body), "fire") {
		t.Errorf("body %s leaks or lacks the internal code", r.Body)
	}
	if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "disk on fire") || !strings.Contains(l, "/api/v1/me") {
		t.Errorf("log %q lacks the error, its level or the path", l)
	}
}

// panickingStore panics in GetMe.
type panickingStore struct{ parley.Store }

func (panickingStore) GetMe(context.Context, string) (*parley.User, error) { panic("boom") }

func TestPanicIsInternalError(t *testing.T) {
	clk := newClock()
	st := openStore(t, "sqlite", clk.Now)
	a := mustAccount(t, st, "ann")
	e := newEnvWithStore(t, panickingStore{st}, clk)
	r := e.must(http.StatusInternalServerError, "GET", "/me", a.Token, nil, nil)
	if r.errCode() != parley.EINTERNAL {
		t.Errorf("body %s", r.Body)
	}
	e.must(http.StatusOK, "GET", "/workspaces", a.Token, nil, nil)
}

func TestUnavailableHasRetryAfter(t *testing.T) {
	clk := newClock()
	st := openStore(t, "sqlite", clk.Now)
	a := mustAccount(t, st, "ann")
	e := newEnvWithStore(t, failingStore{st, parley.Errorf(parley.EUNAVAILABLE, "shedding")}, clk)
	r := e.must(http.StatusServiceUnavailable, "GET", "/me", a.Token, nil, nil)
	if r.Header.Get("Retry-After") == "" {
		t.Errorf("503 without Retry-After")
	}
}

func TestStatusTable(t *testing.T) {
	for code, want := range map[string]int{
		parley.EINVALID: 400, parley.EUNAUTHORIZED: 401, parley.EFORBIDDEN: 403, parley.EFEATUREOFF: 403, parley.ENOTFOUND: 404,
		parley.ECONFLICT: 409, parley.ETOOLARGE: 413, parley.ERATELIMITED: 429, parley.EUNAVAILABLE: 503,
		parley.EINTERNAL: 500, "something_new": 500,
	} {
		if got := StatusOf(code); got != want {
			t.Errorf("StatusOf(%q) = %d, want %d", code, got, want)
		}
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(c *Config) { c.Registerer = reg })
	a := mustAccount(t, e.store, "ann")
	e.must(http.StatusOK, "GET", "/me", a.Token, nil, nil)
	e.must(http.StatusOK, "GET", "/me", a.Token, nil, nil)
	e.must(http.StatusNotFound, "GET", "/messages/Mnosuch", a.Token, nil, nil)
	e.must(http.StatusNotFound, "GET", "/nowhere", "", nil, nil)

	if got := testutil.ToFloat64(e.api.metrics.requests.WithLabelValues("/api/v1/me", "GET", "200")); got != 2 {
		t.Errorf("GET /me 200 count = %v, want 2", got)
	}
	if got := testutil.ToFloat64(e.api.metrics.requests.WithLabelValues("/api/v1/messages/{id}", "GET", "404")); got != 1 {
		t.Errorf("GET /messages/{id} 404 count = %v, want 1 (labelled by pattern)", got)
	}
	if got := testutil.ToFloat64(e.api.metrics.requests.WithLabelValues("unmatched", "GET", "404")); got != 1 {
		t.Errorf("unmatched count = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(e.api.metrics.duration, "parley_http_request_duration_seconds"); n != 3 {
		t.Errorf("duration series = %d, want 3", n)
	}
	// A second server on the same registry shares the collectors.
	New(Config{Store: e.store, Directory: storeDirectory(t, e.store), Registerer: reg})
}

// A path with "." or ".." segments is refused, not redirected: ServeMux's
// 307 to the cleaned path keeps the method, so DELETE on the reaction ".."
// used to delete the message itself.
func TestNonCanonicalPathRefused(t *testing.T) {
	e := newEnv(t)
	u := mustAccount(t, e.store, "ann")
	ws := mustWorkspace(t, e.store, u)
	ch := mustChannel(t, e.store, ws, u, parley.KindPublic)
	m := mustPost(t, e.store, u, ch, "keep me")
	for _, p := range []string{"/messages/" + m.ID + "/reactions/..", "/messages/" + m.ID + "/reactions/.", "/messages/" + m.ID + "//reactions/x"} {
		r := e.call(http.MethodDelete, p, u.Token, nil)
		if r.Status != http.StatusBadRequest || r.errCode() != parley.EINVALID {
			t.Errorf("DELETE %s: status %d, body %s; want 400 bad_request", p, r.Status, r.Body)
		}
	}
	if got, err := e.store.GetMessage(context.Background(), u.ID, m.ID); err != nil || got.Text != "keep me" {
		t.Fatalf("message after the requests: %+v, %v", got, err)
	}
	e.must(http.StatusOK, http.MethodGet, "/channels/"+ch.ID+"/messages", u.Token, nil, nil)
}
