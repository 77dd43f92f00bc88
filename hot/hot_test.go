package hot

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"parley"
	"parley/internal/bustest"
)

// live is a LiveConfigSource a test changes as an operator would.
type live struct {
	p atomic.Pointer[parley.LiveConfig]
}

func newLive(change func(*parley.LiveConfig)) *live {
	c := parley.DefaultLiveConfig()
	c.HotOnRate, c.HotOffRate, c.HotWindowSeconds, c.HotTTLSeconds = 10, 5, 1, 3
	if change != nil {
		change(&c)
	}
	l := &live{}
	l.p.Store(&c)
	return l
}

func (l *live) LiveConfig() parley.LiveConfig { return *l.p.Load() }

func (l *live) set(change func(*parley.LiveConfig)) {
	c := *l.p.Load()
	change(&c)
	l.p.Store(&c)
}

// clock is a manual clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type change struct {
	ch string
	on bool
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newDetector(t *testing.T, cfg Config) (*Detector, chan change) {
	t.Helper()
	cfg.Interval = -1 // the test evaluates
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	got := make(chan change, 100)
	d.Watch(func(ch string, on bool) { got <- change{ch, on} })
	return d, got
}

// feed observes n events of ch spread over dur, from seq from+1.
func feed(d *Detector, c *clock, ch string, from int64, n int, dur time.Duration) int64 {
	step := dur / time.Duration(n)
	for i := range n {
		c.add(step)
		d.Observe(ch, from+int64(i)+1)
	}
	return from + int64(n)
}

func expect(t *testing.T, got chan change, want change) {
	t.Helper()
	select {
	case c := <-got:
		if c != want {
			t.Fatalf("watch got %+v, want %+v", c, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no watch call %+v within 10s", want)
	}
}

func expectNone(t *testing.T, got chan change) {
	t.Helper()
	select {
	case c := <-got:
		t.Fatalf("unexpected watch call %+v", c)
	default:
	}
}

func TestHysteresis(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	reg := prometheus.NewRegistry()
	d, got := newDetector(t, Config{Live: newLive(nil), Now: c.now, Registerer: reg})
	seq := feed(d, c, "C1", 0, 8, time.Second) // 8/s: under the on rate
	d.evaluate()
	expectNone(t, got)
	seq = feed(d, c, "C1", seq, 12, time.Second) // 12/s
	d.evaluate()
	expect(t, got, change{"C1", true})
	if !d.Hot("C1") || d.Hot("C2") {
		t.Fatal("Hot disagrees with the transition")
	}
	seq = feed(d, c, "C1", seq, 7, time.Second) // 7/s: under on, above off
	d.evaluate()
	expectNone(t, got)
	if !d.Hot("C1") {
		t.Fatal("a channel between the off and on rates cooled")
	}
	feed(d, c, "C1", seq, 3, time.Second) // 3/s: under off
	d.evaluate()
	expect(t, got, change{"C1", false})
	if d.Hot("C1") {
		t.Fatal("cooled channel still hot")
	}
	if v := testutil.ToFloat64(d.m.transitions.WithLabelValues("on", "local")); v != 1 {
		t.Fatalf("on transitions %v, want 1", v)
	}
	if v := testutil.ToFloat64(d.m.hot); v != 0 {
		t.Fatalf("hot gauge %v, want 0", v)
	}
}

func TestDuplicateSeqsAreNotCounted(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	d, got := newDetector(t, Config{Live: newLive(nil), Now: c.now})
	for i := range 8 {
		c.add(100 * time.Millisecond)
		for range 3 { // three paths report each event
			d.Observe("C1", int64(i+1))
		}
		d.Observe("C1", 1) // and an old one
	}
	d.evaluate()
	expectNone(t, got)
}

func TestDryRun(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	reg := prometheus.NewRegistry()
	l := newLive(func(lc *parley.LiveConfig) { lc.HotDryRun = true })
	d, got := newDetector(t, Config{Live: l, Now: c.now, Registerer: reg})
	seq := feed(d, c, "C1", 0, 30, time.Second)
	d.evaluate()
	expectNone(t, got)
	if d.Hot("C1") {
		t.Fatal("hot in dry run")
	}
	if v := testutil.ToFloat64(d.m.dryRun.WithLabelValues("on")); v != 1 {
		t.Fatalf("dry-run on transitions %v, want 1", v)
	}
	if chs := d.Channels(); len(chs) != 1 || chs[0].Source != "dry_run" {
		t.Fatalf("listing in dry run: %+v", chs)
	}
	// Leaving dry run while it is still hot makes it hot for real.
	l.set(func(lc *parley.LiveConfig) { lc.HotDryRun = false })
	feed(d, c, "C1", seq, 30, time.Second)
	d.evaluate()
	expect(t, got, change{"C1", true})
	// Turning detection off clears the mark.
	l.set(func(lc *parley.LiveConfig) { lc.HotEnabled = false })
	d.evaluate()
	expect(t, got, change{"C1", false})
}

func TestIdleChannelsAreForgottenAndMemoryBounded(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	reg := prometheus.NewRegistry()
	d, _ := newDetector(t, Config{Live: newLive(nil), Now: c.now, Registerer: reg, MaxChannels: 50})
	for i := range 80 {
		d.Observe("C"+string(rune('A'+i%26))+string(rune('a'+i/26)), 1)
	}
	if n := len(d.chans); n != 50 {
		t.Fatalf("tracking %d channels, want the cap of 50", n)
	}
	if v := testutil.ToFloat64(d.m.untracked); v != 30 {
		t.Fatalf("untracked events %v, want 30", v)
	}
	c.add(3 * time.Second) // more than two windows idle
	d.evaluate()
	if n := len(d.chans); n != 0 {
		t.Fatalf("%d idle channels still tracked", n)
	}
	d.Observe("Cnew", 1)
	if n := len(d.chans); n != 1 {
		t.Fatalf("tracking %d channels after forgetting, want 1", n)
	}
}

// Two detectors on one real bus: one marks a channel hot, the other hears
// it; the second keeps it while the first renews and lets it lapse after
// the TTL once the first stops renewing; an off is heard at once.
func TestSharedMarkAndTTL(t *testing.T) {
	bus := bustest.Kinds()[0].Start(t)
	c1 := &clock{t: time.Unix(1000, 0)}
	c2 := &clock{t: time.Unix(1000, 0)}
	l := newLive(nil)
	d1, got1 := newDetector(t, Config{Live: l, Bus: bus, NodeID: "N1", Now: c1.now})
	d2, got2 := newDetector(t, Config{Live: l, Bus: bus, NodeID: "N2", Now: c2.now})
	if err := bus.Flush(); err != nil {
		t.Fatal(err)
	}

	seq := feed(d1, c1, "C1", 0, 20, time.Second)
	d1.evaluate()
	expect(t, got1, change{"C1", true})
	expect(t, got2, change{"C1", true})
	if !d2.Hot("C1") {
		t.Fatal("the other node does not see the mark")
	}
	chs := d2.Channels()
	if len(chs) != 1 || chs[0].Source != "remote" || chs[0].NodeID != "N1" || chs[0].ExpiresAt == nil || chs[0].Rate < 10 {
		t.Fatalf("remote listing %+v", chs)
	}

	// N1 renews (TTL 3s, renewal every 1s) while N2's clock moves past the
	// first mark's TTL: still hot. N2's clock moves before each renewal,
	// so that waitRenewed is met only by a renewal received at N2's new
	// time: this round's, never the one before (met at the old time, it
	// left this round's in flight, which could then land after the lapse
	// below and mark the channel hot again).
	for range 4 {
		c2.add(time.Second)
		seq = feed(d1, c1, "C1", seq, 20, time.Second)
		d1.evaluate()
		waitRenewed(t, d2)
		d2.evaluate()
	}
	expectNone(t, got2)
	if !d2.Hot("C1") {
		t.Fatal("a renewed mark lapsed")
	}

	// N1 stops renewing (it died): N2 lets the mark lapse after the TTL.
	c2.add(3 * time.Second)
	d2.evaluate()
	expect(t, got2, change{"C1", false})
	if d2.Hot("C1") {
		t.Fatal("a lapsed mark is still hot")
	}

	// N1 cools: the off reaches N2 without waiting for a TTL.
	seq = feed(d1, c1, "C1", seq, 20, time.Second)
	d1.evaluate() // renews: N2 takes the mark again
	expect(t, got2, change{"C1", true})
	c1.add(5 * time.Second)
	d1.evaluate()
	expect(t, got1, change{"C1", false})
	expect(t, got2, change{"C1", false})

	// The admin listing of the first node.
	feed(d1, c1, "C2", seq, 20, time.Second)
	d1.evaluate()
	expect(t, got1, change{"C2", true})
	rec := httptest.NewRecorder()
	AdminHandler(d1).ServeHTTP(rec, httptest.NewRequest("GET", "/hot", nil))
	var body struct {
		Channels []Channel `json:"channels"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != 200 {
		t.Fatalf("admin: %d %s %v", rec.Code, rec.Body, err)
	}
	if len(body.Channels) != 1 || body.Channels[0].ChannelID != "C2" || body.Channels[0].Source != "local" || body.Channels[0].NodeID != "N1" {
		t.Fatalf("admin listing %s", rec.Body)
	}
}

// waitRenewed waits until d holds N1's mark of C1 renewed to expire a TTL
// from d's clock now (the test moves that clock itself).
func waitRenewed(t *testing.T, d *Detector) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d.mu.Lock()
		r, ok := d.remotes["C1"]["N1"]
		fresh := ok && !r.expires.Before(d.now().Add(3*time.Second))
		d.mu.Unlock()
		if fresh {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no renewal heard within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
