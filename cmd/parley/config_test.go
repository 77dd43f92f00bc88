package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/spf13/pflag"

	"parley"
	pclient "parley/client"
	"parley/httpapi"
	"parley/nodes"
)

func envFrom(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func parse(t *testing.T, args []string, env map[string]string) (serveOptions, error) {
	t.Helper()
	var o serveOptions
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	o.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	if err := applyEnv(fs, envFrom(env)); err != nil {
		return o, err
	}
	return o, o.validate()
}

func TestFlagEnvPrecedence(t *testing.T) {
	o, err := parse(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.Listen != "127.0.0.1:8080" || o.Admin != "127.0.0.1:9091" || o.DataDir != "./data" ||
		o.DB != "" || o.NATS != "" || o.Demo || o.LogLevel != "info" || o.LogFormat != "text" {
		t.Fatalf("defaults: %+v", o)
	}
	if o.sqlitePath() != "data/parley.db" {
		t.Fatalf("sqlite path %q", o.sqlitePath())
	}
	if o.NATSCluster != "" || len(o.NATSRoutes) != 0 || o.NATSClusterName != "parley" || o.NodeID == "" {
		t.Fatalf("cluster defaults: %+v", o)
	}

	if o.ShardPoolSize != defaultShardPoolSize {
		t.Fatalf("--shard-pool-size default %d", o.ShardPoolSize)
	}

	env := map[string]string{
		"PARLEY_SHARD_POOL_SIZE": "12",
		"PARLEY_LISTEN":          "127.0.0.1:7000",
		"PARLEY_ADMIN":           "off",
		"PARLEY_DATA":            "/var/lib/parley",
		"PARLEY_DB":              "postgres://u@db/parley",
		"PARLEY_NATS":            "nats://bus:4222",
		"PARLEY_DEMO":            "true",
		"PARLEY_LOG_LEVEL":       "debug",
		"PARLEY_LOG_FORMAT":      "json",
		"PARLEY_ORIGINS":         "https://chat.example.com,https://app.example.com",
		"PARLEY_IDENTIFY_RATE":   "6000",
	}
	o, err = parse(t, nil, env)
	if err != nil {
		t.Fatal(err)
	}
	if o.Listen != "127.0.0.1:7000" || o.Admin != "" || o.DataDir != "/var/lib/parley" ||
		o.DB != "postgres://u@db/parley" || o.NATS != "nats://bus:4222" || !o.Demo ||
		o.LogLevel != "debug" || o.LogFormat != "json" ||
		len(o.Origins) != 2 || o.Origins[1] != "https://app.example.com" || o.IdentifyPerMin != 6000 ||
		o.ShardPoolSize != 12 {
		t.Fatalf("from env: %+v", o)
	}

	o, err = parse(t, []string{"--listen", ":0", "--demo=false", "--log-format", "text", "--admin", ""}, env)
	if err != nil {
		t.Fatal(err)
	}
	if o.Listen != ":0" || o.Demo || o.LogFormat != "text" || o.Admin != "" || o.LogLevel != "debug" {
		t.Fatalf("flags over env: %+v", o)
	}
}

func TestBadOptions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--log-format", "xml"}, nil, "--log-format"},
		{[]string{"--log-level", "loud"}, nil, "--log-level"},
		{[]string{"--db", "mysql://x"}, nil, "postgres://"},
		{[]string{"--listen", ""}, nil, "--listen"},
		{[]string{"--data", ""}, nil, "--data"},
		{nil, map[string]string{"PARLEY_DEMO": "maybe"}, "PARLEY_DEMO"},
		{[]string{"--node-id", "a.b"}, nil, "--node-id"},
		{[]string{"--nats-routes", "nats://a:6222"}, nil, "--nats-cluster"},
		{[]string{"--nats-cluster", ":6222", "--nats", "nats://x:4222"}, nil, "--nats"},
		{[]string{"--nats-cluster", "6222"}, nil, "host:port"},
		{[]string{"--nats-cluster", ":6222", "--nats-routes", "http://a:1"}, nil, "--nats-routes"},
		{[]string{"--nats-cluster", ":6222", "--nats-cluster-name", ""}, nil, "--nats-cluster-name"},
		{[]string{"--identify-rate", "-1"}, nil, "--identify-rate"},
		{[]string{"--directory-stream-replicas", "0"}, nil, "--directory-stream-replicas"},
		{[]string{"--directory-stream-replicas", "-3"}, nil, "--directory-stream-replicas"},
		{nil, map[string]string{"PARLEY_DIRECTORY_STREAM_REPLICAS": "6"}, "--directory-stream-replicas"},
		{[]string{"--shard-pool-size", "0"}, nil, "--shard-pool-size"},
		{[]string{"--shard-pool-size", "1001"}, nil, "--shard-pool-size"},
		{nil, map[string]string{"PARLEY_SHARD_POOL_SIZE": "-4"}, "--shard-pool-size"},
		{nil, map[string]string{"PARLEY_SHARD_POOL_SIZE": "many"}, "PARLEY_SHARD_POOL_SIZE"},
	} {
		_, err := parse(t, tc.args, tc.env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: err %v, want one mentioning %s", tc.args, tc.env, err, tc.want)
		}
	}
}

func TestDisplayAddr(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, "127.0.0.1:8080"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 80}, "127.0.0.1:80"},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 80}, "127.0.0.1:80"},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 9}, "[::1]:9"},
	} {
		if got := displayAddr(tc.addr); got != tc.want {
			t.Errorf("displayAddr(%v) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

func TestRedactURL(t *testing.T) {
	got := redactURL("postgres://parley:hunter2@db:5432/parley")
	if strings.Contains(got, "hunter2") {
		t.Fatalf("password in %q", got)
	}
}

func TestRootHandler(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("api " + r.URL.Path)) })
	for _, built := range []bool{false, true} {
		web := fstest.MapFS{"README": {Data: []byte("placeholder")}}
		if built {
			web["index.html"] = &fstest.MapFile{Data: []byte(`<!doctype html><div id="app"></div>`)}
			web["assets/app-1234.js"] = &fstest.MapFile{Data: []byte("console.log(1)")}
		}
		gw := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("gateway")) })
		h := rootHandler(api, gw, web)
		get := func(method, path string) *httptest.ResponseRecorder {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
			return rec
		}
		rec := get("GET", "/")
		if built {
			if rec.Code != 200 || !strings.Contains(rec.Body.String(), `<div id="app">`) ||
				!strings.Contains(rec.Header().Get("Content-Security-Policy"), "script-src 'self'") {
				t.Fatalf("app shell: %d %q %s", rec.Code, rec.Header().Get("Content-Security-Policy"), rec.Body)
			}
			if rec := get("GET", "/assets/app-1234.js"); rec.Code != 200 || rec.Body.String() != "console.log(1)" {
				t.Fatalf("asset: %d %s", rec.Code, rec.Body)
			}
		} else {
			if rec.Code != 200 || !strings.Contains(rec.Body.String(), "Parley is running") ||
				!strings.Contains(rec.Body.String(), `href="/api/v1/openapi.json"`) ||
				!strings.Contains(rec.Body.String(), "web client is not built") {
				t.Fatalf("not-built page: %d %s", rec.Code, rec.Body)
			}
			if csp := rec.Header().Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
				t.Fatalf("not-built page CSP %q", csp)
			}
		}
		if rec := get("GET", "/api/v1/me"); rec.Body.String() != "api /api/v1/me" {
			t.Fatalf("/api/v1/ not routed to the API: %s", rec.Body)
		}
		if rec := get("GET", "/api/v1/gateway"); rec.Body.String() != "gateway" {
			t.Fatalf("/api/v1/gateway not routed to the gateway: %s", rec.Body)
		}
		// Not redirected to the cleaned path (a 307 keeps the method).
		if rec := get("DELETE", "/api/v1/messages/M1/reactions/.."); rec.Code != 200 || rec.Body.String() != "api /api/v1/messages/M1/reactions/.." {
			t.Fatalf("unclean API path: %d %s", rec.Code, rec.Body)
		}
		rec = get("GET", "/favicon.ico")
		if rec.Code != 404 || rec.Header().Get("Content-Type") != "application/json" ||
			!bytes.Contains(rec.Body.Bytes(), []byte(`"code":"not_found"`)) {
			t.Fatalf("404: %d %q %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
		if rec := get("POST", "/"); rec.Code != 405 || rec.Header().Get("Allow") == "" {
			t.Fatalf("POST /: %d", rec.Code)
		}
	}
}

func TestClusterOptions(t *testing.T) {
	env := map[string]string{
		"PARLEY_NODE_ID":           "node-b",
		"PARLEY_NATS_CLUSTER":      "10.0.0.2:6222",
		"PARLEY_NATS_ROUTES":       "nats://10.0.0.1:6222,nats://10.0.0.3:6222",
		"PARLEY_NATS_CLUSTER_NAME": "prod",
	}
	o, err := parse(t, nil, env)
	if err != nil {
		t.Fatal(err)
	}
	if o.NodeID != "node-b" || o.NATSCluster != "10.0.0.2:6222" || o.NATSClusterName != "prod" ||
		!slices.Equal(o.NATSRoutes, []string{"nats://10.0.0.1:6222", "nats://10.0.0.3:6222"}) {
		t.Fatalf("from env: %+v", o)
	}
	o, err = parse(t, []string{"--node-id", "n1", "--nats-routes", "nats://h:7222", "--nats-cluster", "127.0.0.1:0"}, env)
	if err != nil {
		t.Fatal(err)
	}
	if o.NodeID != "n1" || o.NATSCluster != "127.0.0.1:0" || !slices.Equal(o.NATSRoutes, []string{"nats://h:7222"}) ||
		o.NATSClusterName != "prod" {
		t.Fatalf("flags over env: %+v", o)
	}
}

func TestDefaultNodeID(t *testing.T) {
	a, b := defaultNodeID(), defaultNodeID()
	if a == b {
		t.Fatalf("two processes would share the id %q", a)
	}
	for _, id := range []string{a, b} {
		if err := nodes.ValidID(id); err != nil {
			t.Fatalf("default id %q: %v", id, err)
		}
	}
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(strings.ToLower(host), ".")
	if prefix, _, _ := strings.Cut(a, "-"); host != "" && !strings.HasPrefix(host, prefix) {
		t.Fatalf("default id %q does not start with the host name %q", a, host)
	}
}

// TestLimitFlags: --trusted-proxies and every --rate-* flag have their
// PARLEY_* twins, start at httpapi's defaults, and refuse bad values.
func TestLimitFlags(t *testing.T) {
	o, err := parse(t, nil, map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Rates != httpapi.DefaultRates || !o.proxies.Empty() {
		t.Fatalf("defaults: %+v, proxies %v", o.Rates, o.proxies)
	}
	o, err = parse(t, []string{"--rate-search-user", "off"}, map[string]string{
		"PARLEY_TRUSTED_PROXIES":    "10.0.0.0/8,127.0.0.1",
		"PARLEY_RATE_MESSAGE_USER":  "30/min,burst=10",
		"PARLEY_RATE_LOGIN_ACCOUNT": "10/min",
		"PARLEY_RATE_SEARCH_USER":   "1/min", // the flag wins
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.proxies.String() != "10.0.0.0/8,127.0.0.1/32" || o.Rates.MessageUser != (parley.Rate{PerMinute: 30, Burst: 10}) ||
		o.Rates.LoginAccount != (parley.Rate{PerMinute: 10, Burst: 10}) || o.Rates.SearchUser != parley.RateOff ||
		o.Rates.WriteUser != httpapi.DefaultRates.WriteUser {
		t.Fatalf("from flags and env: %+v, proxies %v", o.Rates, o.proxies)
	}
	for _, env := range []map[string]string{
		{"PARLEY_TRUSTED_PROXIES": "proxy.internal"},
		{"PARLEY_RATE_WRITE_IP": "lots"},
		{"PARLEY_RATE_WRITE_IP": "default"},
	} {
		if _, err := parse(t, nil, env); err == nil {
			t.Errorf("%v accepted", env)
		}
	}
}

func TestDoorAndCapFlags(t *testing.T) {
	o, err := parse(t, []string{"--ws-frame-rate", "600", "--identify-queue", "-1"}, map[string]string{
		"PARLEY_WS_FRAME_BURST":            "50",
		"PARLEY_MAX_IDENTIFIES":            "16",
		"PARLEY_FILL_CONCURRENCY":          "3",
		"PARLEY_IDENTIFY_QUEUE_WAIT":       "250ms",
		"PARLEY_CAP_PINS_PER_CHANNEL":      "3",
		"PARLEY_CAP_INVITES_PER_WORKSPACE": "7",
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.WSFrameRate != 600 || o.WSFrameBurst != 50 || o.MaxIdentifies != 16 || o.IdentifyQueue != -1 ||
		o.IdentifyQueueWait != 250*time.Millisecond || o.FillConcurrency != 3 || o.Caps != (parley.Caps{PinsPerChannel: 3, InvitesPerWorkspace: 7}) {
		t.Fatalf("from flags and env: %+v", o.limitOptions)
	}
	for _, args := range [][]string{{"--cap-reactions-per-message", "-1"}, {"--max-identifies", "-5"}, {"--ws-frame-burst", "-1"}} {
		if _, err := parse(t, args, nil); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestCapFlagReachesTheStore: a --cap-* flag is the store's cap, not only
// a parsed option.
func TestCapFlagReachesTheStore(t *testing.T) {
	n := startInProcess(t, "--cap-pins-per-channel", "1")
	ctx := t.Context()
	c := pclient.New("http://" + n.apiLn.Addr().String())
	if _, err := c.Login(ctx, demoOwnerEmail, demoPassword); err != nil {
		t.Fatal(err)
	}
	ch, err := c.CreateChannel(ctx, n.demo.WorkspaceID, parley.NewChannel{Name: "pins", Kind: parley.KindPublic})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, text := range []string{"one", "two"} {
		m, err := c.PostMessage(ctx, ch.ID, parley.NewMessage{Text: text})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	if _, err := c.Pin(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	_, err = c.Pin(ctx, ids[1])
	if pclient.ErrorCode(err) != parley.ELIMIT {
		t.Fatalf("second pin with --cap-pins-per-channel 1: %v, want %s", err, parley.ELIMIT)
	}
}
