package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"parley"
	"parley/bench/internal/benchkit"
	pclient "parley/client"
)

// Config is one comparison run.
type Config struct {
	Parley         string        // path of the parley binary
	Centrifugo     string        // path of the centrifugo binary ("" when Servers lacks it)
	Servers        []string      // "parley", "centrifugo", in the order they run
	Subscribers    []int         // sizes: subscribers of the one channel
	Rate           float64       // messages per second, both servers
	Duration       time.Duration // of one round
	Rounds         int           // publishing rounds on the same connections; medians are reported
	TextBytes      int           // message size
	ConnectWorkers int
	Pollers        int // the load generator's poller goroutines
	ReadBuffer     int
	Settle         time.Duration // idle time after connecting, before RSS is read
	Drain          time.Duration // longest wait for the last deliveries
	Log            *slog.Logger
}

// Result is one server at one size.
type Result struct {
	Server      string `json:"server"`
	Subscribers int    `json:"subscribers"`
	Rounds      int    `json:"rounds"`
	Messages    int    `json:"messages"` // over all rounds

	Expected   int64 `json:"expected_deliveries"`
	Delivered  int64 `json:"delivered"`
	Lost       int64 `json:"lost"`
	Duplicates int64 `json:"duplicates"`
	Drops      int64 `json:"drops"` // connections the server closed

	ConnectSeconds   float64 `json:"connect_seconds"`
	PublishP50ms     float64 `json:"publish_p50_ms"`
	ServerCPUSeconds float64 `json:"server_cpu_seconds"` // all rounds, drains included
	// The medians over the rounds, and the largest latency of all.
	DeliveriesPerCPU float64 `json:"deliveries_per_cpu_second"`
	P50ms            float64 `json:"p50_ms"`
	P99ms            float64 `json:"p99_ms"`
	Maxms            float64 `json:"max_ms"`
	PerRound         []Round `json:"rounds_detail"`

	RSSBaseBytes      int64      `json:"rss_base_bytes"`
	RSSConnectedBytes int64      `json:"rss_connected_bytes"`
	RSSPerConn        float64    `json:"rss_per_connection_bytes"`
	LoadAvg           [2]float64 `json:"loadavg"`
}

// Round is one publishing round on the same connections.
type Round struct {
	Delivered        int64   `json:"delivered"`
	ServerCPUSeconds float64 `json:"server_cpu_seconds"`
	DeliveriesPerCPU float64 `json:"deliveries_per_cpu_second"`
	P50ms            float64 `json:"p50_ms"`
	P99ms            float64 `json:"p99_ms"`
	Maxms            float64 `json:"max_ms"`
}

// stampPrefix starts every benchmark message's text.
const stampPrefix = "pcmp"

// target is a server under test, set up for one size.
type target interface {
	proc() *benchkit.Proc
	// connect opens subscriber i; onPayload gets every delivery's frame.
	connect(ctx context.Context, i int, onPayload func([]byte)) (subscriber, error)
	// connected runs once every subscriber is connected.
	connected()
	publish(ctx context.Context, text string) error
	close()
}

type subscriber interface {
	close()
	done() <-chan struct{}
	drops() int64
}

// Run measures every server at every size, one server process at a time.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if len(cfg.Subscribers) == 0 || cfg.Rate <= 0 || cfg.Duration <= 0 || cfg.TextBytes < 40 {
		return nil, errors.New("want subscriber counts, a positive rate and duration and at least 40 bytes of text")
	}
	nofile, err := benchkit.RaiseFileLimit()
	if err != nil {
		return nil, fmt.Errorf("raise the open-file limit: %w", err)
	}
	var out []Result
	for _, n := range cfg.Subscribers {
		if n < 1 || uint64(n)+256 > nofile {
			return nil, fmt.Errorf("%d subscribers: want at least 1 and fewer than the %d open files this process may have", n, nofile)
		}
		for _, server := range cfg.Servers {
			res, err := runServer(ctx, cfg, server, n)
			if err != nil {
				return nil, fmt.Errorf("%s, %d subscribers: %w", server, n, err)
			}
			cfg.Log.Info("measured", "server", server, "subscribers", n, "deliveries_per_cpu_s", int(res.DeliveriesPerCPU),
				"p50_ms", res.P50ms, "p99_ms", res.P99ms)
			out = append(out, *res)
		}
	}
	return out, nil
}

// runServer sets up one server for n subscribers and measures it.
func runServer(ctx context.Context, cfg Config, server string, n int) (*Result, error) {
	dir, err := os.MkdirTemp("", "peerbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	eng, err := benchkit.NewRawEngine(cfg.Pollers, cfg.ReadBuffer)
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer hc.CloseIdleConnections()
	var t target
	switch server {
	case "parley":
		t, err = newParleyTarget(ctx, cfg, dir, n, eng, hc)
	case "centrifugo":
		t, err = newCentrifugoTarget(ctx, cfg, dir, eng, hc)
	default:
		err = fmt.Errorf("unknown server %q (want parley or centrifugo)", server)
	}
	if err != nil {
		return nil, err
	}
	defer t.close()
	res, err := measure(ctx, cfg, t, n)
	if err != nil {
		return nil, fmt.Errorf("%w\nserver log (tail):\n%s", err, t.proc().Stderr)
	}
	res.Server = server
	return res, nil
}

// recorder collects every subscriber's receipts.
type recorder struct {
	prefix    []byte
	delivered atomic.Int64
	// lat[i] holds message i's publish → receipt times (ns), one per
	// subscriber, filled up to latN[i].
	lat  [][]int64
	latN []atomic.Int64
}

func newRecorder(messages, subscribers int) *recorder {
	r := &recorder{prefix: []byte(stampPrefix), lat: make([][]int64, messages), latN: make([]atomic.Int64, messages)}
	for i := range r.lat {
		r.lat[i] = make([]int64, subscribers)
	}
	return r
}

// counts is what one subscriber received, per message index.
type counts struct {
	mu  sync.Mutex
	got []uint8
}

// receive records one delivery's frame for c; frames without a stamp are
// not the benchmark's and are ignored.
func (r *recorder) receive(c *counts, frame []byte) {
	now := time.Now().UnixNano()
	idx, sent, ok := benchkit.ParseStamp(r.prefix, frame)
	if !ok || idx < 0 {
		return
	}
	c.mu.Lock()
	if idx >= len(c.got) {
		c.got = append(c.got, make([]uint8, idx+1-len(c.got))...)
	}
	c.got[idx]++
	c.mu.Unlock()
	if idx < len(r.lat) {
		if i := r.latN[idx].Add(1) - 1; i < int64(len(r.lat[idx])) {
			r.lat[idx][i] = now - sent
		}
	}
	r.delivered.Add(1)
}

// tally counts lost and duplicated deliveries of messages 0..messages-1.
func tally(all []*counts, messages int) (lost, dups int64) {
	for _, c := range all {
		c.mu.Lock()
		for i := range messages {
			n := 0
			if i < len(c.got) {
				n = int(c.got[i])
			}
			switch {
			case n == 0:
				lost++
			case n > 1:
				dups += int64(n - 1)
			}
		}
		c.mu.Unlock()
	}
	return lost, dups
}

// measure connects n subscribers to t, publishes, and measures.
func measure(ctx context.Context, cfg Config, t target, n int) (*Result, error) {
	p := t.proc()
	res := &Result{Subscribers: n}
	var err error
	if res.RSSBaseBytes, err = p.RSS(); err != nil {
		return nil, err
	}
	messages := max(1, int(cfg.Duration.Seconds()*cfg.Rate))
	res.Rounds = max(cfg.Rounds, 1)
	rec := newRecorder(messages*res.Rounds, n)
	subs := make([]subscriber, n)
	got := make([]*counts, n)
	for i := range got {
		got[i] = &counts{}
	}
	start := time.Now()
	if err := connectAll(ctx, cfg, t, rec, subs, got); err != nil {
		closeAll(subs)
		return nil, err
	}
	defer closeAll(subs)
	t.connected()
	res.ConnectSeconds = time.Since(start).Seconds()
	cfg.Log.Info("connected", "subscribers", n, "took", time.Since(start).Round(time.Millisecond))
	if err := benchkit.SleepCtx(ctx, cfg.Settle); err != nil {
		return nil, err
	}
	if res.RSSConnectedBytes, err = p.RSS(); err != nil {
		return nil, err
	}
	res.RSSPerConn = float64(res.RSSConnectedBytes-res.RSSBaseBytes) / float64(n)

	res.LoadAvg[0] = benchkit.LoadAvg()
	var pubLat []int64
	for r := range res.Rounds {
		rr, lat, err := round(ctx, cfg, t, rec, r*messages, messages, n)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", r+1, err)
		}
		res.PerRound = append(res.PerRound, rr)
		pubLat = append(pubLat, lat...)
	}
	res.LoadAvg[1] = benchkit.LoadAvg()

	closeAll(subs) // every handler has returned once this is done
	res.Messages = len(pubLat)
	res.Expected = int64(res.Messages) * int64(n)
	res.Lost, res.Duplicates = tally(got, res.Messages)
	for _, s := range subs {
		res.Drops += s.drops()
	}
	res.Delivered = rec.delivered.Load()
	res.PublishP50ms = benchkit.Percentile(pubLat, 50)
	var perCPU, p50, p99 []float64
	for _, rr := range res.PerRound {
		res.ServerCPUSeconds += rr.ServerCPUSeconds
		perCPU, p50, p99 = append(perCPU, rr.DeliveriesPerCPU), append(p50, rr.P50ms), append(p99, rr.P99ms)
		res.Maxms = max(res.Maxms, rr.Maxms)
	}
	res.DeliveriesPerCPU, res.P50ms, res.P99ms = median(perCPU), median(p50), median(p99)
	return res, nil
}

// round publishes messages first.. first+messages-1 and waits for their
// deliveries; it measures the server's CPU time over the round (drain
// included) and the round's latencies.
func round(ctx context.Context, cfg Config, t target, rec *recorder, first, messages, n int) (Round, []int64, error) {
	var rr Round
	cpu0, err := t.proc().CPUTime()
	if err != nil {
		return rr, nil, err
	}
	before := rec.delivered.Load()
	pubLat, err := publishAll(ctx, cfg, t, first, messages)
	if err != nil {
		return rr, nil, err
	}
	want := before + int64(len(pubLat))*int64(n)
	deadline := time.Now().Add(cfg.Drain)
	for rec.delivered.Load() < want && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	cpu1, err := t.proc().CPUTime()
	if err != nil {
		return rr, nil, err
	}
	rr.Delivered = rec.delivered.Load() - before
	rr.ServerCPUSeconds = (cpu1 - cpu0).Seconds()
	if rr.ServerCPUSeconds > 0 {
		rr.DeliveriesPerCPU = float64(rr.Delivered) / rr.ServerCPUSeconds
	}
	var lat []int64
	for i := first; i < first+messages; i++ {
		l := rec.lat[i]
		lat = append(lat, l[:min(rec.latN[i].Load(), int64(len(l)))]...)
	}
	rr.P50ms, rr.P99ms, rr.Maxms = benchkit.Percentile(lat, 50), benchkit.Percentile(lat, 99), benchkit.Percentile(lat, 100)
	return rr, pubLat, nil
}

// median is the middle value (the mean of the two middle ones for an even
// count); 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// connectAll opens every subscriber, ConnectWorkers at a time.
func connectAll(ctx context.Context, cfg Config, t target, rec *recorder, out []subscriber, got []*counts) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(cfg.ConnectWorkers, 1))
	for i := range out {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			c := got[i]
			actx, acancel := context.WithTimeout(gctx, 2*time.Minute)
			s, err := t.connect(actx, i, func(frame []byte) { rec.receive(c, frame) })
			acancel()
			if err != nil {
				return fmt.Errorf("connect subscriber %d: %w", i, err)
			}
			out[i] = s
			return nil
		})
	}
	return g.Wait()
}

// closeAll closes the subscribers and waits (a while) for their sockets.
func closeAll(subs []subscriber) {
	for _, s := range subs {
		if s != nil {
			s.close()
		}
	}
	deadline := time.After(10 * time.Second)
	for _, s := range subs {
		if s != nil {
			select {
			case <-s.done():
			case <-deadline:
				return
			}
		}
	}
}

// publishAll publishes messages at cfg.Rate, one after another, and
// returns each publish call's latency (ns).
func publishAll(ctx context.Context, cfg Config, t target, first, messages int) ([]int64, error) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / cfg.Rate))
	defer tick.Stop()
	lat := make([]int64, 0, messages)
	for i := first; i < first+messages; i++ {
		if i > first {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		t0 := time.Now()
		if err := t.publish(ctx, benchkit.Stamp(stampPrefix, i, cfg.TextBytes)); err != nil {
			return nil, fmt.Errorf("publish %d: %w", i, err)
		}
		lat = append(lat, int64(time.Since(t0)))
	}
	return lat, nil
}

// parleyTarget is `parley serve` (SQLite, embedded NATS) with a seeded
// workspace whose users are all in #general.
type parleyTarget struct {
	srv     *benchkit.Parley
	seed    *benchkit.SeedFile
	eng     *benchkit.RawEngine
	wsURL   string
	poster  *pclient.Client
	channel string
}

func newParleyTarget(ctx context.Context, cfg Config, dir string, n int, eng *benchkit.RawEngine, hc *http.Client) (*parleyTarget, error) {
	seed, err := benchkit.Seed(ctx, cfg.Parley, dir, "", n)
	if err != nil {
		return nil, err
	}
	srv, err := benchkit.StartParley(ctx, cfg.Parley, dir, "")
	if err != nil {
		return nil, err
	}
	return &parleyTarget{
		srv: srv, seed: seed, eng: eng,
		wsURL:   "ws://" + strings.TrimPrefix(srv.URL, "http://") + "/api/v1/gateway",
		poster:  pclient.New(srv.URL, pclient.WithToken(seed.Owner.Token), pclient.WithHTTPClient(hc), pclient.WithLogger(cfg.Log)),
		channel: seed.Channels[0].ID, // #general: everyone is in it
	}, nil
}

func (p *parleyTarget) proc() *benchkit.Proc { return p.srv.Proc }

func (p *parleyTarget) connect(ctx context.Context, i int, onPayload func([]byte)) (subscriber, error) {
	u := p.seed.Users[i]
	c, err := p.eng.DialParley(ctx, p.wsURL, u.Token, p.seed.WorkspaceID, func(tail []byte) {
		if bytes.HasPrefix(tail, messageCreated) { // not the unread summaries and the like
			onPayload(tail)
		}
	})
	if err != nil {
		return nil, err
	}
	return parleySub{c}, nil
}

func (p *parleyTarget) connected() { go p.eng.Heartbeats(p.eng.HeartbeatInterval() * 9 / 10) }

func (p *parleyTarget) publish(ctx context.Context, text string) error {
	_, err := p.poster.PostMessage(ctx, p.channel, parley.NewMessage{Text: text})
	return err
}

func (p *parleyTarget) close() { p.srv.Stop() }

var messageCreated = []byte(`,"t":"` + parley.EventMessageCreated + `"`)

type parleySub struct{ c *benchkit.ParleyConn }

func (s parleySub) close()                { s.c.Close() }
func (s parleySub) done() <-chan struct{} { return s.c.Closed() }
func (s parleySub) drops() int64          { return s.c.Drops() }

// centrifugoTarget is Centrifugo with the benchmark's configuration.
type centrifugoTarget struct {
	srv   *centrifugo
	eng   *benchkit.RawEngine
	wsURL string
}

func newCentrifugoTarget(ctx context.Context, cfg Config, dir string, eng *benchkit.RawEngine, hc *http.Client) (*centrifugoTarget, error) {
	if cfg.Centrifugo == "" {
		return nil, errors.New("no centrifugo binary")
	}
	srv, err := startCentrifugo(ctx, cfg.Centrifugo, dir, hc)
	if err != nil {
		return nil, err
	}
	return &centrifugoTarget{srv: srv, eng: eng,
		wsURL: "ws://" + strings.TrimPrefix(srv.url, "http://") + "/connection/websocket"}, nil
}

func (c *centrifugoTarget) proc() *benchkit.Proc { return c.srv.Proc }

func (c *centrifugoTarget) connect(ctx context.Context, _ int, onPayload func([]byte)) (subscriber, error) {
	conn, err := dialCentrifugo(ctx, c.eng, c.wsURL, onPayload)
	if err != nil {
		return nil, err
	}
	return conn, nil
}

func (c *centrifugoTarget) connected() {} // the server pings; the client answers (dialCentrifugo)

func (c *centrifugoTarget) publish(ctx context.Context, text string) error {
	return c.srv.publish(ctx, text)
}

func (c *centrifugoTarget) close() { c.srv.Stop() }

func (c *cfConn) done() <-chan struct{} { return c.closed }
func (c *cfConn) drops() int64          { return c.dropped.Load() }
