package loadtest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"parley"
	"parley/client"
)

// The whole-fleet reconnect storm (issue 15 item 4, `parley loadtest
// fleet-storm`): N `parley serve` nodes of this binary on a fresh
// PostgreSQL database with their embedded NATS servers clustered, one
// gateway session per seeded user spread over the nodes (each knowing
// every node), posts flowing all along; then
//
//   - drop: every socket of every node cut at once from the client side
//     (what a network blip between the clients and the fleet does);
//   - rolling restart (optional): each node in turn stopped with SIGTERM
//     (it tells its sessions to go away and answers handovers while it
//     drains), started again, and the next one only once every session
//     is back.
//
// Each phase is measured against a steady window of the same length just
// before it: sessions back (and when), the database's transactions a
// second (pg_stat_database: every query the nodes send, reads included —
// the store's Prometheus metrics count only its writes, also reported),
// and where the resumes were served from (the gateways'
// parley_gateway_resume_sources_total: buffer and handover read no event
// from the store; sync means invalid_session, a fresh identify and a
// /sync catch-up). At the end every session must have every event of its
// channels after the first it saw, once and in order.

// StormConfig is one fleet-storm run.
type StormConfig struct {
	Exec     []string // the parley binary (default: this executable)
	Postgres string   // admin URL of the PostgreSQL server; a database is created on it per run
	KeepDB   bool
	Nodes    int
	Sessions int     // seeded users, one gateway session each
	Channels int     // channels besides #general
	Writers  int     // users who also post
	Rate     float64 // posts a second, all along, half into #general
	// Window is the length of the steady window before each phase and the
	// shortest storm window (default 15 s); a storm window lasts until
	// every session is back if that is longer.
	Window     time.Duration
	Rolling    bool          // a rolling restart after the drop
	NoDrop     bool          // skip the all-at-once drop
	BackWithin time.Duration // the target: sessions back within this (default 60 s)
	Settle     time.Duration // longest wait at the end for sessions to reach the heads (default 60 s)
	Connect    int           // sessions connecting at once (default 50)
	Out        string
	Progress   io.Writer
	Log        *slog.Logger
}

func (c *StormConfig) defaults() error {
	if len(c.Exec) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		c.Exec = []string{exe}
	}
	c.Postgres = cmp.Or(c.Postgres, "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	if c.Nodes <= 0 {
		c.Nodes = 3
	}
	if c.Sessions <= 0 {
		c.Sessions = 300
	}
	if c.Channels <= 0 {
		c.Channels = 10
	}
	if c.Writers <= 0 {
		c.Writers = min(10, c.Sessions)
	}
	if c.Writers > c.Sessions {
		return fmt.Errorf("--writers (%d) must not exceed --sessions (%d)", c.Writers, c.Sessions)
	}
	if c.Rate <= 0 {
		c.Rate = 10
	}
	if c.Window <= 0 {
		c.Window = 15 * time.Second
	}
	if c.BackWithin <= 0 {
		c.BackWithin = time.Minute
	}
	if c.Settle <= 0 {
		c.Settle = time.Minute
	}
	if c.Connect <= 0 {
		c.Connect = 50
	}
	if c.NoDrop && !c.Rolling {
		return errors.New("nothing to do: --no-drop without --rolling-restart")
	}
	c.Out = cmp.Or(c.Out, "out/fleet-storm")
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	}
	return nil
}

// StormPhase is one phase's figures.
type StormPhase struct {
	Name       string  `json:"name"` // drop, rolling-restart
	Seconds    float64 `json:"seconds"`
	Dropped    int     `json:"dropped"`         // sessions whose socket went down
	Back       int     `json:"back"`            // of those, back (resumed or identified)
	BackWithin int     `json:"back_within"`     // back within the target
	P50BackS   float64 `json:"p50_back_s"`      // time from the phase's start (a wave's, in a rolling restart)
	P99BackS   float64 `json:"p99_back_s"`      //
	AllBackS   float64 `json:"all_back_s"`      // the last one
	WindowS    float64 `json:"window_s"`        // the storm window the rates are over
	SteadyTPS  float64 `json:"steady_xact_s"`   // database transactions a second, steady window
	StormTPS   float64 `json:"storm_xact_s"`    // … storm window
	XactRatio  float64 `json:"xact_ratio"`      // storm / steady
	SteadyWPS  float64 `json:"steady_writes_s"` // the store's write operations a second (parley_store_op_seconds_count)
	StormWPS   float64 `json:"storm_writes_s"`
	// Resume sources summed over the nodes (parley_gateway_resume_sources_total).
	Sources map[string]float64 `json:"sources"`
	// WithoutStore is (buffer + handover) / all resumes.
	WithoutStore float64 `json:"without_store"`
	// Session catch-ups (parley_gateway_session_catchups_total), those
	// answered from the node's tail of the stream without a read
	// (parley_gateway_catchup_stream_hits_total) and the store reads the
	// others shared (parley_gateway_catchup_reads_total).
	SessionCatchups float64 `json:"session_catchups"`
	CatchupsTail    float64 `json:"catchups_from_tail"`
	CatchupReads    float64 `json:"catchup_reads"`
	// The clients' view (sums of client.Stats over the phase).
	ClientResumes  int64 `json:"client_resumes"`
	ClientInvalid  int64 `json:"client_invalid_sessions"`
	ClientCatchUps int64 `json:"client_sync_catchups"`
	ClientGapFills int64 `json:"client_gap_fills"`
	// Per wave of a rolling restart: the node restarted and its figures.
	Waves []StormWave `json:"waves,omitempty"`
}

// StormWave is one node's restart in a rolling restart.
type StormWave struct {
	Node     int     `json:"node"`
	Dropped  int     `json:"dropped"`
	AllBackS float64 `json:"all_back_s"`
	DrainS   float64 `json:"drain_s"` // SIGTERM to the process's exit
}

// StormReport is fleet-storm.json.
type StormReport struct {
	Nodes      int          `json:"nodes"`
	Sessions   int          `json:"sessions"`
	Rate       float64      `json:"rate"`
	Posts      int64        `json:"posts"`
	PostErrors int64        `json:"post_errors"`
	Phases     []StormPhase `json:"phases"`
	Lost       int64        `json:"lost"`
	Duplicated int64        `json:"duplicated"`
	OutOfOrder int64        `json:"out_of_order"`
	NotCaught  int          `json:"not_caught_up"` // sessions short of a head after the settle
	Pass       bool         `json:"pass"`          // all back, nothing lost, duplicated or reordered
	Targets    []Target     `json:"targets"`
}

// Target is one of the targets beside its figure.
type Target struct {
	Name     string `json:"name"`
	Want     string `json:"want"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

// stormSession is one user's gateway session.
type stormSession struct {
	conn *client.Conn
	chk  checker
	// waiting: the socket went down during the current phase and the
	// session is not back yet.
	waiting atomic.Bool
}

type stormRun struct {
	cfg   *StormConfig
	db    *chaosDB
	seed  *seedOut
	nodes []*chaosNode
	sess  []*stormSession
	hc    *http.Client

	mu      sync.Mutex
	phaseT0 time.Time       // guarded by mu; zero outside a phase
	backs   []time.Duration // guarded by mu: sessions back in the phase, since phaseT0
	dropped int             // guarded by mu
	heads   map[string]int64

	posts, postErrs atomic.Int64
}

func (r *stormRun) logf(format string, args ...any) {
	fmt.Fprintf(r.cfg.Progress, time.Now().UTC().Format("15:04:05 ")+format+"\n", args...)
}

// RunStorm runs the fleet storm and writes fleet-storm.json to cfg.Out.
func RunStorm(ctx context.Context, cfg StormConfig) (*StormReport, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, err
	}
	r := &stormRun{cfg: &cfg, hc: &http.Client{Timeout: 5 * time.Second}, heads: map[string]int64{}}
	db, err := createChaosDB(ctx, cfg.Postgres)
	if err != nil {
		return nil, err
	}
	r.db = db
	defer func() {
		if cfg.KeepDB {
			r.logf("kept database %s", db.name)
			db.admin.Close()
			return
		}
		if err := db.drop(); err != nil {
			cfg.Log.Warn("fleet-storm: drop database", "err", err)
		}
	}()
	if r.seed, err = seedDatabase(ctx, cfg.Exec, db.direct, cfg.Sessions, cfg.Channels); err != nil {
		return nil, err
	}
	r.logf("database %s seeded: %d users, %d channels", db.name, len(r.seed.Users), len(r.seed.Channels))
	nodes, err := newChaosNodes(cfg.Exec, cfg.Nodes, db.direct, "", cfg.Out)
	if err != nil {
		return nil, err
	}
	r.nodes = nodes
	for _, n := range nodes {
		// Every socket and post comes from this machine.
		n.args = append(n.args, "--log-level", "warn", "--rate-write-ip", "off", "--rate-create-ip", "off")
	}
	stop, err := startNodes(ctx, nodes)
	if err != nil {
		return nil, err
	}
	defer stop()
	t := time.Now()
	if err := r.connect(ctx); err != nil {
		return nil, err
	}
	defer func() {
		for _, s := range r.sess {
			if s.conn != nil {
				s.conn.Close()
			}
		}
	}()
	r.logf("%d sessions connected over %d nodes in %.1f s", len(r.sess), len(nodes), time.Since(t).Seconds())

	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { r.writeLoad(loadCtx) })
	defer func() { stopLoad(); wg.Wait() }()

	rep := &StormReport{Nodes: cfg.Nodes, Sessions: len(r.sess), Rate: cfg.Rate}
	// Warm up: the steady state the first window measures.
	if !sleepCtx(ctx, cfg.Window) {
		return nil, ctx.Err()
	}
	if !cfg.NoDrop {
		ph, err := r.dropPhase(ctx)
		if err != nil {
			return nil, err
		}
		rep.Phases = append(rep.Phases, *ph)
	}
	if cfg.Rolling {
		ph, err := r.rollingPhase(ctx)
		if err != nil {
			return nil, err
		}
		rep.Phases = append(rep.Phases, *ph)
	}
	stopLoad()
	wg.Wait()
	rep.Posts, rep.PostErrors = r.posts.Load(), r.postErrs.Load()

	// Every session reaches every channel's head (the last acknowledged
	// post); then the checker counts what is missing.
	r.mu.Lock()
	heads := maps.Clone(r.heads)
	r.mu.Unlock()
	deadline := time.Now().Add(cfg.Settle)
	for _, s := range r.sess {
		for !s.chk.caughtUp(heads) && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond) // polling, bounded by the deadline
		}
	}
	for _, s := range r.sess {
		if !s.chk.caughtUp(heads) {
			rep.NotCaught++
		}
		l, d, o := s.chk.tally(heads)
		rep.Lost += l
		rep.Duplicated += d
		rep.OutOfOrder += o
	}
	for _, n := range r.nodes {
		saveNodeMetrics(ctx, r.hc, n, cfg.Out)
	}
	rep.judge(cfg.BackWithin)
	if err := rep.write(cfg.Out); err != nil {
		return rep, err
	}
	return rep, nil
}

// seedDatabase runs `parley seed` straight on the database and reads what
// it wrote.
func seedDatabase(ctx context.Context, execCmd []string, dbURL string, users, channels int) (*seedOut, error) {
	args := append(append([]string{}, execCmd[1:]...), "seed", "--log-level", "warn", "--db", dbURL,
		"--users", fmt.Sprint(users), "--channels", fmt.Sprint(channels), "--out", "-")
	cmd := exec.CommandContext(ctx, execCmd[0], args...)
	cmd.Env = chaosEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("parley seed: %w\n%s", err, stderr.String())
	}
	var s seedOut
	if err := json.Unmarshal(out, &s); err != nil {
		return nil, fmt.Errorf("seed output: %w", err)
	}
	return &s, nil
}

// nodeURLs are the nodes' base URLs starting at node first.
func (r *stormRun) nodeURLs(first int) []string {
	var out []string
	for i := range r.nodes {
		out = append(out, r.nodes[(first+i)%len(r.nodes)].api)
	}
	return out
}

// connect opens one session per user, home node i mod N, with every node
// to move to.
func (r *stormRun) connect(ctx context.Context) error {
	r.sess = make([]*stormSession, len(r.seed.Users))
	sem := make(chan struct{}, r.cfg.Connect)
	errs := make(chan error, len(r.seed.Users))
	var wg sync.WaitGroup
	for i, u := range r.seed.Users {
		s := &stormSession{}
		r.sess[i] = s
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			b := r.nodeURLs(i % len(r.nodes))
			var urls []string
			for _, x := range b {
				urls = append(urls, "ws://"+strings.TrimPrefix(x, "http://")+"/api/v1/gateway")
			}
			c := client.New(b[0], client.WithToken(u.Token), client.WithFallbackURLs(b[1:]...),
				client.WithRetry(8, 2*time.Second), client.WithLogger(r.cfg.Log))
			conn, err := c.Connect(ctx, r.seed.WorkspaceID, client.ConnectOptions{
				Handler: s.handle, URLs: urls,
				MinBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second, HandshakeTimeout: 20 * time.Second,
				OnState: func(st client.State, _ error) { r.onState(s, st) },
			})
			if err != nil {
				errs <- fmt.Errorf("session %d connect: %w", i, err)
				return
			}
			s.conn = conn
		})
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when none failed
}

// handle checks a session's durable events: each channel from the first
// event seen, in order, once.
func (s *stormSession) handle(ev client.Event) {
	if ev.Type == parley.EventChannelSummary {
		var d struct {
			ChannelID string `json:"channel_id"`
			LastSeq   int64  `json:"last_seq"`
		}
		if json.Unmarshal(ev.Data, &d) == nil {
			s.chk.cover(d.ChannelID, d.LastSeq)
		}
		return
	}
	if ev.Durable() && ev.Ordered && ev.ChannelID != "" {
		s.chk.observe(ev.ChannelID, ev.Seq)
	}
}

// onState follows a session's socket during a phase: down, then back.
func (r *stormRun) onState(s *stormSession, st client.State) {
	switch st {
	case client.StateDisconnected:
		if s.waiting.CompareAndSwap(false, true) {
			r.mu.Lock()
			r.dropped++
			r.mu.Unlock()
		}
	case client.StateReady, client.StateResumed:
		if s.waiting.CompareAndSwap(true, false) {
			r.mu.Lock()
			if !r.phaseT0.IsZero() {
				r.backs = append(r.backs, time.Since(r.phaseT0))
			}
			r.mu.Unlock()
		}
	}
}

// writeLoad posts at cfg.Rate, half into #general, through the writers'
// home nodes (falling back on the others).
func (r *stormRun) writeLoad(ctx context.Context) {
	var general string
	for _, ch := range r.seed.Channels {
		if ch.Name == "general" {
			general = ch.ID
		}
	}
	type writer struct {
		c      *client.Client
		others []string
	}
	ws := make([]writer, r.cfg.Writers)
	for i := range ws {
		u := r.seed.Users[i]
		b := r.nodeURLs(i % len(r.nodes))
		ws[i].c = client.New(b[0], client.WithToken(u.Token), client.WithFallbackURLs(b[1:]...),
			client.WithRetry(8, 2*time.Second), client.WithLogger(r.cfg.Log))
		for _, ch := range u.Channels {
			if ch != general {
				ws[i].others = append(ws[i].others, ch)
			}
		}
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / r.cfg.Rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w := ws[n%len(ws)]
		ch := general
		if n%2 == 1 && len(w.others) > 0 {
			ch = w.others[(n/2)%len(w.others)]
		}
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			m, err := w.c.PostMessage(pctx, ch, parley.NewMessage{Text: messageText(time.Now(), 64)})
			r.posts.Add(1)
			if err != nil {
				r.postErrs.Add(1)
				return
			}
			r.mu.Lock()
			r.heads[ch] = max(r.heads[ch], m.Seq)
			r.mu.Unlock()
		})
	}
}

// fleetSnapshot is what the fleet's counters and the database say at one
// moment.
type fleetSnapshot struct {
	at      time.Time
	xacts   float64
	perNode []map[string]float64 // nil entry: node down
	client  client.Stats
}

func (r *stormRun) snapshot(ctx context.Context) (fleetSnapshot, error) {
	fs := fleetSnapshot{at: time.Now()}
	err := r.db.admin.QueryRowContext(ctx,
		`SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1`, r.db.name).Scan(&fs.xacts)
	if err != nil {
		return fs, fmt.Errorf("pg_stat_database: %w", err)
	}
	for _, n := range r.nodes {
		var m map[string]float64
		if n.running() {
			if m, err = scrapeMetrics(ctx, r.hc, n.admin); err != nil {
				m = nil // down meanwhile: counted from its restart
			}
		}
		fs.perNode = append(fs.perNode, m)
	}
	for _, s := range r.sess {
		if s.conn != nil {
			addStats(&fs.client, s.conn.Stats())
		}
	}
	return fs, nil
}

// delta sums metric name over the nodes between two snapshots; a node
// restarted in between (restarted[i]) counts from zero.
func delta(a, b fleetSnapshot, name string, restarted map[int]bool) float64 {
	var d float64
	for i := range b.perNode {
		var before float64
		if !restarted[i] && a.perNode[i] != nil {
			before = a.perNode[i][name]
		}
		if b.perNode[i] != nil {
			d += b.perNode[i][name] - before
		}
	}
	return d
}

// beginPhase starts counting drops and returns.
func (r *stormRun) beginPhase() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.phaseT0, r.backs, r.dropped = time.Now(), nil, 0
}

// waitBack waits until every session that went down in the phase is back,
// or until limit.
func (r *stormRun) waitBack(ctx context.Context, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		r.mu.Lock()
		done := len(r.backs) >= r.dropped
		r.mu.Unlock()
		if done && !r.anyWaiting() {
			return
		}
		time.Sleep(20 * time.Millisecond) // polling, bounded by the deadline
	}
}

func (r *stormRun) anyWaiting() bool {
	for _, s := range r.sess {
		if s.waiting.Load() {
			return true
		}
	}
	return false
}

// steady measures a steady window of cfg.Window.
func (r *stormRun) steady(ctx context.Context) (a, b fleetSnapshot, err error) {
	if a, err = r.snapshot(ctx); err != nil {
		return
	}
	if !sleepCtx(ctx, r.cfg.Window) {
		return a, b, ctx.Err()
	}
	b, err = r.snapshot(ctx)
	return
}

// dropPhase cuts every socket at once.
func (r *stormRun) dropPhase(ctx context.Context) (*StormPhase, error) {
	s0, s1, err := r.steady(ctx)
	if err != nil {
		return nil, err
	}
	r.logf("drop: cutting all %d sockets at once", len(r.sess))
	r.beginPhase()
	for _, s := range r.sess {
		s.waiting.Store(true)
	}
	r.mu.Lock()
	r.dropped = len(r.sess)
	r.mu.Unlock()
	for _, s := range r.sess {
		s.conn.Drop()
	}
	r.waitBack(ctx, r.cfg.BackWithin+30*time.Second)
	if rest := time.Until(s1.at.Add(r.cfg.Window)); rest > 0 { // s1.at is the cut
		sleepCtx(ctx, rest)
	}
	s2, err := r.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	ph := r.phase("drop", s0, s1, s2, func(name string) float64 { return delta(s1, s2, name, nil) })
	r.logf("drop: %d of %d back, all back in %.1f s (p99 %.1f s); %.0f database transactions/s against %.0f steady (%.2f×); resumes %v",
		ph.Back, ph.Dropped, ph.AllBackS, ph.P99BackS, ph.StormTPS, ph.SteadyTPS, ph.XactRatio, ph.Sources)
	return ph, nil
}

// rollingPhase restarts every node in turn with SIGTERM.
func (r *stormRun) rollingPhase(ctx context.Context) (*StormPhase, error) {
	s0, s1, err := r.steady(ctx)
	if err != nil {
		return nil, err
	}
	var waves []StormWave
	var backs []time.Duration
	dropped := 0
	start := s1.at
	// A restarted node's counters start again from zero: the resumes are
	// summed wave by wave, each between a snapshot before its SIGTERM and
	// one after every session is back.
	sums := map[string]float64{}
	for _, n := range r.nodes {
		r.logf("rolling restart: node %d", n.idx)
		a, err := r.snapshot(ctx)
		if err != nil {
			return nil, err
		}
		r.beginPhase()
		t0 := time.Now()
		n.terminate(stopGrace)
		drain := time.Since(t0)
		if err := n.start(); err != nil {
			return nil, err
		}
		if err := n.waitReady(ctx, 60*time.Second); err != nil {
			return nil, err
		}
		r.waitBack(ctx, r.cfg.BackWithin+30*time.Second)
		b, err := r.snapshot(ctx)
		if err != nil {
			return nil, err
		}
		for _, name := range stormCounters {
			sums[name] += delta(a, b, name, map[int]bool{n.idx: true})
		}
		r.mu.Lock()
		w := StormWave{Node: n.idx, Dropped: r.dropped, DrainS: drain.Seconds()}
		if len(r.backs) > 0 {
			w.AllBackS = slices.Max(r.backs).Seconds()
		}
		backs = append(backs, r.backs...)
		dropped += r.dropped
		r.phaseT0 = time.Time{}
		r.mu.Unlock()
		waves = append(waves, w)
		r.logf("rolling restart: node %d drained in %.1f s; %d sessions moved, all back %.1f s after its SIGTERM", n.idx, w.DrainS, w.Dropped, w.AllBackS)
	}
	if rest := time.Until(start.Add(r.cfg.Window)); rest > 0 {
		sleepCtx(ctx, rest)
	}
	s2, err := r.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.backs, r.dropped = backs, dropped
	r.mu.Unlock()
	ph := r.phase("rolling-restart", s0, s1, s2, func(name string) float64 { return sums[name] })
	ph.Waves = waves
	r.logf("rolling restart: %d of %d back; %.0f database transactions/s against %.0f steady (%.2f×); resumes %v",
		ph.Back, ph.Dropped, ph.StormTPS, ph.SteadyTPS, ph.XactRatio, ph.Sources)
	return ph, nil
}

// stopGrace is how long a node stopped with SIGTERM may take to exit before
// it is killed: the gateway's drain, which lingers for handovers while its
// sessions are being taken (--drain-handover 10 s, at most
// gateway.MaxLingerFactor times that), and the rest of the shutdown
// (20 s), with a margin.
const stopGrace = 100 * time.Second

// stormCounters are the nodes' counters a phase sums.
var stormCounters = []string{"parley_store_op_seconds_count",
	`parley_gateway_resume_sources_total{source="buffer"}`,
	`parley_gateway_resume_sources_total{source="handover"}`,
	`parley_gateway_resume_sources_total{source="sync"}`,
	"parley_gateway_session_catchups_total", "parley_gateway_catchup_reads_total",
	"parley_gateway_catchup_stream_hits_total"}

// phase computes a phase's figures from the steady window [s0, s1] and
// the storm window [s1, s2]; sum gives a counter's increase over the
// fleet in the storm window.
func (r *stormRun) phase(name string, s0, s1, s2 fleetSnapshot, sum func(string) float64) *StormPhase {
	s1b := s1
	r.mu.Lock()
	backs := slices.Clone(r.backs)
	dropped := r.dropped
	r.phaseT0 = time.Time{}
	r.mu.Unlock()
	slices.Sort(backs)
	ph := &StormPhase{Name: name, Dropped: dropped, Back: len(backs), Sources: map[string]float64{}}
	for _, b := range backs {
		if b <= r.cfg.BackWithin {
			ph.BackWithin++
		}
	}
	if len(backs) > 0 {
		ph.P50BackS = backs[len(backs)/2].Seconds()
		ph.P99BackS = backs[min(len(backs)-1, int(math.Ceil(0.99*float64(len(backs))))-1)].Seconds()
		ph.AllBackS = backs[len(backs)-1].Seconds()
	}
	steadyS := s1.at.Sub(s0.at).Seconds()
	ph.WindowS = s2.at.Sub(s1b.at).Seconds()
	ph.Seconds = ph.WindowS
	ph.SteadyTPS = (s1.xacts - s0.xacts) / steadyS
	ph.StormTPS = (s2.xacts - s1b.xacts) / ph.WindowS
	if ph.SteadyTPS > 0 {
		ph.XactRatio = ph.StormTPS / ph.SteadyTPS
	}
	ph.SteadyWPS = delta(s0, s1, "parley_store_op_seconds_count", nil) / steadyS
	ph.StormWPS = sum("parley_store_op_seconds_count") / ph.WindowS
	var all float64
	for _, src := range []string{"buffer", "handover", "sync"} {
		v := sum(`parley_gateway_resume_sources_total{source="` + src + `"}`)
		ph.Sources[src] = v
		all += v
	}
	if all > 0 {
		ph.WithoutStore = (ph.Sources["buffer"] + ph.Sources["handover"]) / all
	}
	ph.SessionCatchups = sum("parley_gateway_session_catchups_total")
	ph.CatchupReads = sum("parley_gateway_catchup_reads_total")
	ph.CatchupsTail = sum("parley_gateway_catchup_stream_hits_total")
	ph.ClientResumes = s2.client.Resumes - s1b.client.Resumes
	ph.ClientInvalid = s2.client.InvalidSessions - s1b.client.InvalidSessions
	ph.ClientCatchUps = s2.client.CatchUps - s1b.client.CatchUps
	ph.ClientGapFills = s2.client.GapsFilled - s1b.client.GapsFilled
	return ph
}

// judge sets Pass (the mechanisms: everyone back, nothing lost) and the
// targets (the figures).
func (rep *StormReport) judge(within time.Duration) {
	rep.Pass = rep.Lost == 0 && rep.Duplicated == 0 && rep.OutOfOrder == 0 && rep.NotCaught == 0
	for _, ph := range rep.Phases {
		rep.Pass = rep.Pass && ph.Back == ph.Dropped && ph.Dropped > 0
		share := 0.0
		if ph.Dropped > 0 {
			share = float64(ph.BackWithin) / float64(ph.Dropped)
		}
		rep.Targets = append(rep.Targets,
			Target{Name: ph.Name + ": sessions back", Want: fmt.Sprintf("≥ 99 %% within %s", within),
				Measured: fmt.Sprintf("%.1f %% (%d of %d; p99 %.1f s, all %.1f s)", 100*share, ph.BackWithin, ph.Dropped, ph.P99BackS, ph.AllBackS),
				Met:      share >= 0.99},
			Target{Name: ph.Name + ": store queries", Want: "≤ 2× steady",
				Measured: fmt.Sprintf("%.2f× (%.0f against %.0f transactions/s)", ph.XactRatio, ph.StormTPS, ph.SteadyTPS),
				Met:      ph.XactRatio <= 2},
			Target{Name: ph.Name + ": resumes without the store", Want: "≥ 95 %",
				Measured: fmt.Sprintf("%.1f %% (buffer %.0f, handover %.0f, sync %.0f)", 100*ph.WithoutStore,
					ph.Sources["buffer"], ph.Sources["handover"], ph.Sources["sync"]),
				Met: ph.WithoutStore >= 0.95})
	}
}

func (rep *StormReport) write(dir string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "fleet-storm.json"), b, 0o644)
}

// Print writes the summary.
func (rep *StormReport) Print(w io.Writer) {
	fmt.Fprintf(w, "fleet storm: %d nodes, %d sessions, %.0f posts/s (%d posts, %d failed)\n",
		rep.Nodes, rep.Sessions, rep.Rate, rep.Posts, rep.PostErrors)
	for _, ph := range rep.Phases {
		fmt.Fprintf(w, "%s: %d of %d back (within target %d), p50 %.1f s, p99 %.1f s, all %.1f s\n",
			ph.Name, ph.Back, ph.Dropped, ph.BackWithin, ph.P50BackS, ph.P99BackS, ph.AllBackS)
		fmt.Fprintf(w, "  database transactions/s: steady %.1f, storm %.1f (%.2f×) over %.1f s; store writes/s: steady %.1f, storm %.1f\n",
			ph.SteadyTPS, ph.StormTPS, ph.XactRatio, ph.WindowS, ph.SteadyWPS, ph.StormWPS)
		fmt.Fprintf(w, "  resumes: buffer %.0f, handover %.0f, sync %.0f (%.1f %% without the store); session catch-ups %.0f (%.0f from the nodes' stream tails, the rest in %.0f store reads)\n",
			ph.Sources["buffer"], ph.Sources["handover"], ph.Sources["sync"], 100*ph.WithoutStore, ph.SessionCatchups, ph.CatchupsTail, ph.CatchupReads)
		fmt.Fprintf(w, "  clients: %d resumes, %d invalid sessions, %d /sync catch-ups, %d gap fills\n",
			ph.ClientResumes, ph.ClientInvalid, ph.ClientCatchUps, ph.ClientGapFills)
		for _, wv := range ph.Waves {
			fmt.Fprintf(w, "  node %d: drained in %.1f s, %d sessions moved, all back %.1f s after SIGTERM\n", wv.Node, wv.DrainS, wv.Dropped, wv.AllBackS)
		}
	}
	fmt.Fprintf(w, "lost / duplicated / out of order: %d / %d / %d; sessions short of a head: %d\n",
		rep.Lost, rep.Duplicated, rep.OutOfOrder, rep.NotCaught)
	for _, t := range rep.Targets {
		met := "met"
		if !t.Met {
			met = "NOT MET"
		}
		fmt.Fprintf(w, "target %-40s want %-22s measured %s: %s\n", t.Name, t.Want, t.Measured, met)
	}
	fmt.Fprintf(w, "result: %s\n", map[bool]string{true: "PASS", false: "FAIL"}[rep.Pass])
}

// saveNodeMetrics keeps a node's /metrics beside its log (metrics-<i>.txt).
func saveNodeMetrics(ctx context.Context, hc *http.Client, n *chaosNode, dir string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.admin+"/metrics", nil)
	resp, err := hc.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("metrics-%d.txt", n.idx)), b, 0o644)
	}
}
