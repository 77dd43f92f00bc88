package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRatiosPairBySize(t *testing.T) {
	results := []Result{
		{Server: "parley", Subscribers: 1000, DeliveriesPerCPU: 60000, P50ms: 4, P99ms: 30, RSSPerConn: 4096},
		{Server: "centrifugo", Subscribers: 1000, DeliveriesPerCPU: 30000, P50ms: 2, P99ms: 60, RSSPerConn: 16384},
		{Server: "parley", Subscribers: 10000, DeliveriesPerCPU: 90000, P50ms: 50, P99ms: 200, RSSPerConn: 5000},
		{Server: "centrifugo", Subscribers: 10000, DeliveriesPerCPU: 0, P50ms: 100, P99ms: 100, RSSPerConn: 10000},
		{Server: "parley", Subscribers: 5, DeliveriesPerCPU: 1}, // no peer at this size: no ratio
	}
	got := Ratios(results)
	want := []Ratio{
		{Subscribers: 1000, DeliveriesPerCPU: 2, P50: 2, P99: 0.5, RSSPerConn: 0.25},
		{Subscribers: 10000, DeliveriesPerCPU: 0, P50: 0.5, P99: 2, RSSPerConn: 0.5},
	}
	if len(got) != len(want) {
		t.Fatalf("ratios %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("ratio %d: %+v, want %+v", i, got[i], want[i])
		}
	}

	var b bytes.Buffer
	Print(&b, Config{Rate: 2, TextBytes: 200, Duration: 20 * time.Second}, results)
	out := b.String()
	for _, line := range []string{
		"| 1000 | 2.00× | 2.00× | 0.50× | 0.25× |",
		"| 10000 | — | 0.50× | 2.00× | 0.50× |",
		"| 1000 | centrifugo |",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("table lacks %q:\n%s", line, out)
		}
	}
	if n := strings.Count(out, "| 5 | "); n != 1 { // its result row, no ratio row
		t.Errorf("a size without a peer has a ratio row:\n%s", out)
	}
}

func TestTallyCountsLostAndDuplicated(t *testing.T) {
	all := []*counts{
		{got: []uint8{1, 1, 1}},
		{got: []uint8{1, 0, 3}}, // message 1 lost, message 2 twice too many
		{got: []uint8{1}},       // messages 1 and 2 never arrived
	}
	lost, dups := tally(all, 3)
	if lost != 3 || dups != 2 {
		t.Fatalf("lost %d, dups %d; want 3 and 2", lost, dups)
	}
}

func TestRecorderIgnoresForeignFrames(t *testing.T) {
	rec := newRecorder(2, 1)
	c := &counts{}
	rec.receive(c, []byte(`{"push":{"channel":"bench:room","pub":{"data":{"text":"hello"}}}}`))
	rec.receive(c, []byte(`{"push":{"channel":"bench:room","pub":{"data":{"text":"pcmp|1|`+
		"1000"+`|xxxx"}}}}`))
	if rec.delivered.Load() != 1 || len(c.got) != 2 || c.got[1] != 1 || rec.latN[1].Load() != 1 {
		t.Fatalf("delivered %d, got %v", rec.delivered.Load(), c.got)
	}
}

func TestClassifyCentrifugoLines(t *testing.T) {
	for line, want := range map[string]cfFrame{
		`{}`: cfPing,
		`{"push":{"channel":"bench:room","pub":{"data":{}}}}`:         cfPush,
		`{"id":2,"subscribe":{}}`:                                     cfReply,
		`{"id":1,"error":{"code":103,"message":"permission denied"}}`: cfReply,
	} {
		if got := classify([]byte(line)); got != want {
			t.Errorf("classify(%s) = %d, want %d", line, got, want)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestParseSizes(t *testing.T) {
	if got, err := parseSizes("1000, 10000"); err != nil || len(got) != 2 || got[0] != 1000 || got[1] != 10000 {
		t.Fatalf("parseSizes: %v %v", got, err)
	}
	for _, bad := range []string{"", "0", "10,x", "-5"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) accepted", bad)
		}
	}
}

// The Parley half of the workload, tiny, so that the comparison keeps
// working without Centrifugo (the real run is make bench-peer).
func TestTinyParleyRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs parley; skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "parley")
	build := exec.Command("go", "build", "-o", bin, "parley/cmd/parley")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("build parley: %v", err)
	}
	const subs = 20
	results, err := Run(t.Context(), Config{
		Parley: bin, Servers: []string{"parley"}, Subscribers: []int{subs},
		Rate: 20, Duration: 250 * time.Millisecond, Rounds: 2, // 5 messages a round
		TextBytes: 200, ConnectWorkers: 4, Settle: 100 * time.Millisecond, Drain: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 {
		t.Fatalf("results %+v", results)
	}
	r := results[0]
	if r.Server != "parley" || r.Rounds != 2 || len(r.PerRound) != 2 || r.Messages != 10 || r.Delivered != subs*10 || r.Lost != 0 || r.Duplicates != 0 || r.Drops != 0 {
		t.Fatalf("result %+v", r)
	}
	for i, rr := range r.PerRound {
		if rr.Delivered != subs*5 || rr.P50ms <= 0 || rr.P99ms < rr.P50ms || rr.Maxms > r.Maxms {
			t.Fatalf("round %d: %+v (result %+v)", i+1, rr, r)
		}
	}
	if r.P50ms <= 0 || r.P99ms < r.P50ms || r.ServerCPUSeconds < 0 || r.RSSBaseBytes <= 0 {
		t.Fatalf("implausible measurements %+v", r)
	}
	if len(Ratios(results)) != 0 {
		t.Fatalf("a ratio without a peer")
	}
}
