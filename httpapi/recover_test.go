package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"parley"
	"parley/internal/promutil"
)

// panicRoutes are test-only routes added to the real route table: one that
// panics before writing, one after, and one that aborts.
func panicRoutes() []route {
	return []route{
		{Method: http.MethodGet, Pattern: Prefix + "/test/panic/{n}", Handle: func(http.ResponseWriter, *http.Request, *caller) error {
			panic("boom")
		}},
		{Method: http.MethodGet, Pattern: Prefix + "/test/panic-late", Handle: func(w http.ResponseWriter, _ *http.Request, _ *caller) error {
			w.WriteHeader(http.StatusOK)
			w.Write([]byte(`{"partial":`))
			panic(errors.New("late boom"))
		}},
		{Method: http.MethodGet, Pattern: Prefix + "/test/abort", Handle: func(http.ResponseWriter, *http.Request, *caller) error {
			panic(http.ErrAbortHandler)
		}},
	}
}

func panicsCounted(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	return testutil.ToFloat64(promutil.Panics(reg).WithLabelValues("http"))
}

func TestHandlerPanicRecovered(t *testing.T) {
	reg := prometheus.NewRegistry()
	logs := &lockedBuffer{}
	e := newEnv(t, func(c *Config) {
		c.Registerer = reg
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
		c.testRoutes = panicRoutes()
	})

	r := e.call("GET", "/test/panic/7", "", nil)
	if r.Status != http.StatusInternalServerError || r.errCode() != parley.EINTERNAL {
		t.Fatalf("panicking route: %d %s", r.Status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if strings.Contains(string(r.Body), "boom") {
		t.Errorf("the panic value reached the client: %s", r.Body)
	}
	if got := panicsCounted(t, reg); got != 1 {
		t.Fatalf("parley_panics_total{where=http} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(e.api.metrics.requests.WithLabelValues(Prefix+"/test/panic/{n}", "GET", "500")); got != 1 {
		t.Errorf("the 500 was not counted in the request metrics: %v", got)
	}
	var entry struct {
		Msg, Route, Panic, Stack string
	}
	for line := range strings.Lines(logs.String()) {
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "http handler panic" {
			break
		}
	}
	if entry.Route != Prefix+"/test/panic/{n}" || entry.Panic != "boom" || !strings.Contains(entry.Stack, "recover_test.go") {
		t.Fatalf("panic log entry %+v; logs:\n%s", entry, logs)
	}

	// The server keeps serving, on the same route and on others.
	if r := e.call("GET", "/test/panic/8", "", nil); r.Status != http.StatusInternalServerError {
		t.Fatalf("second panic: %d", r.Status)
	}
	a := mustAccount(t, e.store, "ann")
	e.must(http.StatusOK, "GET", "/me", a.Token, nil, nil)
	if got := panicsCounted(t, reg); got != 2 {
		t.Fatalf("parley_panics_total{where=http} = %v, want 2", got)
	}

	// Once the response has begun, the panic is counted and logged but
	// nothing is appended to what the client got.
	res, err := http.Get(e.srv.URL + Prefix + "/test/panic-late")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || string(body) != `{"partial":` {
		t.Fatalf("late panic: %d %q", res.StatusCode, body)
	}
	if got := panicsCounted(t, reg); got != 3 {
		t.Fatalf("parley_panics_total{where=http} = %v, want 3", got)
	}

	// http.ErrAbortHandler aborts the response without a 500, uncounted.
	if res, err := http.Get(e.srv.URL + Prefix + "/test/abort"); err == nil {
		res.Body.Close()
		t.Fatalf("aborted handler answered %d", res.StatusCode)
	}
	if got := panicsCounted(t, reg); got != 3 {
		t.Fatalf("ErrAbortHandler was counted: %v", got)
	}
	e.must(http.StatusOK, "GET", "/me", a.Token, nil, nil)
}

// Recover guards what serves beside the API's routes (the web client, the
// gateway's upgrade, the admin listener).
func TestRecoverMiddleware(t *testing.T) {
	reg := prometheus.NewRegistry()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/boom", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		panic("admin boom")
	})
	mux.HandleFunc("GET /ok", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	mux.HandleFunc("GET /hijack", func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijack through Recover: %v", err)
			return
		}
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked")
		buf.Flush()
		conn.Close()
	})
	srv := httptest.NewServer(Recover(quietLogger(), promutil.Panics(reg), mux))
	t.Cleanup(srv.Close)

	res, err := http.Get(srv.URL + "/debug/boom")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var eb struct{ Error struct{ Code string } }
	if res.StatusCode != 500 || res.Header.Get("Content-Type") != "application/json" ||
		json.Unmarshal(body, &eb) != nil || eb.Error.Code != parley.EINTERNAL {
		t.Fatalf("recovered: %d %q %s", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	if got := panicsCounted(t, reg); got != 1 {
		t.Fatalf("parley_panics_total{where=http} = %v, want 1", got)
	}
	for _, path := range []string{"/ok", "/hijack"} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("%s after the panic: %v", path, err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("%s after the panic: %d", path, res.StatusCode)
		}
	}
}
