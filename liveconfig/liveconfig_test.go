package liveconfig_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"parley"
	"parley/liveconfig"
	"parley/natsbus"
	"parley/sqlstore"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func openStore(t *testing.T) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.Open(context.Background(), sqlstore.Config{
		Path: filepath.Join(t.TempDir(), "parley.db"), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func startBus(t *testing.T) *natsbus.Bus {
	t.Helper()
	b, err := natsbus.Start(natsbus.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func startManager(t *testing.T, s parley.SettingsService, b parley.RawBus, o liveconfig.Options) *liveconfig.Manager {
	t.Helper()
	o.Logger = quiet
	m := liveconfig.New(o)
	if err := m.Start(context.Background(), s, b); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m
}

// eventually waits for cond, failing after a generous deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }

func TestDefaultsBeforeAndAfterStart(t *testing.T) {
	m := liveconfig.New(liveconfig.Options{Logger: quiet})
	if got := m.LiveConfig(); got != parley.DefaultLiveConfig() {
		t.Fatalf("before Start: %+v", got)
	}
	s := openStore(t)
	if err := s.SaveLiveConfig(context.Background(), parley.LiveConfig{ChannelMentionMaxMembers: 7}); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background(), s, startBus(t)); err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	if got := m.LiveConfig(); got != (parley.LiveConfig{ChannelMentionMaxMembers: 7}) {
		t.Fatalf("after Start: got %+v, want the stored configuration", got)
	}
}

// A change made on one node reaches another through the notice alone (the
// periodic refresh is off), and is persisted.
func TestChangeReachesOtherNodes(t *testing.T) {
	s, b := openStore(t), startBus(t)
	off := liveconfig.Options{Refresh: -1}
	a, other := startManager(t, s, b, off), startManager(t, s, b, off)

	ch, err := a.Update(context.Background(), liveconfig.Patch{CollapsedThreads: ptr(false)}, false)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ch.Changed, ",") != "collapsed_threads" || ch.Old.CollapsedThreads != true || ch.New.CollapsedThreads {
		t.Fatalf("change: %+v", ch)
	}
	if a.LiveConfig().CollapsedThreads {
		t.Fatal("the updating node must see its own change at once")
	}
	eventually(t, "the other node sees the change", func() bool { return !other.LiveConfig().CollapsedThreads })
	stored, err := s.LoadLiveConfig(context.Background())
	if err != nil || stored.CollapsedThreads {
		t.Fatalf("stored: %+v, %v", stored, err)
	}
}

// A change whose notice never came (saved behind the managers' backs) is
// picked up by the periodic refresh.
func TestRefreshCoversLostNotices(t *testing.T) {
	s, b := openStore(t), startBus(t)
	m := startManager(t, s, b, liveconfig.Options{Refresh: 20 * time.Millisecond})
	want := parley.LiveConfig{CollapsedThreads: true, ChannelMentionMaxMembers: 3}
	if err := s.SaveLiveConfig(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the refresh loads the change", func() bool { return m.LiveConfig() == want })
}

// Update starts from the stored configuration, not the node's copy: a
// change made elsewhere is not undone by a later change of another field.
func TestUpdateKeepsOtherNodesChanges(t *testing.T) {
	s, b := openStore(t), startBus(t)
	m := startManager(t, s, b, liveconfig.Options{Refresh: -1})
	if err := s.SaveLiveConfig(context.Background(), parley.LiveConfig{CollapsedThreads: false, ChannelMentionMaxMembers: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Update(context.Background(), liveconfig.Patch{ChannelMentionMaxMembers: ptr(10)}, false); err != nil {
		t.Fatal(err)
	}
	got, _ := s.LoadLiveConfig(context.Background())
	if got != (parley.LiveConfig{CollapsedThreads: false, ChannelMentionMaxMembers: 10}) {
		t.Fatalf("stored after update: %+v", got)
	}
}

func TestHTTP(t *testing.T) {
	s, b := openStore(t), startBus(t)
	reg := prometheus.NewRegistry()
	m := startManager(t, s, b, liveconfig.Options{Refresh: -1, Registerer: reg})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()

	do := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, bytes.NewBufferString(body))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
			t.Fatalf("%s %s: decode: %v", method, path, err)
		}
		return res.StatusCode, out
	}

	if code, out := do("GET", "/config", ""); code != 200 || out["collapsed_threads"] != true {
		t.Fatalf("GET: %d %v", code, out)
	}
	// Dry run: reports the change, saves nothing.
	code, out := do("PUT", "/config?dry_run=true", `{"channel_mention_max_members": 50}`)
	if code != 200 || out["dry_run"] != true || len(out["changed"].([]any)) != 1 {
		t.Fatalf("dry run: %d %v", code, out)
	}
	if m.LiveConfig().ChannelMentionMaxMembers != 1000 {
		t.Fatal("a dry run changed the configuration")
	}
	if stored, _ := s.LoadLiveConfig(context.Background()); stored.ChannelMentionMaxMembers != 1000 {
		t.Fatal("a dry run saved the configuration")
	}
	// Bad input: 400 with the API's error shape, nothing changed.
	for _, body := range []string{`{"channel_mention_max_members": -1}`, `{"no_such_flag": true}`, `{`, `{"collapsed_threads": "no"}`} {
		code, out := do("PUT", "/config", body)
		if code != 400 || out["error"].(map[string]any)["code"] != parley.EINVALID {
			t.Fatalf("PUT %s: %d %v", body, code, out)
		}
	}
	if code, _ := do("PUT", "/config?dry_run=maybe", `{}`); code != 400 {
		t.Fatalf("bad dry_run: %d", code)
	}
	if m.LiveConfig() != parley.DefaultLiveConfig() {
		t.Fatalf("bad input changed the configuration: %+v", m.LiveConfig())
	}
	// A real change.
	code, out = do("PUT", "/config", `{"collapsed_threads": false}`)
	if code != 200 || out["new"].(map[string]any)["collapsed_threads"] != false {
		t.Fatalf("PUT: %d %v", code, out)
	}
	want := `# HELP parley_config_collapsed_threads 1 when collapsed reply threads are on (live configuration).
# TYPE parley_config_collapsed_threads gauge
parley_config_collapsed_threads 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "parley_config_collapsed_threads"); err != nil {
		t.Fatal(err)
	}
}

// TestRateSettings: the rate limits are live settings like the others:
// shown as text, changed by their text, reset with "default", and a text
// that is no rate is 400 and changes nothing.
func TestRateSettings(t *testing.T) {
	s, b := openStore(t), startBus(t)
	m := startManager(t, s, b, liveconfig.Options{Refresh: -1})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	put := func(body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("PUT", srv.URL+"/config", strings.NewReader(body))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(raw)
	}
	res, err := http.Get(srv.URL + "/config")
	if err != nil {
		t.Fatal(err)
	}
	var shown map[string]any
	json.NewDecoder(res.Body).Decode(&shown)
	res.Body.Close()
	if shown["rate_message_user"] != "default" || shown["rate_login_account"] != "default" {
		t.Fatalf("GET /config does not show the rate settings: %v", shown)
	}
	if code, body := put(`{"rate_message_user": "30/min,burst=5", "rate_search_ip": "off"}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	c := m.LiveConfig()
	if c.MessageUser != (parley.Rate{PerMinute: 30, Burst: 5}) || c.SearchIP != parley.RateOff {
		t.Fatalf("after PUT: %+v", c.LiveRates)
	}
	if stored, _ := s.LoadLiveConfig(context.Background()); stored != c {
		t.Fatalf("stored %+v, live %+v", stored, c)
	}
	for _, bad := range []string{`{"rate_message_user": "fast"}`, `{"rate_message_user": "0/min"}`, `{"rate_message_user": 5}`} {
		if code, body := put(bad); code != 400 || !strings.Contains(body, parley.EINVALID) {
			t.Errorf("PUT %s: %d %s", bad, code, body)
		}
	}
	if code, body := put(`{"rate_message_user": "default"}`); code != 200 {
		t.Fatalf("reset: %d %s", code, body)
	}
	if got := m.LiveConfig().MessageUser; !got.IsDefault() {
		t.Errorf("after reset: %v", got)
	}
}

// TestGatewayCompressionSettings: compression is on by default with a
// 256-byte threshold; both change over HTTP, and a threshold out of range
// is 400 and changes nothing.
func TestGatewayCompressionSettings(t *testing.T) {
	if d := parley.DefaultLiveConfig(); !d.GatewayCompression || d.GatewayCompressionMinBytes != parley.DefaultGatewayCompressionMinBytes {
		t.Fatalf("defaults: %+v", d)
	}
	for _, n := range []int{-1, parley.MaxGatewayCompressionMinBytes + 1} {
		if _, err := (liveconfig.Patch{GatewayCompressionMinBytes: &n}).Apply(parley.DefaultLiveConfig()); parley.ErrorCode(err) != parley.EINVALID {
			t.Fatalf("min bytes %d: %v, want EINVALID", n, err)
		}
	}
	c, err := liveconfig.Patch{GatewayCompression: ptr(false), GatewayCompressionMinBytes: ptr(0)}.Apply(parley.DefaultLiveConfig())
	if err != nil || c.GatewayCompression || c.GatewayCompressionMinBytes != 0 {
		t.Fatalf("apply: %+v %v", c, err)
	}

	s, b := openStore(t), startBus(t)
	m := startManager(t, s, b, liveconfig.Options{Refresh: -1})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	put := func(body string) int {
		req, _ := http.NewRequest("PUT", srv.URL+"/config", strings.NewReader(body))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := put(`{"gateway_compression_min_bytes": 2000000}`); code != 400 {
		t.Fatalf("out of range: %d", code)
	}
	if code := put(`{"gateway_compression": false, "gateway_compression_min_bytes": 512}`); code != 200 {
		t.Fatalf("change: %d", code)
	}
	if got := m.LiveConfig(); got.GatewayCompression || got.GatewayCompressionMinBytes != 512 {
		t.Fatalf("after the change: %+v", got)
	}
}
