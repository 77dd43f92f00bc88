package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"parley"
	pclient "parley/client"
)

// The metrics a node serves on its admin listener: the series exist and
// move when the node works, the Grafana dashboard queries only series the
// node registers, and docs/metrics.md lists every parley_* series.
func TestMetrics(t *testing.T) {
	n := startInProcess(t)
	ctx := t.Context()
	api := "http://" + n.apiLn.Addr().String()
	admin := "http://" + n.adminLn.Addr().String()

	t.Run("SeriesMove", func(t *testing.T) {
		// Alice connects, posts into a channel of her own and gets the
		// event; she reads the user directory (the query cache) twice.
		c := pclient.New(api)
		if _, err := c.Login(ctx, demoOwnerEmail, demoPassword); err != nil {
			t.Fatal(err)
		}
		ws := n.demo.WorkspaceID
		ch, err := c.CreateChannel(ctx, ws, parley.NewChannel{Name: "metrics", Kind: parley.KindPublic})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan struct{}, 1)
		conn, err := c.Connect(ctx, ws, pclient.ConnectOptions{Handler: func(ev pclient.Event) {
			if ev.Type == parley.EventMessageCreated && ev.ChannelID == ch.ID {
				select {
				case got <- struct{}{}:
				default:
				}
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := c.PostMessage(ctx, ch.ID, parley.NewMessage{Text: "measured"}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("the posted message never arrived on the gateway")
		}
		for range 2 {
			if _, err := c.ListUsers(ctx, ws, parley.UserQuery{}); err != nil {
				t.Fatal(err)
			}
		}

		// What must have moved (> 0), by series and label subset; and what
		// must merely exist.
		moved := []struct{ name, labels string }{
			{"parley_gateway_connections", ""},
			{"parley_gateway_sessions", ""},
			{"parley_gateway_identifies_total", `result="ok"`},
			{"parley_gateway_deliveries_total", ""},
			{"parley_gateway_fanout_seconds_count", ""},
			{"parley_bus_published_total", ""},
			{"parley_bus_received_total", ""},
			{"parley_bus_lag_seconds_count", ""},
			{"parley_store_op_seconds_count", `op="post message"`},
			{"parley_store_op_seconds_count", `dialect="sqlite"`},
			{"parley_querycache_lookups_total", `result="hit"`},
			{"parley_querycache_lookups_total", `result="miss"`},
			{"parley_querycache_queries_total", `kind="directory"`},
			{"parley_http_requests_total", `code="201"`},
			{"parley_http_request_duration_seconds_count", `route=`},
			{"process_cpu_seconds_total", ""},
		}
		// (The queue depth is sampled: one flush in 16.)
		exist := []string{"parley_gateway_queue_depth_count", "parley_gateway_slow_consumer_closes_total", "parley_gateway_gap_fills_total",
			"parley_gateway_gap_fill_events_total", "parley_bus_publish_errors_total", "parley_bus_slow_consumer_total"}
		// The HTTP series are recorded after the response is written:
		// scrape until everything is there (or the deadline).
		deadline := time.Now().Add(10 * time.Second)
		for {
			text := scrape(t, admin+"/metrics")
			var missing []string
			for _, m := range moved {
				if v, ok := sumSeries(text, m.name, m.labels); !ok || v <= 0 {
					missing = append(missing, m.name+"{"+m.labels+"}="+strconv.FormatFloat(v, 'g', -1, 64))
				}
			}
			for _, name := range exist {
				if _, ok := sumSeries(text, name, ""); !ok {
					missing = append(missing, name+" (absent)")
				}
			}
			if len(missing) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("series that did not move or are absent: %s\n%s", strings.Join(missing, ", "), text)
			}
			time.Sleep(20 * time.Millisecond)
		}
		// pprof on the admin listener.
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/goroutine?debug=1"} {
			res, err := http.Get(admin + path)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %s", path, res.Status)
			}
		}
	})

	registered := registeredNames(t, n.reg)

	t.Run("DashboardQueriesRegisteredSeries", func(t *testing.T) {
		exprs := dashboardExprs(t, "../../deploy/grafana/parley-dashboard.json")
		if len(exprs) < 20 {
			t.Fatalf("only %d queries in the dashboard", len(exprs))
		}
		quantiles := 0
		for _, e := range exprs {
			names := metricRe.FindAllString(e, -1)
			if len(names) == 0 {
				t.Errorf("query %q names no parley_, go_ or process_ series", e)
			}
			for _, name := range names {
				if !registered[name] && !registered[histogramBase(name)] {
					t.Errorf("query %q uses %s, which the node does not register", e, name)
				}
			}
			if strings.Contains(e, "histogram_quantile(") {
				quantiles++
				if !strings.Contains(e, "_bucket{") || !strings.Contains(e, "by (le") {
					t.Errorf("quantile query %q is not over _bucket by le", e)
				}
			}
		}
		if quantiles < 10 {
			t.Errorf("%d quantile queries; want p50 and p99 of each latency", quantiles)
		}
	})

	t.Run("DocsListEverySeries", func(t *testing.T) {
		b, err := os.ReadFile("../../docs/metrics.md")
		if err != nil {
			t.Fatal(err)
		}
		documented := map[string]bool{}
		for _, m := range regexp.MustCompile("`(parley_[a-z0-9_]+)`").FindAllStringSubmatch(string(b), -1) {
			documented[m[1]] = true
		}
		for name := range registered {
			if strings.HasPrefix(name, "parley_") && !documented[name] {
				t.Errorf("%s is registered but not in docs/metrics.md", name)
			}
		}
		for name := range documented {
			if !registered[name] {
				t.Errorf("docs/metrics.md lists %s, which the node does not register", name)
			}
		}
	})
}

// startInProcess runs a demo node in this process (SQLite in a temporary
// directory, embedded NATS) with both listeners on free ports.
func startInProcess(t *testing.T, extra ...string) *node {
	t.Helper()
	var o serveOptions
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	o.register(fs)
	if err := fs.Parse(append([]string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--data", t.TempDir(), "--demo"}, extra...)); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	n := newNode(o, log)
	t.Cleanup(func() { n.Close() })
	if err := n.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return n
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %s", url, err, res.Status)
	}
	return string(b)
}

// sumSeries sums the samples of name (exactly) in a text exposition whose
// labels contain labels; ok says whether there was any.
func sumSeries(text, name, labels string) (sum float64, ok bool) {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ') // label values may hold spaces
		if i < 0 {
			continue
		}
		series, value := line[:i], line[i+1:]
		base, lbls, _ := strings.Cut(series, "{")
		if base != name || !strings.Contains(lbls, labels) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		sum, ok = sum+v, true
	}
	return sum, ok
}

var fqNameRe = regexp.MustCompile(`fqName: "([^"]+)"`)

// registeredNames are the names of every metric the registry describes,
// with or without series yet.
func registeredNames(t *testing.T, reg *prometheus.Registry) map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() {
		reg.Describe(ch)
		close(ch)
	}()
	names := map[string]bool{}
	for d := range ch {
		if m := fqNameRe.FindStringSubmatch(d.String()); m != nil {
			names[m[1]] = true
		}
	}
	if !names["parley_gateway_deliveries_total"] || !names["go_goroutines"] {
		t.Fatalf("registry descriptions not understood: %d names", len(names))
	}
	return names
}

// metricRe finds the series a PromQL query reads (Parley's own and the Go
// and process collectors').
var metricRe = regexp.MustCompile(`\b(?:parley|go|process)_[a-zA-Z0-9_]+`)

// histogramBase strips a histogram's series suffix.
func histogramBase(name string) string {
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, s); ok {
			return b
		}
	}
	return name
}

// dashboardExprs reads every query of a Grafana dashboard (panels nested
// in rows included) and checks that each panel reads the ${datasource}
// variable.
func dashboardExprs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title      string `json:"title"`
		Type       string `json:"type"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var d struct {
		Templating struct {
			List []struct {
				Name, Type string
				Query      any
			} `json:"list"`
		} `json:"templating"`
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	if !slices.ContainsFunc(d.Templating.List, func(v struct {
		Name, Type string
		Query      any
	}) bool {
		return v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus"
	}) {
		t.Fatal("the dashboard has no Prometheus datasource variable")
	}
	var exprs []string
	var walk func([]json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("panel: %v", err)
			}
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q does not use the datasource variable", p.Title)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				exprs = append(exprs, tg.Expr)
			}
		}
	}
	walk(d.Panels)
	return exprs
}
