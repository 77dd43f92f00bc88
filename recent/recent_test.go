package recent

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"parley"
	"parley/hot"
	"parley/internal/bustest"
	"parley/internal/testpg"
	"parley/querycache"
	"parley/sqlstore"
)

type live struct {
	p atomic.Pointer[parley.LiveConfig]
}

func (l *live) LiveConfig() parley.LiveConfig { return *l.p.Load() }
func (l *live) set(f func(*parley.LiveConfig)) {
	c := *l.p.Load()
	f(&c)
	l.p.Store(&c)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// gated is the real store with its ListEvents counted and, while gate is
// set, held until the gate opens.
type gated struct {
	*sqlstore.Store
	calls    atomic.Int64 // ListEvents
	syncs    atomic.Int64
	logReads atomic.Int64 // ChannelLog
	gate     chan struct{}
}

func (g *gated) Sync(ctx context.Context, actor string, q map[string]int64) (map[string]parley.SyncResult, error) {
	g.syncs.Add(1)
	return g.Store.Sync(ctx, actor, q)
}

func (g *gated) ChannelLog(ctx context.Context, ch string, after int64, limit int) ([]parley.Event, error) {
	g.logReads.Add(1)
	return g.Store.ChannelLog(ctx, ch, after, limit)
}

// reads is every read of events this layer made of the store.
func (g *gated) reads() int64 { return g.calls.Load() + g.syncs.Load() + g.logReads.Load() }

func (g *gated) ListEvents(ctx context.Context, actor, ch string, after int64, limit int) (*parley.EventPage, error) {
	g.calls.Add(1)
	if g.gate != nil {
		<-g.gate
	}
	return g.Store.ListEvents(ctx, actor, ch, after, limit)
}

type world struct {
	st                     *gated
	wrapped                parley.Store
	b                      *Buffer
	det                    *hot.Detector
	live                   *live
	reg                    *prometheus.Registry
	alice, bob, carol, eve string
	priv, pub, other       string
	ws, invite             string
}

func setup(t *testing.T) *world { return setupOn(t, false) }

// setupOn builds a node's read path over a real bus and store: SQLite, or
// PostgreSQL when pg.
func setupOn(t *testing.T, pg bool) *world {
	t.Helper()
	ctx := context.Background()
	bus := bustest.Kinds()[0].Start(t)
	l := &live{}
	c := parley.DefaultLiveConfig()
	c.HotOnRate, c.HotOffRate, c.HotWindowSeconds, c.HotTTLSeconds = 1, 0, 1, 60
	l.p.Store(&c)
	scfg := sqlstore.Config{Path: filepath.Join(t.TempDir(), "p.db"), Publisher: bus, Logger: quiet(), LiveConfig: l}
	if pg {
		scfg.Path, scfg.PostgresURL = "", testpg.New(t)
	}
	raw, err := sqlstore.Open(ctx, scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	st := &gated{Store: raw}
	cache := querycache.New(querycache.Config{Store: raw, Bus: bus, Logger: quiet()})
	t.Cleanup(cache.Close)
	reg := prometheus.NewRegistry()
	det, err := hot.New(hot.Config{Live: l, Bus: bus, NodeID: "N1", Logger: quiet(), Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(det.Close)
	b, err := New(Config{Store: st, Bus: bus, Hot: det, Access: cache.CanRead, Live: l, Logger: quiet(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	w := &world{st: st, wrapped: b.Wrap(st), b: b, det: det, live: l, reg: reg}

	user := func(h string) string {
		u, err := raw.CreateUser(ctx, parley.NewUser{Email: h + "@x.test", Name: h, Handle: h, PasswordHash: "x"})
		if err != nil {
			t.Fatal(err)
		}
		return u.ID
	}
	w.alice, w.bob, w.carol, w.eve = user("alice"), user("bob"), user("carol"), user("eve")
	ws, err := raw.CreateWorkspace(ctx, w.alice, "One", "one")
	if err != nil {
		t.Fatal(err)
	}
	ws2, err := raw.CreateWorkspace(ctx, w.eve, "Two", "two")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := raw.CreateInvite(ctx, w.alice, ws.ID, parley.InviteParams{})
	if err != nil {
		t.Fatal(err)
	}
	w.ws, w.invite = ws.ID, inv.Code
	for _, u := range []string{w.bob, w.carol} {
		if _, err := raw.AcceptInvite(ctx, u, inv.Code); err != nil {
			t.Fatal(err)
		}
	}
	ch := func(actor, wsID, name string, kind parley.ChannelKind) string {
		c, err := raw.CreateChannel(ctx, actor, wsID, parley.NewChannel{Name: name, Kind: kind})
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	w.priv = ch(w.alice, ws.ID, "secret", parley.KindPrivate)
	w.pub = ch(w.alice, ws.ID, "open", parley.KindPublic)
	w.other = ch(w.eve, ws2.ID, "theirs", parley.KindPublic)
	if _, err := raw.AddMembers(ctx, w.alice, w.priv, []string{w.bob}); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) post(t *testing.T, ch string, n int) int64 {
	t.Helper()
	var last int64
	for i := range n {
		m, _, err := w.st.PostMessage(context.Background(), w.alice, ch, parley.NewMessage{Text: "m" + string(rune('a'+i%26))})
		if err != nil {
			t.Fatal(err)
		}
		last = m.Seq
	}
	return last
}

// lastSeq is the channel's last event seq, as the store has it.
func (w *world) lastSeq(t *testing.T, ch string) int64 {
	t.Helper()
	evs, err := w.st.Store.ChannelLog(context.Background(), ch, 0, 1000)
	if err != nil || len(evs) == 0 {
		t.Fatalf("channel log: %v", err)
	}
	return evs[len(evs)-1].Seq
}

// makeHot marks ch hot and waits for its buffer to hold everything up to
// the store's last seq, gap-free from seq 0.
func (w *world) makeHot(t *testing.T, ch string) {
	t.Helper()
	for s := int64(1); s <= 3; s++ {
		w.det.Observe(ch, s)
	}
	waitFor(t, "channel hot", func() bool { return w.det.Hot(ch) })
	waitFor(t, "buffer started", func() bool {
		w.b.mu.Lock()
		defer w.b.mu.Unlock()
		return w.b.chans[ch] != nil
	})
	w.post(t, ch, 3) // the buffer starts with the first event it hears
	w.waitBuffered(t, ch, 0)
}

func (w *world) waitBuffered(t *testing.T, ch string, lo int64) {
	t.Helper()
	w.waitSpan(t, ch, lo, w.lastSeq(t, ch))
}

// waitSpan waits for ch's buffer to hold exactly (lo, hi], with no fill
// under way.
func (w *world) waitSpan(t *testing.T, ch string, lo, last int64) {
	t.Helper()
	waitFor(t, "buffer filled", func() bool {
		w.b.mu.Lock()
		c := w.b.chans[ch]
		w.b.mu.Unlock()
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.started && c.lo == lo && c.hi == last && !c.filling
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func js(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (w *world) reads(op, result string) float64 {
	return testutil.ToFloat64(w.b.m.reads.WithLabelValues(op, result))
}

// sameAsStore checks that the wrapped store answers every ListEvents and
// Sync of ch exactly as the store does.
func (w *world) sameAsStore(t *testing.T, actor, ch string) {
	t.Helper()
	ctx := context.Background()
	last := w.lastSeq(t, ch)
	for after := int64(0); after <= last+1; after++ {
		for _, limit := range []int{1, 3, 0, 500} {
			want, err1 := w.st.Store.ListEvents(ctx, actor, ch, after, limit)
			got, err2 := w.wrapped.ListEvents(ctx, actor, ch, after, limit)
			if js(t, want) != js(t, got) || (err1 == nil) != (err2 == nil) {
				t.Fatalf("ListEvents(after %d, limit %d):\n got %s %v\nwant %s %v", after, limit, js(t, got), err2, js(t, want), err1)
			}
		}
		q := map[string]int64{ch: after, w.pub: 0}
		want, err1 := w.st.Store.Sync(ctx, actor, q)
		got, err2 := w.wrapped.Sync(ctx, actor, q)
		if js(t, want) != js(t, got) || (err1 == nil) != (err2 == nil) {
			t.Fatalf("Sync(after %d):\n got %s %v\nwant %s %v", after, js(t, got), err2, js(t, want), err1)
		}
	}
}

func TestBufferAnswersAsTheStore(t *testing.T) {
	w := setup(t)
	w.post(t, w.priv, 5)
	w.makeHot(t, w.priv)
	w.post(t, w.priv, 4)
	w.waitBuffered(t, w.priv, 0)

	calls := w.st.calls.Load()
	w.sameAsStore(t, w.bob, w.priv)
	if w.reads("events", "hit") == 0 || w.reads("sync", "hit") == 0 {
		t.Fatal("the buffer answered nothing")
	}
	// Every ListEvents the buffer could answer skipped the store: the
	// only ones that reached it asked past the buffer's newest event.
	if got := w.st.calls.Load() - calls; got != 4 {
		t.Fatalf("%d ListEvents reached the store, want the 4 asking past the newest event", got)
	}

	// Access is the store's: a workspace member outside the private
	// channel and a user of another workspace are refused, from the buffer
	// as from the store.
	ctx := context.Background()
	for _, actor := range []string{w.carol, w.eve} {
		_, err := w.wrapped.ListEvents(ctx, actor, w.priv, 3, 10)
		if parley.ErrorCode(err) != parley.ENOTFOUND {
			t.Fatalf("ListEvents by an outsider: %v, want ENOTFOUND", err)
		}
		res, err := w.wrapped.Sync(ctx, actor, map[string]int64{w.priv: 3})
		if err != nil || res[w.priv].Error != parley.ENOTFOUND || len(res[w.priv].Events) != 0 {
			t.Fatalf("Sync by an outsider: %+v %v", res, err)
		}
	}
	w.sameAsStore(t, w.carol, w.priv)
	w.sameAsStore(t, w.eve, w.priv)
}

func TestGapsFallThroughAndRefill(t *testing.T) {
	w := setup(t)
	w.post(t, w.priv, 5)
	w.makeHot(t, w.priv)

	// A small buffer: reads before its window go to the store.
	w.live.set(func(c *parley.LiveConfig) { c.RecentEvents = 4 })
	last := w.post(t, w.priv, 3)
	w.waitBuffered(t, w.priv, last-4)
	miss := w.reads("events", "miss")
	w.sameAsStore(t, w.bob, w.priv)
	if w.reads("events", "miss") <= miss {
		t.Fatal("reads before the buffer's window were not misses")
	}

	// The bus skips events (a gap): the buffer restarts at the event past
	// the gap and reads the tail before it from the store again.
	w.live.set(func(c *parley.LiveConfig) { c.RecentEvents = 1000 })
	evs, err := w.st.Store.ChannelLog(context.Background(), w.priv, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	c := &chanBuf{}
	w.b.mu.Lock()
	old := w.b.chans[w.priv]
	w.b.chans[w.priv] = c
	w.b.mu.Unlock()
	_ = old.unsub() // the test feeds c itself
	n := len(evs)
	w.b.take(w.priv, c, evs[n-5])
	w.b.take(w.priv, c, evs[n-2]) // skips two
	w.waitSpan(t, w.priv, 0, evs[n-2].Seq)
	w.b.take(w.priv, c, evs[n-1])
	w.waitBuffered(t, w.priv, 0)
	w.sameAsStore(t, w.bob, w.priv)
}

func TestDryRunAnswersFromTheStore(t *testing.T) {
	w := setup(t)
	w.post(t, w.priv, 3)
	w.makeHot(t, w.priv)
	w.live.set(func(c *parley.LiveConfig) { c.RecentDryRun = true })
	calls := w.st.calls.Load()
	w.sameAsStore(t, w.bob, w.priv)
	if w.reads("events", "hit") != 0 || w.reads("sync", "hit") != 0 {
		t.Fatal("dry run answered from the buffer")
	}
	if w.reads("events", "dry_run_hit") == 0 || w.reads("sync", "dry_run_hit") == 0 {
		t.Fatal("dry run counted no would-be hits")
	}
	if w.st.calls.Load() == calls {
		t.Fatal("dry run did not read the store")
	}
}

// Identical concurrent reads of a channel the buffer cannot answer share
// one store query; each caller is authorized first.
func TestConcurrentReadsCoalesce(t *testing.T) {
	w := setup(t)
	w.post(t, w.pub, 3)
	w.st.gate = make(chan struct{})
	const n = 6
	var wg sync.WaitGroup
	pages := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := w.wrapped.ListEvents(context.Background(), w.bob, w.pub, 0, 50)
			if err != nil {
				t.Error(err)
				return
			}
			pages[i] = js(t, p)
		}()
	}
	// Wait until one caller is in the store and the others wait on it.
	waitFor(t, "callers waiting on the shared read", func() bool {
		buf := make([]byte, 1<<20)
		return w.st.calls.Load() == 1 && strings.Count(string(buf[:runtime.Stack(buf, true)]), "(*Group).Do(") >= n
	})
	close(w.st.gate)
	wg.Wait()
	if got := w.st.calls.Load(); got != 1 {
		t.Fatalf("%d store queries for %d identical reads, want 1", got, n)
	}
	for _, p := range pages[1:] {
		if p != pages[0] {
			t.Fatal("callers of a shared read got different pages")
		}
	}
	if v := testutil.ToFloat64(w.b.m.coalesced); v != n {
		t.Fatalf("coalesced %v, want %d", v, n)
	}
	// An outsider is refused before any sharing.
	_, err := w.wrapped.ListEvents(context.Background(), w.eve, w.pub, 0, 50)
	if parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("another workspace's user: %v, want ENOTFOUND", err)
	}
}
