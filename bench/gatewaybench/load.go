package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"parley"
	"parley/bench/internal/benchkit"
	pclient "parley/client"
	"parley/internal/openloop"
)

// Config is one benchmark run.
type Config struct {
	Parley         string        // path of the parley binary
	Reader         string        // "client" (package client) or "raw"
	Deflate        bool          // raw reader: sessions negotiate permessage-deflate
	Pollers        int           // raw reader: poller goroutines (default 1)
	ReadBuffer     int           // raw reader: bytes read from a socket at once
	Sessions       int           // identified sessions, all in #general
	Rate           float64       // steady mode: messages per second
	Duration       time.Duration // posting time
	Burst          int           // >0: burst mode, this many messages per burst
	BurstEvery     time.Duration // burst mode: period of the bursts
	BurstPosters   int           // burst mode: goroutines posting each burst (default 1: back to back)
	TextBytes      int           // message size
	ConnectWorkers int
	Settle         time.Duration // idle time before the RSS reading
	Drain          time.Duration // longest wait for the last deliveries
	CPUProfile     string        // server CPU profile of the posting phase
	HeapProfile    string        // server heap profile with the sessions idle
	LoadProfile    string        // the load generator's own CPU profile of the posting phase
	DataDir        string        // "" for a temporary directory
	DB             string        // PostgreSQL URL of an empty database; "" for SQLite in DataDir
	Live           string        // a live configuration patch (JSON) set before the sessions connect
	Log            *slog.Logger
}

// Result is what a run measured.
type Result struct {
	Mode     string `json:"mode"`
	Reader   string `json:"reader"`
	Store    string `json:"store"`
	Sessions int    `json:"sessions"`
	Burst    string `json:"burst,omitempty"`
	Messages int    `json:"messages"`

	Expected   int64 `json:"expected_deliveries"`
	Delivered  int64 `json:"delivered"`
	Lost       int64 `json:"lost"`
	Duplicates int64 `json:"duplicates"`
	SGaps      int64 `json:"s_gaps"`
	Reconnects int64 `json:"reconnects"`

	ConnectSeconds   float64 `json:"connect_seconds"`
	PostSeconds      float64 `json:"post_seconds"`
	ServerCPUSeconds float64 `json:"server_cpu_seconds"` // posting phase, drain included
	// The server's write system calls and bytes written (/proc/<pid>/io
	// syscw and wchar: sockets, and the store's files) over the same
	// window, and each per delivery.
	Deflate            bool    `json:"deflate"`
	Live               string  `json:"live,omitempty"`
	WriteCalls         int64   `json:"write_calls"`
	WriteBytes         int64   `json:"write_bytes"`
	WritesPerDelivery  float64 `json:"writes_per_delivery"`
	BytesPerDelivery   float64 `json:"bytes_per_delivery"`
	CPUPer1kDeliveries float64 `json:"cpu_seconds_per_1000_deliveries"`
	IdleCPUPerSecond   float64 `json:"idle_cpu_per_second"`
	DeliveriesPerCPU   float64 `json:"deliveries_per_cpu_second"`
	P50ms              float64 `json:"p50_ms"`
	P99ms              float64 `json:"p99_ms"`
	Maxms              float64 `json:"max_ms"`
	// The latency in two parts: send → commit (the message's created_at),
	// per message, and commit → receipt, per delivery.
	StoredP50ms float64 `json:"send_to_commit_p50_ms"`
	StoredP99ms float64 `json:"send_to_commit_p99_ms"`
	FanoutP50ms float64 `json:"commit_to_receipt_p50_ms"`
	FanoutP99ms float64 `json:"commit_to_receipt_p99_ms"`

	RSSBaseBytes       int64   `json:"rss_base_bytes"`
	RSSSessionsBytes   int64   `json:"rss_sessions_bytes"`
	RSSPerSession      float64 `json:"rss_per_session_bytes"`
	HeapPerSession     float64 `json:"heap_per_session_bytes"`
	GoroutinesPerSess  float64 `json:"goroutines_per_session"`
	ServerGoroutinesS  float64 `json:"server_goroutines"`
	PostLatencyP50ms   float64 `json:"post_p50_ms"`
	ServerCPUProfile   string  `json:"cpu_profile,omitempty"`
	ClientProcessRSSMB float64 `json:"loadgen_rss_mb"`
	// LoadAvg is the machine's 1-minute load average before and after the
	// posting phase (other work on the cores skews latency).
	LoadAvg [2]float64 `json:"loadavg"`
	// PerMessageP99ms is each message's own p99 over the sessions.
	PerMessageP99ms []float64 `json:"per_message_p99_ms"`
	// Memory is the server's Go memory per session (with − without
	// sessions, over S), by runtime class.
	Memory map[string]float64 `json:"memory_per_session_bytes"`
}

// memMetrics are the server's gauges read before and after connecting.
var memMetrics = []string{"go_goroutines", "go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes",
	"go_memstats_heap_released_bytes", "go_memstats_stack_inuse_bytes", "go_memstats_sys_bytes",
	"go_memstats_mspan_inuse_bytes", "go_memstats_other_sys_bytes"}

// memBreakdown is the per-session growth of each memory gauge.
func memBreakdown(base, with map[string]float64, sessions int) map[string]float64 {
	out := map[string]float64{}
	for _, m := range memMetrics[1:] {
		out[strings.TrimPrefix(m, "go_memstats_")] = (with[m] - base[m]) / float64(sessions)
	}
	// Idle heap not yet returned to the OS still counts in RSS.
	out["heap_retained_bytes"] = out["heap_idle_bytes"] - out["heap_released_bytes"]
	return out
}

// Print writes the result for people.
func (r *Result) Print(w io.Writer) {
	fmt.Fprintf(w, "mode %s, %s reader, %s: %d sessions in one channel, %d messages posted in %.1f s (post p50 %.1f ms)\n",
		r.Mode, r.Reader, r.Store, r.Sessions, r.Messages, r.PostSeconds, r.PostLatencyP50ms)
	fmt.Fprintf(w, "  deliveries: %d of %d; lost %d, duplicates %d, s gaps %d, reconnects/drops %d\n",
		r.Delivered, r.Expected, r.Lost, r.Duplicates, r.SGaps, r.Reconnects)
	fmt.Fprintf(w, "  server CPU: %.2f s over the posting phase (idle: %.3f CPU-s/s) → %.0f deliveries per server CPU-second\n",
		r.ServerCPUSeconds, r.IdleCPUPerSecond, r.DeliveriesPerCPU)
	fmt.Fprintf(w, "  server writes: %d calls, %d bytes → %.3f write calls and %.0f bytes per delivery; %.3f server CPU-s per 1,000 deliveries (clients offer deflate: %v)\n",
		r.WriteCalls, r.WriteBytes, r.WritesPerDelivery, r.BytesPerDelivery, r.CPUPer1kDeliveries, r.Deflate)
	if r.Live != "" {
		fmt.Fprintf(w, "  live configuration: %s\n", r.Live)
	}
	fmt.Fprintf(w, "  post → receipt: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", r.P50ms, r.P99ms, r.Maxms)
	fmt.Fprintf(w, "    of which send → commit (created_at) p50 %.1f ms, p99 %.1f ms; commit → receipt p50 %.1f ms, p99 %.1f ms\n",
		r.StoredP50ms, r.StoredP99ms, r.FanoutP50ms, r.FanoutP99ms)
	if n := len(r.PerMessageP99ms); n > 0 {
		per := slices.Clone(r.PerMessageP99ms)
		slices.Sort(per)
		fmt.Fprintf(w, "  per-message p99: best %.1f ms, median %.1f ms, worst %.1f ms\n", per[0], per[n/2], per[n-1])
	}
	fmt.Fprintf(w, "  server RSS: %.1f MB before the sessions, %.1f MB with them idle → %.0f bytes per idle session (heap %.0f B, %.2f goroutines per session)\n",
		float64(r.RSSBaseBytes)/(1<<20), float64(r.RSSSessionsBytes)/(1<<20), r.RSSPerSession, r.HeapPerSession, r.GoroutinesPerSess)
	fmt.Fprintf(w, "  connecting took %.1f s; load generator RSS %.0f MB; machine load average %.2f → %.2f\n",
		r.ConnectSeconds, r.ClientProcessRSSMB, r.LoadAvg[0], r.LoadAvg[1])
	if len(r.Memory) > 0 {
		fmt.Fprintf(w, "  server Go memory per session: heap in use %.0f B, heap retained %.0f B, stacks %.0f B, runtime sys %.0f B; RSS outside the Go runtime %.0f B\n",
			r.Memory["heap_inuse_bytes"], r.Memory["heap_retained_bytes"], r.Memory["stack_inuse_bytes"], r.Memory["sys_bytes"],
			r.RSSPerSession-r.Memory["sys_bytes"])
	}
	if r.Burst != "" {
		fmt.Fprintf(w, "  bursts: %s\n", r.Burst)
	}
	if r.ServerCPUProfile != "" {
		fmt.Fprintf(w, "  server CPU profile: %s\n", r.ServerCPUProfile)
	}
}

// marker is the prefix of every benchmark message's stamp (benchkit.Stamp).
var marker = []byte("gwb")

// session is one identified connection and what it received.
type session struct {
	conn *pclient.Conn        // package client's reader
	raw  *benchkit.ParleyConn // or the raw reader
	mu   sync.Mutex
	got  []uint8 // deliveries per message index
}

func (s *session) close() {
	if s.conn != nil {
		s.conn.Close()
	}
	if s.raw != nil {
		s.raw.Close()
	}
}

func (s *session) done() <-chan struct{} {
	if s.conn != nil {
		return s.conn.Done()
	}
	return s.raw.Closed()
}

// counters returns the session's s gaps and its reconnects (package
// client) or drops (raw reader).
func (s *session) counters() (sGaps, reconnects int64) {
	if s.conn != nil {
		st := s.conn.Stats()
		return st.SGaps, st.Reconnects
	}
	return s.raw.SGaps(), s.raw.Drops()
}

// recorder collects the receipts of every session.
type recorder struct {
	delivered atomic.Int64
	foreign   atomic.Int64 // message.created without the marker
	// lat[i] holds message i's post → receipt times (ns), one per
	// session, filled up to latN[i].
	lat  [][]int64
	latN []atomic.Int64
	// stored[i] is message i's server commit time (its created_at) minus
	// its send time, ns: the part of the latency before the fan-out; 0
	// until the first receipt.
	stored []atomic.Int64
}

// receive records one message.created payload received by s.
func (r *recorder) receive(s *session, data []byte) {
	now := time.Now().UnixNano()
	idx, sent, ok := benchkit.ParseStamp(marker, data)
	if !ok {
		r.foreign.Add(1)
		return
	}
	s.mu.Lock()
	if idx >= len(s.got) {
		s.got = append(s.got, make([]uint8, idx+1-len(s.got))...)
	}
	s.got[idx]++
	s.mu.Unlock()
	if idx < len(r.lat) {
		if i := r.latN[idx].Add(1) - 1; i < int64(len(r.lat[idx])) {
			r.lat[idx][i] = now - sent
		}
		if r.stored[idx].Load() == 0 {
			if created, ok := parseCreatedAt(data); ok {
				r.stored[idx].Store(max(created-sent, 1))
			}
		}
	}
	r.delivered.Add(1)
}

// handler is package client's event handler for s.
func (r *recorder) handler(s *session) func(pclient.Event) {
	return func(ev pclient.Event) {
		if ev.Type == parley.EventMessageCreated {
			r.receive(s, ev.Data)
		}
	}
}

var messageCreated = []byte(`,"t":"` + parley.EventMessageCreated + `"`)

// rawHandler is the raw reader's handler for s: tail is an event frame
// after its s.
func (r *recorder) rawHandler(s *session) func(tail []byte) {
	return func(tail []byte) {
		if bytes.HasPrefix(tail, messageCreated) {
			r.receive(s, tail)
		}
	}
}

var createdAtKey = []byte(`"created_at":"`)

// parseCreatedAt reads the message's created_at (unix ns) from a
// message.created payload.
func parseCreatedAt(d []byte) (int64, bool) {
	i := bytes.Index(d, createdAtKey)
	if i < 0 {
		return 0, false
	}
	rest := d[i+len(createdAtKey):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return 0, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(rest[:j]))
	if err != nil {
		return 0, false
	}
	return t.UnixNano(), true
}

// Run seeds, starts the server, connects the sessions, posts and measures.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Sessions < 1 || cfg.TextBytes < 40 || cfg.Duration <= 0 {
		return nil, errors.New("want at least one session, 40 bytes of text and a positive duration")
	}
	if cfg.Burst == 0 && cfg.Rate <= 0 {
		return nil, errors.New("steady mode needs a positive rate")
	}
	if cfg.Burst > 0 && cfg.BurstEvery <= 0 {
		return nil, errors.New("burst mode needs a positive burst period")
	}
	cfg.ConnectWorkers = max(cfg.ConnectWorkers, 1)
	if cfg.Reader == "" {
		cfg.Reader = "raw"
	}
	if cfg.ReadBuffer <= 0 {
		cfg.ReadBuffer = 8 << 10
	}
	if cfg.Reader != "raw" && cfg.Reader != "client" {
		return nil, fmt.Errorf("reader %q: want raw or client", cfg.Reader)
	}
	nofile, err := benchkit.RaiseFileLimit()
	if err != nil {
		return nil, fmt.Errorf("raise the open-file limit: %w", err)
	}
	if uint64(cfg.Sessions)+256 > nofile {
		return nil, fmt.Errorf("%d sessions need more than the %d open files this process may have", cfg.Sessions, nofile)
	}
	dir := cfg.DataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "gatewaybench-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
	}

	start := time.Now()
	seed, err := benchkit.Seed(ctx, cfg.Parley, dir, cfg.DB, cfg.Sessions)
	if err != nil {
		return nil, err
	}
	cfg.Log.Info("seeded", "users", len(seed.Users), "took", time.Since(start).Round(time.Millisecond))
	srv, err := benchkit.StartParley(ctx, cfg.Parley, dir, cfg.DB)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	fail := func(err error) (*Result, error) {
		return nil, fmt.Errorf("%w\nserver log (tail):\n%s", err, srv.Stderr)
	}

	res := &Result{Mode: "steady", Reader: cfg.Reader, Store: "sqlite", Sessions: cfg.Sessions, Live: cfg.Live}
	if cfg.Live != "" {
		if err := srv.SetLive(ctx, cfg.Live); err != nil {
			return fail(err)
		}
	}
	if cfg.DB != "" {
		res.Store = "postgres"
	}
	if cfg.Burst > 0 {
		res.Mode = "burst"
		res.Burst = fmt.Sprintf("%d messages every %s by %d posters", cfg.Burst, cfg.BurstEvery, max(cfg.BurstPosters, 1))
	}
	if err := srv.GC(ctx); err != nil {
		return fail(err)
	}
	base, err := srv.Metrics(ctx, memMetrics...)
	if err != nil {
		return fail(err)
	}
	if res.RSSBaseBytes, err = srv.RSS(); err != nil {
		return fail(err)
	}

	// Connect every session, a few at a time.
	planned := plannedMessages(cfg)
	rec := &recorder{lat: make([][]int64, planned), latN: make([]atomic.Int64, planned), stored: make([]atomic.Int64, planned)}
	for i := range rec.lat {
		rec.lat[i] = make([]int64, cfg.Sessions)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	sessions := make([]*session, cfg.Sessions)
	var raw *benchkit.RawEngine
	if cfg.Reader == "raw" {
		if raw, err = benchkit.NewRawEngine(cfg.Pollers, cfg.ReadBuffer); err != nil {
			return fail(err)
		}
		raw.Deflate = cfg.Deflate
		res.Deflate = cfg.Deflate
		defer raw.Close()
	}
	connectStart := time.Now()
	if err := connectAll(ctx, cfg, seed, srv.URL, hc, raw, rec, sessions); err != nil {
		closeAll(sessions)
		return fail(err)
	}
	defer closeAll(sessions)
	res.ConnectSeconds = time.Since(connectStart).Seconds()
	if raw != nil {
		go raw.Heartbeats(raw.HeartbeatInterval() * 9 / 10)
	}
	cfg.Log.Info("connected", "sessions", cfg.Sessions, "took", time.Since(connectStart).Round(time.Millisecond))

	// Idle: let the connection burst settle, then read memory and the idle
	// CPU rate.
	if err := benchkit.SleepCtx(ctx, cfg.Settle/2); err != nil {
		return fail(err)
	}
	if err := srv.GC(ctx); err != nil {
		return fail(err)
	}
	idle0, _ := srv.CPUTime()
	idleStart := time.Now()
	if err := benchkit.SleepCtx(ctx, cfg.Settle-cfg.Settle/2); err != nil {
		return fail(err)
	}
	idle1, _ := srv.CPUTime()
	res.IdleCPUPerSecond = (idle1 - idle0).Seconds() / time.Since(idleStart).Seconds()
	if res.RSSSessionsBytes, err = srv.RSS(); err != nil {
		return fail(err)
	}
	with, err := srv.Metrics(ctx, memMetrics...)
	if err != nil {
		return fail(err)
	}
	res.Memory = memBreakdown(base, with, cfg.Sessions)
	if cfg.HeapProfile != "" {
		if err := srv.Profile(ctx, "heap", cfg.HeapProfile); err != nil {
			return fail(err)
		}
	}
	s := float64(cfg.Sessions)
	res.RSSPerSession = float64(res.RSSSessionsBytes-res.RSSBaseBytes) / s
	res.HeapPerSession = (with["go_memstats_heap_inuse_bytes"] - base["go_memstats_heap_inuse_bytes"]) / s
	res.GoroutinesPerSess = (with["go_goroutines"] - base["go_goroutines"]) / s
	res.ServerGoroutinesS = with["go_goroutines"]

	// Post, and wait for the deliveries.
	poster := pclient.New(srv.URL, pclient.WithToken(seed.Owner.Token), pclient.WithHTTPClient(hc),
		pclient.WithLogger(cfg.Log))
	channel := seed.Channels[0].ID // #general: everyone is in it
	profDone := make(chan error, 1)
	if cfg.CPUProfile != "" {
		go func() { profDone <- srv.CPUProfile(ctx, cfg.Duration, cfg.CPUProfile) }()
		res.ServerCPUProfile = cfg.CPUProfile
	}
	if cfg.LoadProfile != "" {
		f, err := os.Create(cfg.LoadProfile)
		if err != nil {
			return fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fail(err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	cpu0, err := srv.CPUTime()
	if err != nil {
		return fail(err)
	}
	io0, err := srv.IO()
	if err != nil {
		return fail(err)
	}
	res.LoadAvg[0] = benchkit.LoadAvg()
	postStart := time.Now()
	postLat, err := post(ctx, cfg, poster, channel)
	if err != nil {
		return fail(err)
	}
	res.PostSeconds = time.Since(postStart).Seconds()
	res.Messages = len(postLat)
	res.PostLatencyP50ms = benchkit.Percentile(postLat, 50)
	res.Expected = int64(res.Messages) * int64(cfg.Sessions)
	deadline := time.Now().Add(cfg.Drain)
	for rec.delivered.Load() < res.Expected && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	cpu1, err := srv.CPUTime()
	if err != nil {
		return fail(err)
	}
	io1, err := srv.IO()
	if err != nil {
		return fail(err)
	}
	res.ServerCPUSeconds = (cpu1 - cpu0).Seconds()
	res.WriteCalls, res.WriteBytes = io1.WriteCalls-io0.WriteCalls, io1.WriteBytes-io0.WriteBytes
	res.LoadAvg[1] = benchkit.LoadAvg()
	if cfg.CPUProfile != "" {
		if err := <-profDone; err != nil {
			return fail(err)
		}
	}

	// Loss and duplicates, per session and message, once every handler
	// has returned.
	closeAll(sessions)
	for _, ss := range sessions {
		ss.mu.Lock()
		for i := range res.Messages {
			n := 0
			if i < len(ss.got) {
				n = int(ss.got[i])
			}
			switch {
			case n == 0:
				res.Lost++
			case n > 1:
				res.Duplicates += int64(n - 1)
			}
		}
		ss.mu.Unlock()
		gaps, reconnects := ss.counters()
		res.SGaps += gaps
		res.Reconnects += reconnects
	}
	res.Delivered = rec.delivered.Load()
	if res.ServerCPUSeconds > 0 {
		res.DeliveriesPerCPU = float64(res.Delivered) / res.ServerCPUSeconds
	}
	if d := float64(res.Delivered); d > 0 {
		res.WritesPerDelivery = float64(res.WriteCalls) / d
		res.BytesPerDelivery = float64(res.WriteBytes) / d
		res.CPUPer1kDeliveries = res.ServerCPUSeconds / d * 1000
	}
	var lat, fan, stored []int64
	res.PerMessageP99ms = make([]float64, len(rec.lat))
	for i, l := range rec.lat {
		l = l[:min(rec.latN[i].Load(), int64(len(l)))]
		lat = append(lat, l...)
		res.PerMessageP99ms[i] = benchkit.Percentile(l, 99)
		st := rec.stored[i].Load()
		stored = append(stored, st)
		for _, v := range l {
			fan = append(fan, v-st)
		}
	}
	res.P50ms, res.P99ms, res.Maxms = benchkit.Percentile(lat, 50), benchkit.Percentile(lat, 99), benchkit.Percentile(lat, 100)
	res.StoredP50ms, res.StoredP99ms = benchkit.Percentile(stored, 50), benchkit.Percentile(stored, 99)
	res.FanoutP50ms, res.FanoutP99ms = benchkit.Percentile(fan, 50), benchkit.Percentile(fan, 99)
	if rss, err := benchkit.RSSBytes(os.Getpid()); err == nil {
		res.ClientProcessRSSMB = float64(rss) / (1 << 20)
	}
	if f := rec.foreign.Load(); f > 0 {
		cfg.Log.Warn("messages without the benchmark's marker", "count", f)
	}
	return res, nil
}

// connectAll identifies every seeded user once, ConnectWorkers at a time.
func connectAll(ctx context.Context, cfg Config, seed *benchkit.SeedFile, url string, hc *http.Client, raw *benchkit.RawEngine, rec *recorder, out []*session) error {
	wsURL := "ws://" + strings.TrimPrefix(url, "http://") + "/api/v1/gateway"
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(cfg.ConnectWorkers, 1))
	for i := range out {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			u := seed.Users[i]
			s := &session{}
			actx, acancel := context.WithTimeout(gctx, 2*time.Minute)
			defer acancel()
			if raw != nil {
				// #general on screen: the channel the benchmark posts to
				// is delivered in full to its viewers.
				rc, err := raw.DialParley(actx, wsURL, u.Token, seed.WorkspaceID, rec.rawHandler(s), seed.Channels[0].ID)
				if err != nil {
					return fmt.Errorf("connect session %d: %w", i, err)
				}
				s.raw = rc
				out[i] = s
				return nil
			}
			c := pclient.New(url, pclient.WithToken(u.Token), pclient.WithHTTPClient(hc), pclient.WithLogger(cfg.Log))
			conn, err := c.Connect(actx, seed.WorkspaceID, pclient.ConnectOptions{
				Handler:      rec.handler(s),
				DeclaredOnly: true, // no gap filling: the benchmark counts what the gateway sends
				MinBackoff:   50 * time.Millisecond,
				MaxBackoff:   2 * time.Second,
			})
			if err != nil {
				return fmt.Errorf("connect session %d: %w", i, err)
			}
			if err := conn.Focus([]string{seed.Channels[0].ID}); err != nil {
				return fmt.Errorf("focus session %d: %w", i, err)
			}
			s.conn = conn
			out[i] = s
			if n := i + 1; n%1000 == 0 {
				cfg.Log.Info("connecting", "done", n)
			}
			return nil
		})
	}
	return g.Wait()
}

// closeAll closes the sessions and waits (a while) for their goroutines.
func closeAll(sessions []*session) {
	for _, s := range sessions {
		if s != nil {
			s.close()
		}
	}
	deadline := time.After(10 * time.Second)
	for _, s := range sessions {
		if s != nil {
			select {
			case <-s.done():
			case <-deadline:
				return
			}
		}
	}
}

// plannedMessages is how many messages post will send.
func plannedMessages(cfg Config) int {
	if cfg.Burst > 0 {
		return bursts(cfg) * cfg.Burst
	}
	return max(1, int(cfg.Duration.Seconds()*cfg.Rate))
}

func bursts(cfg Config) int { return max(1, int(cfg.Duration/cfg.BurstEvery)) }

// post sends the messages on schedule and returns each post's latency (ns).
// Steady mode is open-loop (internal/openloop): message i is due at i/Rate,
// is sent then whatever the earlier posts do, and is stamped with its due
// time, so a delivery's latency includes any wait in the generator. A
// burst is posted by BurstPosters goroutines at once, each posting its
// share back to back (a burst's shape is the point of that mode).
func post(ctx context.Context, cfg Config, c *pclient.Client, channel string) ([]int64, error) {
	if cfg.Burst == 0 {
		return postOpenLoop(ctx, cfg, c, channel)
	}
	var (
		mu  sync.Mutex
		lat []int64
		idx int
	)
	one := func() error {
		mu.Lock()
		i := idx
		idx++
		mu.Unlock()
		t0 := time.Now()
		if _, err := c.PostMessage(ctx, channel, parley.NewMessage{Text: benchkit.Stamp("gwb", i, cfg.TextBytes)}); err != nil {
			return fmt.Errorf("post %d: %w", i, err)
		}
		mu.Lock()
		lat = append(lat, int64(time.Since(t0)))
		mu.Unlock()
		return nil
	}
	period := cfg.BurstEvery
	rounds, per, posters := bursts(cfg), cfg.Burst, max(cfg.BurstPosters, 1)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for r := range rounds {
		if r > 0 {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		var left atomic.Int64
		left.Store(int64(per))
		errs := make(chan error, posters)
		var wg sync.WaitGroup
		for range min(posters, per) {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					if err := one(); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return nil, err
		}
	}
	return lat, nil
}

// postOpenLoop is steady mode's publisher: at most 64 posts in flight.
func postOpenLoop(ctx context.Context, cfg Config, c *pclient.Client, channel string) ([]int64, error) {
	var (
		mu      sync.Mutex
		lat     []int64
		failure error
	)
	openloop.Run(ctx, openloop.Schedule{Rate: cfg.Rate, N: plannedMessages(cfg), MaxInFlight: 64}, func(a openloop.Action) {
		_, err := c.PostMessage(ctx, channel, parley.NewMessage{Text: benchkit.StampAt("gwb", a.I, a.Due, cfg.TextBytes)})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failure = cmp.Or(failure, fmt.Errorf("post %d: %w", a.I, err))
			return
		}
		lat = append(lat, int64(time.Since(a.Start)))
	})
	if err := cmp.Or(ctx.Err(), failure); err != nil {
		return nil, err
	}
	return lat, nil
}
