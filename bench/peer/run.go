package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"parley/bench/internal/benchkit"
)

// Config is one comparison run.
type Config struct {
	Parley         string        // path of the parley binary
	Centrifugo     string        // path of the centrifugo binary ("" when Servers lacks it)
	Servers        []string      // "parley", "centrifugo", "null", in the order they run
	Subscribers    []int         // sizes: subscribers of the one channel
	Rate           float64       // messages per second asked of every server
	Duration       time.Duration // of one round
	Rounds         int           // publishing rounds on the same connections; medians are reported
	TextBytes      int           // message size
	ConnectWorkers int
	Pollers        int // the load generator's poller goroutines (the subscriber sockets are spread over them)
	ReadBuffer     int
	MaxInFlight    int           // publish calls running at once; a due message waits (late) beyond it
	Late           time.Duration // a publish that starts this far past its due time is late
	Settle         time.Duration // idle time after connecting, before RSS is read
	Drain          time.Duration // longest wait for the last deliveries
	// Ramp, when set, replaces Rate and Rounds: one round of Duration per
	// rate, ascending, until a round fails the capacity criteria.
	Ramp     []float64
	P99Limit time.Duration // capacity criterion (0: 500 ms)
	// ParleyLive is a live configuration patch (JSON) set on Parley's
	// server before its subscribers connect, e.g. a hot-channel threshold
	// below the round's rate ("" leaves the defaults).
	ParleyLive string
	Log        *slog.Logger
	// nullExe is the executable run as the null server (default: this
	// one, with nullServerEnv set).
	nullExe string
}

// Result is one server at one size.
type Result struct {
	Server      string `json:"server"`
	Subscribers int    `json:"subscribers"`
	Rounds      int    `json:"rounds"`
	Messages    int    `json:"messages"` // over all rounds

	Expected   int64 `json:"expected_deliveries"`
	Delivered  int64 `json:"delivered"` // distinct (message, subscriber) receipts
	Lost       int64 `json:"lost"`
	Duplicates int64 `json:"duplicates"`
	Drops      int64 `json:"drops"` // connections the server closed

	ConnectSeconds   float64 `json:"connect_seconds"`
	PublishP50ms     float64 `json:"publish_p50_ms"` // a publish call, from its start
	ServerCPUSeconds float64 `json:"server_cpu_seconds"`
	// The medians over the rounds, and the largest latency of all.
	DeliveriesPerCPU float64 `json:"deliveries_per_cpu_second"`
	P50ms            float64 `json:"p50_ms"`
	P99ms            float64 `json:"p99_ms"`
	Maxms            float64 `json:"max_ms"`
	Achieved         float64 `json:"achieved_rate"` // median over the rounds
	Late             int64   `json:"late_starts"`   // all rounds
	ServerCores      float64 `json:"server_cores"`  // publish window, median
	ServerDrainCores float64 `json:"server_drain_cores"`
	GenCores         float64 `json:"generator_cores"`
	GenDrainCores    float64 `json:"generator_drain_cores"`
	Comparable       bool    `json:"comparable"` // every round reached 95 % of the asked rate
	// Capacity is the highest ramp rate passed (0: none, or not a ramp).
	Capacity float64 `json:"capacity_rate,omitempty"`
	PerRound []Round `json:"rounds_detail"`

	RSSBaseBytes      int64      `json:"rss_base_bytes"`
	RSSConnectedBytes int64      `json:"rss_connected_bytes"`
	RSSPerConn        float64    `json:"rss_per_connection_bytes"`
	LoadAvg           [2]float64 `json:"loadavg"`
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
	publish(ctx context.Context, m publication) error
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
	if len(cfg.Subscribers) == 0 || (cfg.Rate <= 0 && len(cfg.Ramp) == 0) || cfg.Duration <= 0 || cfg.TextBytes < 40 {
		return nil, errors.New("want subscriber counts, a positive rate (or a ramp) and duration and at least 40 bytes of text")
	}
	if slices.ContainsFunc(cfg.Ramp, func(r float64) bool { return r <= 0 }) || !slices.IsSorted(cfg.Ramp) {
		return nil, fmt.Errorf("ramp %v: want positive rates in ascending order", cfg.Ramp)
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
				"p50_ms", res.P50ms, "p99_ms", res.P99ms, "capacity", res.Capacity)
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
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: max(cfg.MaxInFlight, 4), MaxConnsPerHost: max(cfg.MaxInFlight, 4)}}
	defer hc.CloseIdleConnections()
	var t target
	switch server {
	case "parley":
		t, err = newParleyTarget(ctx, cfg, dir, n, eng, hc)
	case "centrifugo":
		t, err = newCentrifugoTarget(ctx, cfg, dir, eng, hc)
	case "null":
		t, err = newNullTarget(ctx, cfg, eng, hc)
	default:
		err = fmt.Errorf("unknown server %q (want parley, centrifugo or null)", server)
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

// plan is the rate of each round.
func plan(cfg Config) []float64 {
	if len(cfg.Ramp) > 0 {
		return cfg.Ramp
	}
	rates := make([]float64, max(cfg.Rounds, 1))
	for i := range rates {
		rates[i] = cfg.Rate
	}
	return rates
}

// roundMessages is how many messages a round at rate publishes.
func roundMessages(cfg Config, rate float64) int { return max(1, int(cfg.Duration.Seconds()*rate)) }

// measure connects n subscribers to t, publishes, and measures.
func measure(ctx context.Context, cfg Config, t target, n int) (*Result, error) {
	p := t.proc()
	res := &Result{Subscribers: n}
	var err error
	if res.RSSBaseBytes, err = p.RSS(); err != nil {
		return nil, err
	}
	rates := plan(cfg)
	var sizes []int
	for _, r := range rates {
		sizes = append(sizes, roundMessages(cfg, r))
	}
	rec := newRecorder(sizes)
	subs := make([]subscriber, n)
	got := make([]*counts, n)
	for i := range got {
		got[i] = rec.newCounts()
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
	first := 0
	for r, rate := range rates {
		rr, lat, err := round(ctx, cfg, t, rec, r, first, rate, n)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", r+1, err)
		}
		first += sizes[r]
		res.PerRound = append(res.PerRound, rr)
		pubLat = append(pubLat, lat...)
		cfg.Log.Info("round", "rate", rate, "achieved", rr.Achieved, "p99_ms", rr.P99ms, "lost", rr.Lost, "pass", rr.Pass)
		if len(cfg.Ramp) > 0 {
			if !rr.Pass {
				break // the ramp ends at the first failure
			}
			res.Capacity = rate
		}
	}
	res.LoadAvg[1] = benchkit.LoadAvg()

	closeAll(subs) // every handler has returned once this is done
	for _, s := range subs {
		res.Drops += s.drops()
	}
	res.Rounds = len(res.PerRound)
	res.PublishP50ms = benchkit.Percentile(pubLat, 50)
	var perCPU, p50, p99, ach, sc, sdc, gc, gdc []float64
	res.Comparable = true
	for _, rr := range res.PerRound {
		res.Messages += rr.Messages
		res.Expected += rr.Expected
		res.Delivered += rr.Delivered
		res.Lost += rr.Lost
		res.Duplicates += rr.Duplicates
		res.Late += rr.Late
		res.ServerCPUSeconds += rr.ServerCPUSeconds
		res.Maxms = max(res.Maxms, rr.Maxms)
		res.Comparable = res.Comparable && rr.Comparable
		perCPU, p50, p99 = append(perCPU, rr.DeliveriesPerCPU), append(p50, rr.P50ms), append(p99, rr.P99ms)
		ach, sc, sdc = append(ach, rr.Achieved), append(sc, rr.ServerCores), append(sdc, rr.ServerDrainCores)
		gc, gdc = append(gc, rr.GenCores), append(gdc, rr.GenDrainCores)
	}
	res.DeliveriesPerCPU, res.P50ms, res.P99ms = median(perCPU), median(p50), median(p99)
	res.Achieved, res.ServerCores, res.ServerDrainCores = median(ach), median(sc), median(sdc)
	res.GenCores, res.GenDrainCores = median(gc), median(gdc)
	return res, nil
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
