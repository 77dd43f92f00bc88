package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"parley"
	"parley/client"
	"parley/internal/faultproxy"
)

// A chaos run (`parley chaos`): N nodes of this binary on a fresh
// PostgreSQL database behind a fault proxy, clustered over their embedded
// NATS (or sharing an external one); the load tester's traffic shapes —
// steady (posts spread over many channels) and hot-channel (posts into
// #general, which everyone is in) — posted by writers and received by
// every user's gateway session; and, at seeded random intervals, one fault
// at a time. At the end the faults are healed, every channel's log is read
// back over the API and the histories are checked (chaos_check.go).
//
// It lives in package loadtest because it is the load tester with faults:
// it reuses its seq checker (check.go), its message text and its HTML
// charts (html.go).

// Fault kinds.
const (
	FaultKill    = "kill"        // kill -9 a node, restart it after 1–5 s
	FaultStop    = "stop"        // SIGSTOP a node for StopMin–StopMax, then SIGCONT
	FaultPGTerm  = "pgterm"      // pg_terminate_backend on every backend of the run's database
	FaultDBStall = "dbstall"     // the proxy forwards nothing for 2–8 s
	FaultNATS    = "natsrestart" // the run's own NATS server (--nats own) shut down, started again 1–3 s later
)

// FaultKinds are all the kinds, in the order the report lists them.
var FaultKinds = []string{FaultKill, FaultStop, FaultPGTerm, FaultDBStall, FaultNATS}

// NATSOwn as ChaosConfig.NATS: the run hosts a NATS server of its own for
// the nodes, and may restart it.
const NATSOwn = "own"

// ChaosConfig are the settings of a chaos run.
type ChaosConfig struct {
	Exec     []string // the command that runs this binary ("parley"); serve and seed are appended
	Postgres string   // admin URL of the PostgreSQL server; a database is created on it per run
	KeepDB   bool     // keep the database after the run
	NATS     string   // NATSOwn, or an external NATS URL; empty: the nodes' embedded NATS, clustered
	Nodes    int
	Scenario string // "steady", "hot-channel" or "both"
	Users    int    // seeded users, every one a reader (a gateway session)
	Channels int    // channels besides #general
	Writers  int    // users who also post
	Rate     float64
	Duration time.Duration
	Seed     uint64
	Faults   []string      // kinds to inject; empty: all
	GapMin   time.Duration // quiet time between faults
	GapMax   time.Duration
	StopMin  time.Duration // SIGSTOP length
	StopMax  time.Duration
	Settle   time.Duration // longest wait at the end for readers to reach the heads
	Out      string        // directory for chaos.json, chaos.html and the node logs
	Stdout   io.Writer
	Log      *slog.Logger
}

func (c *ChaosConfig) defaults() error {
	if len(c.Exec) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		c.Exec = []string{exe}
	}
	if c.Postgres == "" {
		c.Postgres = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	if c.Nodes <= 0 {
		c.Nodes = 3
	}
	if c.Scenario == "" {
		c.Scenario = "both"
	}
	switch c.Scenario {
	case "steady", ScenarioHotChannel, "both":
	default:
		return fmt.Errorf("chaos scenario %q: want steady, hot-channel or both", c.Scenario)
	}
	if c.Users <= 0 {
		c.Users = 30
	}
	if c.Channels <= 0 {
		c.Channels = 5
	}
	if c.Writers <= 0 {
		c.Writers = min(10, c.Users)
	}
	c.Writers = min(c.Writers, c.Users)
	if c.Rate <= 0 {
		c.Rate = 20
	}
	if c.Duration <= 0 {
		c.Duration = time.Minute
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	if len(c.Faults) == 0 {
		for _, k := range FaultKinds {
			if k != FaultNATS || c.NATS == NATSOwn {
				c.Faults = append(c.Faults, k)
			}
		}
	}
	for _, f := range c.Faults {
		if !slices.Contains(FaultKinds, f) {
			return fmt.Errorf("fault %q: want one of %s", f, strings.Join(FaultKinds, ", "))
		}
		if f == FaultNATS && c.NATS != NATSOwn {
			return fmt.Errorf("fault %s needs --nats %s (a NATS server the run can restart)", FaultNATS, NATSOwn)
		}
	}
	if c.GapMin <= 0 {
		c.GapMin = 5 * time.Second
	}
	if c.GapMax < c.GapMin {
		c.GapMax = max(c.GapMin, 20*time.Second)
	}
	if c.StopMin <= 0 {
		c.StopMin = 5 * time.Second
	}
	if c.StopMax < c.StopMin {
		c.StopMax = max(c.StopMin, 20*time.Second)
	}
	if c.Settle <= 0 {
		c.Settle = 60 * time.Second
	}
	if c.Out == "" {
		c.Out = "out/chaos"
	}
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

// Fault is one injected fault: its window runs from Start to End (the
// fault healed: the node ready again, the process continued, the proxy
// healed); a pgterm's window is the 5 s after it.
type Fault struct {
	Kind   string    `json:"kind"`
	Node   int       `json:"node"` // -1: not a node fault
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Detail string    `json:"detail,omitempty"`
}

// write is one post as its writer saw it.
type write struct {
	Writer  string    `json:"writer"`
	Channel string    `json:"channel"`
	CMID    string    `json:"client_msg_id"`
	Sent    time.Time `json:"sent"`
	Acked   time.Time `json:"acked,omitzero"` // zero: the request failed
	Seq     int64     `json:"seq,omitempty"`
	Err     string    `json:"error,omitempty"`
	// Refused counts the attempts answered 503 before the last (a move's
	// read-only window: retried with the same client_msg_id).
	Refused int `json:"refused,omitempty"`
}

// receipt is one message.created a reader was handed.
type receipt struct {
	seq   int64
	cmid  string // only in the author's copy
	at    time.Time
	live  bool // from the gateway (not a catch-up over HTTP)
	order int  // position in the reader's stream of the channel
}

// chaosReader is one user's gateway session and what it received.
type chaosReader struct {
	idx   int
	user  seedUser
	chans []string
	conn  *client.Conn
	chk   checker
	run   *chaosRun

	mu       sync.Mutex
	receipts map[string][]receipt // by channel; guarded by mu
	// summaries are the last_seq of every channel.summary, by channel;
	// guarded by mu.
	summaries map[string][]int64
	n         int // guarded by mu
	// unordered counts, by channel, durable events of a declared channel
	// that the client handed over without Ordered (it no longer tracked
	// the channel); guarded by mu.
	unordered map[string]int
}

// seedUser and seedOut mirror what `parley seed --out` writes.
type seedUser struct {
	ID       string   `json:"id"`
	Token    string   `json:"token"`
	Channels []string `json:"channels"`
}

type seedOut struct {
	WorkspaceID string   `json:"workspace_id"`
	Owner       seedUser `json:"owner"`
	Channels    []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"channels"`
	Users []seedUser `json:"users"`
}

// chaosRun is one run's state.
type chaosRun struct {
	cfg   *ChaosConfig
	rng   *rand.Rand // the fault schedule's; only the fault loop uses it
	start time.Time
	seed  *seedOut
	nodes []*chaosNode
	proxy *faultproxy.Proxy
	db    *chaosDB
	nats  *chaosNATS // --nats own; nil otherwise

	general string

	mu     sync.Mutex
	writes []write      // guarded by mu
	faults []Fault      // guarded by mu
	states []stateEvent // guarded by mu

	cmidSeq atomic.Int64

	// writerClient, when set, makes the writers' API clients (a move run:
	// more retries, and a transport that counts refusals).
	writerClient func(home int, token string) *client.Client
}

// stateEvent is a session change of a reader, for the timeline.
type stateEvent struct {
	at    time.Time
	state client.State
}

func (r *chaosRun) logf(format string, args ...any) {
	fmt.Fprintf(r.cfg.Stdout, "%7.1fs  %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
}

// RunChaos runs a chaos run and writes its report. The error is for runs
// that could not be carried out; a run whose histories show a fault comes
// back with Pass false.
func RunChaos(ctx context.Context, cfg ChaosConfig) (*ChaosReport, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, err
	}
	r := &chaosRun{cfg: &cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), start: time.Now()}
	r.logf("chaos: seed %d (rerun the same fault schedule with --seed %d)", cfg.Seed, cfg.Seed)

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
			cfg.Log.Warn("chaos: drop database", "err", err)
		}
	}()
	r.logf("database %s", db.name)

	if err := r.seedDB(ctx); err != nil {
		return nil, err
	}
	proxy, err := faultproxy.Start(db.host)
	if err != nil {
		return nil, err
	}
	r.proxy = proxy
	defer proxy.Close()

	natsURL := cfg.NATS
	if cfg.NATS == NATSOwn {
		if r.nats, err = newChaosNATS(); err != nil {
			return nil, err
		}
		if err := r.nats.start(); err != nil {
			return nil, err
		}
		defer r.nats.stop()
		natsURL = r.nats.URL()
		r.logf("own NATS server at %s", natsURL)
	}
	nodes, err := newChaosNodes(cfg.Exec, cfg.Nodes, db.via(proxy.Addr()), natsURL, cfg.Out)
	if err != nil {
		return nil, err
	}
	r.nodes = nodes
	stop, err := startNodes(ctx, nodes)
	if err != nil {
		return nil, err
	}
	defer stop()
	r.logf("%d nodes ready: %s", len(nodes), strings.Join(r.apiURLs(0), " "))

	readers, err := r.connectReaders(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, rd := range readers {
			rd.conn.Close()
		}
	}()
	r.logf("%d readers connected; load for %s at %.0f posts/s (%s) with faults %s",
		len(readers), cfg.Duration, cfg.Rate, cfg.Scenario, strings.Join(cfg.Faults, ","))

	loadStart := time.Now()
	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	var wg sync.WaitGroup
	wg.Go(func() { r.writeLoad(loadCtx) })
	faultErr := make(chan error, 1)
	go func() { faultErr <- r.faultLoop(loadCtx) }()
	if err := <-faultErr; err != nil {
		stopLoad()
		wg.Wait()
		return nil, err
	}
	wg.Wait()
	loadEnd := time.Now()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	// Heal: every node up and continued, the proxy forwarding, the bus up.
	proxy.Heal()
	if r.nats != nil && !r.nats.running() {
		if err := r.nats.start(); err != nil {
			return nil, err
		}
	}
	for _, n := range nodes {
		if !n.running() {
			if err := r.ensureUp(ctx, n); err != nil {
				return nil, err
			}
		}
	}
	r.logf("load over after %s; all healed", loadEnd.Sub(loadStart).Round(time.Second))

	// The fence: the logs as they stand now, every fault healed and every
	// post answered, are what each reader must hold by the end of the
	// settle window. Nothing is posted to reveal a tail: an event
	// committed by a node killed before it published reaches the readers
	// through the outbox relay (docs/delivery.md) or not at all, and the
	// checker says which.
	hist, err := r.readHistories(ctx)
	if err != nil {
		return nil, err
	}
	heads := map[string]int64{}
	for ch, evs := range hist {
		if len(evs) > 0 {
			heads[ch] = evs[len(evs)-1].Seq
		}
	}
	settleStart := time.Now()
	r.waitCaughtUp(ctx, readers, heads)
	r.logf("readers settled in %s", time.Since(settleStart).Round(100*time.Millisecond))

	r.saveMetrics(ctx)
	rep := r.check(readers, hist, loadStart, loadEnd)
	if err := rep.write(cfg.Out); err != nil {
		return rep, err
	}
	r.logf("report: %s, %s", filepath.Join(cfg.Out, "chaos.json"), filepath.Join(cfg.Out, "chaos.html"))
	return rep, nil
}

// saveMetrics keeps each node's /metrics at the end of the run beside its
// log (metrics-<i>.txt): evidence for whatever the checker finds.
func (r *chaosRun) saveMetrics(ctx context.Context) {
	hc := &http.Client{Timeout: 5 * time.Second}
	for _, n := range r.nodes {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.admin+"/metrics", nil)
		resp, err := hc.Do(req)
		if err != nil {
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			_ = os.WriteFile(filepath.Join(r.cfg.Out, fmt.Sprintf("metrics-%d.txt", n.idx)), b, 0o644)
		}
	}
}

// seedDB runs `parley seed` straight on the database.
func (r *chaosRun) seedDB(ctx context.Context) error {
	s, err := seedDatabase(ctx, r.cfg.Exec, r.db.direct, r.cfg.Users, r.cfg.Channels)
	if err != nil {
		return err
	}
	r.seed = s
	for _, ch := range s.Channels {
		if ch.Name == "general" {
			r.general = ch.ID
		}
	}
	if r.general == "" {
		return errors.New("seed: no #general")
	}
	return nil
}

// apiURLs returns the nodes' base URLs starting at node first.
func (r *chaosRun) apiURLs(first int) []string {
	var out []string
	for i := range r.nodes {
		out = append(out, r.nodes[(first+i)%len(r.nodes)].api)
	}
	return out
}

// apiClient is a client of user token that prefers node home and falls
// back on the others in turn.
func (r *chaosRun) apiClient(home int, token string) *client.Client {
	b := r.apiURLs(home)
	return client.New(b[0], client.WithToken(token), client.WithFallbackURLs(b[1:]...),
		client.WithRetry(8, 2*time.Second), client.WithLogger(r.cfg.Log))
}

// connectReaders opens one gateway session per user, spread over the
// nodes, each tracking its channels from seq 0 and moving through every
// node's gateway when its own goes away.
func (r *chaosRun) connectReaders(ctx context.Context) ([]*chaosReader, error) {
	readers := make([]*chaosReader, len(r.seed.Users))
	for i, u := range r.seed.Users {
		rd := &chaosReader{idx: i, user: u, chans: u.Channels, run: r, receipts: map[string][]receipt{}, summaries: map[string][]int64{}, unordered: map[string]int{}}
		home := i % len(r.nodes)
		track := map[string]int64{}
		for _, ch := range u.Channels {
			track[ch] = 0
			rd.chk.declare(ch, 0)
		}
		var urls []string
		for _, b := range r.apiURLs(home) {
			urls = append(urls, "ws://"+strings.TrimPrefix(b, "http://")+"/api/v1/gateway")
		}
		conn, err := r.apiClient(home, u.Token).Connect(ctx, r.seed.WorkspaceID, client.ConnectOptions{
			Handler: rd.handle, Channels: track, DeclaredOnly: true, URLs: urls,
			MinBackoff: 50 * time.Millisecond, MaxBackoff: 2 * time.Second, HandshakeTimeout: 5 * time.Second,
			OnState: func(st client.State, err error) {
				r.mu.Lock()
				r.states = append(r.states, stateEvent{time.Now(), st})
				r.mu.Unlock()
				if st == client.StateClosed && err != nil {
					r.logf("reader %d: the session gave up: %v", i, err)
				}
			},
		})
		if err != nil {
			for _, done := range readers[:i] {
				done.conn.Close()
			}
			return nil, fmt.Errorf("reader %d connect: %w", i, err)
		}
		rd.conn = conn
		readers[i] = rd
	}
	return readers, nil
}

// handle records a reader's durable events of its channels.
func (rd *chaosReader) handle(ev client.Event) {
	now := time.Now()
	if ev.Type == parley.EventChannelSummary {
		// A hot or huge channel out of focus: its events up to last_seq
		// were passed over, which counts as handed over, as in the load
		// tester (docs/protocol.md, View-aware delivery).
		var d struct {
			ChannelID string `json:"channel_id"`
			LastSeq   int64  `json:"last_seq"`
		}
		if json.Unmarshal(ev.Data, &d) == nil && slices.Contains(rd.chans, d.ChannelID) {
			rd.chk.cover(d.ChannelID, d.LastSeq)
			rd.mu.Lock()
			rd.summaries[d.ChannelID] = append(rd.summaries[d.ChannelID], d.LastSeq)
			rd.mu.Unlock()
		}
		return
	}
	if !ev.Durable() || !slices.Contains(rd.chans, ev.ChannelID) {
		return
	}
	if !ev.Ordered {
		rd.mu.Lock()
		rd.unordered[ev.ChannelID]++
		rd.mu.Unlock()
		return
	}
	rd.chk.observe(ev.ChannelID, ev.Seq)
	if ev.Type != parley.EventMessageCreated {
		return
	}
	cmid, _ := messageOf(ev.Data)
	rd.mu.Lock()
	rd.receipts[ev.ChannelID] = append(rd.receipts[ev.ChannelID], receipt{
		seq: ev.Seq, cmid: cmid, at: now,
		live: ev.Source == client.SourceGateway, order: rd.n})
	rd.n++
	rd.mu.Unlock()
}

// messageOf reads a message.created payload's client_msg_id and
// created_at (the commit time: the store stamps it in the transaction).
func messageOf(data json.RawMessage) (cmid string, made time.Time) {
	var d parley.MessageEventData
	if json.Unmarshal(data, &d) != nil || d.Message == nil {
		return "", time.Time{}
	}
	return d.Message.ClientMsgID, d.Message.CreatedAt
}

// writeLoad posts at cfg.Rate until ctx ends: each writer posts in turn,
// every post in its own goroutine (a stalled node must not slow the
// schedule), into #general (hot-channel) or one of the writer's other
// channels (steady); "both" alternates.
func (r *chaosRun) writeLoad(ctx context.Context) {
	cfg := r.cfg
	type writer struct {
		u       seedUser
		c       *client.Client
		others  []string
		counter int
	}
	ws := make([]*writer, cfg.Writers)
	for i := range ws {
		u := r.seed.Users[i]
		mk := r.apiClient
		if r.writerClient != nil {
			mk = r.writerClient
		}
		w := &writer{u: u, c: mk(i%len(r.nodes), u.Token)}
		for _, ch := range u.Channels {
			if ch != r.general {
				w.others = append(w.others, ch)
			}
		}
		ws[i] = w
	}
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	tick := time.NewTicker(interval)
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
		hot := cfg.Scenario == ScenarioHotChannel || (cfg.Scenario == "both" && n%2 == 0) || len(w.others) == 0
		ch := r.general
		if !hot {
			ch = w.others[w.counter%len(w.others)]
		}
		w.counter++
		wg.Go(func() { r.post(w.c, w.u.ID, ch) })
	}
}

// post sends one message and records what its writer saw. The request has
// its own deadline, not the load's: a post started before the end is
// carried through.
func (r *chaosRun) post(c *client.Client, writer, ch string) {
	cmid := fmt.Sprintf("chaos-%d", r.cmidSeq.Add(1))
	w := write{Writer: writer, Channel: ch, CMID: cmid, Sent: time.Now()}
	var refused atomic.Int32
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), refusedKey{}, &refused), 45*time.Second)
	defer cancel()
	m, err := c.PostMessage(ctx, ch, parley.NewMessage{Text: messageText(w.Sent, 64), ClientMsgID: cmid})
	w.Refused = int(refused.Load())
	if err != nil {
		w.Err = err.Error()
	} else {
		w.Acked, w.Seq = time.Now(), m.Seq
	}
	r.mu.Lock()
	r.writes = append(r.writes, w)
	r.mu.Unlock()
}

// readHistories reads every channel's whole event log over the API.
func (r *chaosRun) readHistories(ctx context.Context) (map[string][]parley.Event, error) {
	c := r.apiClient(0, r.seed.Owner.Token)
	out := map[string][]parley.Event{}
	for _, ch := range r.seed.Channels {
		after := int64(0)
		for {
			page, err := c.ListEvents(ctx, ch.ID, after, parley.MaxLimit)
			if err != nil {
				return nil, fmt.Errorf("history of #%s: %w", ch.Name, err)
			}
			out[ch.ID] = append(out[ch.ID], page.Events...)
			if len(page.Events) == 0 || page.NextCursor == "" {
				break
			}
			after = page.Events[len(page.Events)-1].Seq
		}
	}
	return out, nil
}

// waitCaughtUp waits (at most cfg.Settle) for every reader to hold every
// seq of its channels up to the heads.
func (r *chaosRun) waitCaughtUp(ctx context.Context, readers []*chaosReader, heads map[string]int64) {
	deadline := time.Now().Add(r.cfg.Settle)
	for _, rd := range readers {
		for !rd.chk.caughtUp(heads) && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond) // polling, bounded by the deadline
		}
	}
}

// ensureUp starts a node that is down, or continues a stopped one, and
// waits until it is ready.
func (r *chaosRun) ensureUp(ctx context.Context, n *chaosNode) error {
	n.mu.Lock()
	down, stopped := n.cmd == nil, n.stopped
	n.mu.Unlock()
	switch {
	case down:
		if err := n.start(); err != nil {
			return err
		}
	case stopped:
		if err := n.signal(syscall.SIGCONT); err != nil {
			return err
		}
	}
	return n.waitReady(ctx, 60*time.Second)
}

// between returns a duration in [lo, hi] from the fault schedule's RNG.
func (r *chaosRun) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.rng.Int64N(int64(hi-lo)+1))
}

// sleepCtx waits d or until ctx ends; false if ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// faultLoop injects one fault at a time until ctx ends. The kinds come in
// rounds, each a seeded shuffle of all the enabled kinds, so that a short
// run still sees every kind. A fault in progress when the load ends is
// carried through to its heal.
func (r *chaosRun) faultLoop(ctx context.Context) error {
	var round []string
	for {
		if !sleepCtx(ctx, r.between(r.cfg.GapMin, r.cfg.GapMax)) {
			return nil
		}
		if len(round) == 0 {
			round = slices.Clone(r.cfg.Faults)
			r.rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		}
		kind := round[0]
		round = round[1:]
		f, err := r.inject(kind)
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.faults = append(r.faults, f)
		r.mu.Unlock()
		r.logf("fault %-7s node %2d  %5.1fs  %s", f.Kind, f.Node, f.End.Sub(f.Start).Seconds(), f.Detail)
	}
}

// inject carries out one fault from start to heal. It does not watch the
// load's context: every fault is healed before the run moves on.
func (r *chaosRun) inject(kind string) (Fault, error) {
	ctx := context.Background()
	f := Fault{Kind: kind, Node: -1}
	switch kind {
	case FaultKill:
		n := r.nodes[r.rng.IntN(len(r.nodes))]
		f.Node, f.Start = n.idx, time.Now()
		if err := n.kill(); err != nil {
			return f, err
		}
		down := r.between(time.Second, 5*time.Second)
		time.Sleep(down)
		if err := n.start(); err != nil {
			return f, err
		}
		if err := n.waitReady(ctx, 90*time.Second); err != nil {
			return f, err
		}
		f.End, f.Detail = time.Now(), fmt.Sprintf("down %.1fs", down.Seconds())
	case FaultStop:
		n := r.nodes[r.rng.IntN(len(r.nodes))]
		f.Node, f.Start = n.idx, time.Now()
		if err := n.signal(syscall.SIGSTOP); err != nil {
			return f, err
		}
		time.Sleep(r.between(r.cfg.StopMin, r.cfg.StopMax))
		if err := n.signal(syscall.SIGCONT); err != nil {
			return f, err
		}
		f.End = time.Now()
	case FaultPGTerm:
		f.Start = time.Now()
		cnt, err := r.db.terminateBackends(ctx)
		if err != nil {
			return f, err
		}
		f.End, f.Detail = f.Start.Add(5*time.Second), fmt.Sprintf("%d backends terminated", cnt)
	case FaultDBStall:
		f.Start = time.Now()
		r.proxy.BlackHole()
		d := r.between(2*time.Second, 8*time.Second)
		time.Sleep(d)
		r.proxy.Heal()
		f.End, f.Detail = time.Now(), fmt.Sprintf("black hole %.1fs", d.Seconds())
	case FaultNATS:
		f.Start = time.Now()
		r.nats.stop()
		d := r.between(time.Second, 3*time.Second)
		time.Sleep(d)
		if err := r.nats.start(); err != nil {
			return f, err
		}
		f.End, f.Detail = time.Now(), fmt.Sprintf("down %.1fs", d.Seconds())
	default:
		return f, fmt.Errorf("unknown fault %q", kind)
	}
	return f, nil
}
