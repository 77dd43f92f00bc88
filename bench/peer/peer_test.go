package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"parley"
	"parley/bench/internal/benchkit"
)

// TestMain lets the test binary be the null server, as the peer command
// is (null.go).
func TestMain(m *testing.M) {
	maybeServeNull()
	os.Exit(m.Run())
}

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

func TestRecorderCountsLostAndDuplicatedPerRound(t *testing.T) {
	rec := newRecorder([]int{2, 3}) // messages 0-1, then 2-4
	subs := []*counts{rec.newCounts(), rec.newCounts()}
	stamp := func(i int) []byte { return []byte(`{"text":"` + stampPrefix + `|` + strconv.Itoa(i) + `|1000|xx"}`) }
	for _, i := range []int{0, 1, 2, 3, 4, 4} { // message 4 twice
		rec.receive(subs[0], stamp(i))
	}
	for _, i := range []int{0, 3} { // 1, 2 and 4 lost
		rec.receive(subs[1], stamp(i))
	}
	rec.receive(subs[1], stamp(5))                                             // beyond the plan: not ours
	rec.receive(subs[1], []byte(`{"push":{"pub":{"data":{"text":"hello"}}}}`)) // no stamp
	if d, u := rec.rounds[0].distinct.Load(), rec.rounds[0].dups.Load(); d != 3 || u != 0 {
		t.Errorf("round 1: %d distinct, %d duplicates; want 3 and 0", d, u)
	}
	if d, u := rec.rounds[1].distinct.Load(), rec.rounds[1].dups.Load(); d != 4 || u != 1 {
		t.Errorf("round 2: %d distinct, %d duplicates; want 4 and 1", d, u)
	}
	if m0, m1 := subs[0].missing(5), subs[1].missing(5); m0 != 0 || m1 != 3 {
		t.Errorf("missing %d and %d, want 0 and 3", m0, m1)
	}
	if rec.rounds[1].lat.Count() != 4 || rec.delivered.Load() != 8 {
		t.Errorf("%d latencies in round 2, %d receipts", rec.rounds[1].lat.Count(), rec.delivered.Load())
	}
}

// Every server but Parley gets Parley's message object for the same text,
// stamped with the message's scheduled time.
func TestPublicationCarriesTheMessageObject(t *testing.T) {
	due := time.Unix(1_700_000_000, 5)
	p := newPublication(7, due, 200)
	var m parley.Message
	if err := json.Unmarshal(p.object, &m); err != nil {
		t.Fatal(err)
	}
	idx, sent, ok := benchkit.ParseStamp([]byte(stampPrefix), p.object)
	if m.Text != p.text || len(p.text) != 200 || m.Seq != 8 || !m.CreatedAt.Equal(due) || !ok || idx != 7 || sent != due.UnixNano() {
		t.Fatalf("publication %+v: message %+v, stamp %d %d %v", p, m, idx, sent, ok)
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

// The null server carries the same workload with nothing behind it: every
// subscriber gets every message once, and both processes' cores are read.
func TestTinyNullServerRun(t *testing.T) {
	const subs = 30
	results, err := Run(t.Context(), Config{
		Servers: []string{"null"}, Subscribers: []int{subs}, Pollers: 2, MaxInFlight: 4,
		Rate: 20, Duration: 250 * time.Millisecond, Rounds: 2,
		TextBytes: 200, ConnectWorkers: 4, Drain: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := results[0]
	if r.Server != "null" || r.Rounds != 2 || r.Messages != 10 || r.Delivered != subs*10 || r.Lost != 0 || r.Duplicates != 0 || r.Drops != 0 {
		t.Fatalf("result %+v", r)
	}
	for i, rr := range r.PerRound {
		if rr.Delivered != subs*5 || rr.Errors != 0 || rr.P99ms < rr.P50ms || rr.PublishSeconds <= 0 || rr.ServerCores < 0 || rr.GenCores < 0 {
			t.Fatalf("round %d: %+v", i+1, rr)
		}
	}
}

// A ramp stops at its first failing round, and the capacity is the rate of
// the last round before it. The p99 limit of 1 ns fails every round
// whatever the machine's load: only the first runs.
func TestRampStopsAtFirstFailure(t *testing.T) {
	cfg := Config{
		Servers: []string{"null"}, Subscribers: []int{5}, MaxInFlight: 4,
		Ramp: []float64{20, 40}, Duration: 200 * time.Millisecond, P99Limit: time.Nanosecond,
		TextBytes: 100, ConnectWorkers: 4, Drain: 10 * time.Second,
	}
	results, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r := results[0]; r.Capacity != 0 || len(r.PerRound) != 1 || r.PerRound[0].Pass || r.PerRound[0].Rate != 20 || r.PerRound[0].Lost != 0 {
		t.Fatalf("with an impossible p99: %+v", r)
	}
	var b bytes.Buffer
	Print(&b, cfg, results)
	if !strings.Contains(b.String(), "| 5 | null | 20 → ") || !strings.Contains(b.String(), "| **no** |") {
		t.Fatalf("capacity report:\n%s", b.String())
	}
}

// The null server's frames are whole RFC 6455 text frames at each length
// class.
func TestWSTextFrame(t *testing.T) {
	for _, tc := range []struct {
		n    int
		head []byte
	}{{5, []byte{0x81, 5}}, {300, []byte{0x81, 126, 1, 44}}, {70000, []byte{0x81, 127, 0, 0, 0, 0, 0, 1, 0x11, 0x70}}} {
		payload := bytes.Repeat([]byte("x"), tc.n)
		f := wsTextFrame(payload)
		if !bytes.Equal(f[:len(tc.head)], tc.head) || !bytes.Equal(f[len(tc.head):], payload) {
			t.Errorf("%d bytes: header % x", tc.n, f[:min(len(f), 10)])
		}
	}
}

// TestWireParley: the -wire mode reads Parley's delivered frames off the
// wire: every delivery to a client offering permessage-deflate went out
// compressed and smaller, the others not; the first message is larger (it
// carries its author as a just-in-time user).
func TestWireParley(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs parley; skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "parley")
	build := exec.Command("go", "build", "-o", bin, "parley/cmd/parley")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("build parley: %v", err)
	}
	rows, err := measureWire(t.Context(), Config{Parley: bin, TextBytes: 200}, "../../gateway/testdata/corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 8 {
		t.Fatalf("rows %+v", rows)
	}
	for i := 0; i < len(rows); i += 4 { // plain first, plain, compressed first, compressed
		plainJIT, plain, zJIT, z := rows[i], rows[i+1], rows[i+2], rows[i+3]
		if plainJIT.Compressed || plain.Compressed || !zJIT.Compressed || !z.Compressed {
			t.Fatalf("compressed flags: %+v", rows[i:i+4])
		}
		if z.Bytes >= plain.Bytes || zJIT.Bytes >= plainJIT.Bytes || plain.Bytes >= plainJIT.Bytes {
			t.Fatalf("sizes: %+v", rows[i:i+4])
		}
	}
}
