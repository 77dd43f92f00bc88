package loadtest

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"parley"
	"parley/client"
	"parley/shardmove"
)

// A move run (`parley loadtest move`, issue 17 item 5's evidence): N
// `parley serve` nodes of this binary with store routing on, on a control
// database that is also shard "local" and a second database, shard "s2",
// sharing a NATS server with JetStream that the run hosts (the tenant
// directory needs it). The chaos run's writers post through the HTTP API
// and every seeded user holds a gateway session; after a while the real
// `parley workspaces move` command moves the workspace from local to s2
// under that load. Posts refused during the read-only window (503 +
// Retry-After) are retried by the writers' clients with the same
// client_msg_id. Then the histories are checked with the chaos checker
// (chaos_check.go): every acknowledged post in the log once and at its
// seq, every logged event handed to every reader of its channel once and
// in order; and the databases: the workspace's rows on s2 only, the
// catalogue saying active on s2.

// Shard ids of a move run.
const (
	moveSource = "local"
	moveTarget = "s2"
)

// MoveConfig are the settings of a move run.
type MoveConfig struct {
	Exec     []string // the command that runs this binary
	Postgres string   // admin URL of the PostgreSQL server; two databases are created on it
	KeepDB   bool
	Nodes    int
	Users    int // seeded users, every one a reader
	Channels int
	Writers  int
	Rate     float64
	// Before is the load before the move starts; After the load after the
	// move command returned (purge included).
	Before time.Duration
	After  time.Duration
	// MoveArgs are extra flags of `parley workspaces move` (--drain, …).
	MoveArgs []string
	// StopNode: the last node is SIGSTOPped just before the move starts
	// and continued the moment the move has switched (before the source
	// is purged): a node that never heard of the freeze, with its
	// clients' posts queued in its sockets, which it then handles on its
	// old record. The source's fence must refuse them.
	StopNode bool
	Settle   time.Duration
	Out      string
	Stdout   io.Writer
	Log      *slog.Logger
}

// MoveReport is a move run's result (move.json).
type MoveReport struct {
	// Chaos is the checker's report of the histories (the move is its one
	// "fault", from the command's start to its end).
	Chaos *ChaosReport `json:"chaos"`
	// Move is the mover's summary, as `parley workspaces move --json`
	// printed it; ReadOnlyMS its read-only window.
	Move       *shardmove.Summary `json:"move"`
	ReadOnlyMS float64            `json:"read_only_ms"`
	MoveOutput string             `json:"move_output"`
	// MoveAttempts: runs of the move command (more than one only after a
	// clean abort for want of database connections, SQLSTATE 53300).
	MoveAttempts int `json:"move_attempts"`
	// Refusals: 503 answers to posts; PostsRefused: posts that got at
	// least one (each retried with its client_msg_id); RefusedFailed: of
	// those, posts that never succeeded.
	Refusals      int `json:"refusals"`
	PostsRefused  int `json:"posts_refused"`
	RefusedFailed int `json:"refused_failed"`
	// Reconnects: gateway sessions re-established, summed over the readers.
	Reconnects int64 `json:"reconnects"`
	// From the nodes' /metrics at the end, summed: posts answered 503
	// (NodePost503), writes the routers refused on a read_only record
	// (RouterRefusals), and store writes run again after a serialization
	// failure (SerializationRetries: the source's fence answers 40001,
	// which the store tries 5 times; a post refused by the fence is the
	// difference NodePost503 - RouterRefusals).
	NodePost503          int64 `json:"node_post_503"`
	RouterRefusals       int64 `json:"router_refusals"`
	SerializationRetries int64 `json:"serialization_retries"`
	FenceRefusals        int64 `json:"fence_refusals"`
	// The databases after the run: the workspace's messages and events on
	// each shard, and the catalogue's record.
	SourceMessages int64  `json:"source_messages"`
	SourceEvents   int64  `json:"source_events"`
	TargetMessages int64  `json:"target_messages"`
	TargetEvents   int64  `json:"target_events"`
	LoggedMessages int64  `json:"logged_messages"` // message.created events in the histories read over the API
	LoggedEvents   int64  `json:"logged_events"`
	Shard          string `json:"shard"`
	Status         string `json:"status"`
	// Problems are the run's failures besides the checker's.
	Problems []string `json:"problems"`
	Pass     bool     `json:"pass"`
}

func (c *MoveConfig) defaults() error {
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
		c.Nodes = 2
	}
	if c.Users <= 0 {
		c.Users = 60
	}
	if c.Channels <= 0 {
		c.Channels = 5
	}
	if c.Writers <= 0 {
		c.Writers = min(10, c.Users)
	}
	c.Writers = min(c.Writers, c.Users)
	if c.Rate <= 0 {
		c.Rate = 10
	}
	if c.Before <= 0 {
		c.Before = 10 * time.Second
	}
	if c.After <= 0 {
		c.After = 10 * time.Second
	}
	if c.Settle <= 0 {
		c.Settle = 60 * time.Second
	}
	if c.Out == "" {
		c.Out = "out/move"
	}
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

// refusedKey carries a post's *atomic.Int32 of 503 answers in its context.
type refusedKey struct{}

// refusalCounter counts 503 answers to the requests whose context carries
// a counter.
type refusalCounter struct{ next http.RoundTripper }

func (t refusalCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.next.RoundTrip(req)
	if err == nil && res.StatusCode == http.StatusServiceUnavailable {
		if n, ok := req.Context().Value(refusedKey{}).(*atomic.Int32); ok {
			n.Add(1)
		}
	}
	return res, err
}

// jsNATS is a NATS server with JetStream that the run hosts.
func startJSNATS(dir string) (*server.Server, string, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, "", err
	}
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: ports[0], NoSigs: true, NoLog: true,
		JetStream: true, StoreDir: dir})
	if err != nil {
		return nil, "", fmt.Errorf("nats: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, "", errors.New("nats not ready")
	}
	return srv, srv.ClientURL(), nil
}

// RunMove runs a move run and writes move.json (and the chaos checker's
// chaos.json and chaos.html) into cfg.Out. The error is for runs that
// could not be carried out; a run whose checks failed comes back with
// Pass false.
func RunMove(ctx context.Context, cfg MoveConfig) (*MoveReport, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, err
	}
	ccfg := &ChaosConfig{Exec: cfg.Exec, Postgres: cfg.Postgres, Nodes: cfg.Nodes, Scenario: "both", Users: cfg.Users,
		Channels: cfg.Channels, Writers: cfg.Writers, Rate: cfg.Rate, Settle: cfg.Settle, Out: cfg.Out,
		Stdout: cfg.Stdout, Log: cfg.Log, NATS: "own (JetStream)", Faults: []string{"move"}}
	r := &chaosRun{cfg: ccfg, start: time.Now()}

	var dbs []*chaosDB
	defer func() {
		for _, db := range dbs {
			if cfg.KeepDB {
				r.logf("kept database %s", db.name)
				db.admin.Close()
				continue
			}
			if err := db.drop(); err != nil {
				cfg.Log.Warn("move: drop database", "err", err)
			}
		}
	}()
	for range 2 {
		db, err := createChaosDB(ctx, cfg.Postgres)
		if err != nil {
			return nil, err
		}
		dbs = append(dbs, db)
	}
	control, second := dbs[0], dbs[1]
	r.db = control
	r.logf("control database (shard %s) %s, shard %s %s", moveSource, control.name, moveTarget, second.name)
	if err := r.seedDB(ctx); err != nil {
		return nil, err
	}
	ws := r.seed.WorkspaceID
	cli := func(args ...string) (string, error) {
		full := append(append(append([]string{}, cfg.Exec[1:]...), args...), "--db", control.direct,
			"--data", filepath.Join(cfg.Out, "cli-data"))
		cmd := exec.CommandContext(ctx, cfg.Exec[0], full...)
		cmd.Env = chaosEnv()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return string(out), fmt.Errorf("parley %s: %w\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out), nil
	}
	for _, args := range [][]string{
		{"shards", "add", moveSource, "--region", "local", "--dsn", control.direct},
		{"shards", "add", moveTarget, "--region", "local", "--dsn", second.direct},
		{"workspaces", "place", ws, "--region", "local", "--shard", moveSource},
	} {
		if _, err := cli(args...); err != nil {
			return nil, err
		}
	}

	srv, natsURL, err := startJSNATS(filepath.Join(cfg.Out, "jetstream"))
	if err != nil {
		return nil, err
	}
	defer func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	}()
	nodes, err := newChaosNodes(cfg.Exec, cfg.Nodes, control.direct, natsURL, cfg.Out)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		n.args = append(n.args, "--store-routing", "on", "--default-shard", moveSource, "--region", "local",
			"--data", filepath.Join(cfg.Out, fmt.Sprintf("data-%d", n.idx)))
	}
	r.nodes = nodes
	stop, err := startNodes(ctx, nodes)
	if err != nil {
		return nil, err
	}
	defer stop()
	r.logf("%d nodes ready (store routing on): %s", len(nodes), strings.Join(r.apiURLs(0), " "))

	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	hc := &http.Client{Timeout: 30 * time.Second, Transport: refusalCounter{tr}}
	r.writerClient = func(home int, token string) *client.Client {
		b := r.apiURLs(home)
		// A read-only window answers 503 with Retry-After: 1; 40 retries
		// ride out a window of well over half a minute.
		return client.New(b[0], client.WithToken(token), client.WithFallbackURLs(b[1:]...), client.WithHTTPClient(hc),
			client.WithRetry(40, 2*time.Second), client.WithLogger(cfg.Log))
	}

	readers, err := r.connectReaders(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, rd := range readers {
			rd.conn.Close()
		}
	}()
	r.logf("%d readers connected; %.0f posts/s, moving after %s", len(readers), cfg.Rate, cfg.Before)

	loadStart := time.Now()
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var wg sync.WaitGroup
	wg.Go(func() { r.writeLoad(loadCtx) })

	rep := &MoveReport{}
	moveErr := func() error {
		if !sleepCtx(ctx, cfg.Before) {
			return ctx.Err()
		}
		f := Fault{Kind: "move", Node: -1, Start: time.Now()}
		var stopped *chaosNode
		if cfg.StopNode {
			stopped = nodes[len(nodes)-1]
			if err := stopped.signal(syscall.SIGSTOP); err != nil {
				return err
			}
			r.logf("node %d stopped (SIGSTOP) for the move", stopped.idx)
		}
		out, err := r.runMove(ctx, cfg, control.direct, ws, stopped)
		// A PostgreSQL server shared with other work may run out of
		// connection slots (53300): the move aborts cleanly (the
		// workspace stays active on its source) and, as an operator
		// would, the run starts it again.
		for rep.MoveAttempts = 1; err != nil && strings.Contains(err.Error(), "SQLSTATE 53300") && rep.MoveAttempts < 4; rep.MoveAttempts++ {
			r.logf("the move aborted for want of database connections (53300); running it again")
			if !sleepCtx(ctx, 2*time.Second) {
				return ctx.Err()
			}
			out, err = r.runMove(ctx, cfg, control.direct, ws, nil)
		}
		f.End = time.Now()
		rep.MoveOutput = out
		if err != nil {
			return err
		}
		var sum shardmove.Summary
		if err := json.Unmarshal([]byte(out), &sum); err != nil {
			return fmt.Errorf("move output: %w\n%s", err, out)
		}
		rep.Move = &sum
		rep.ReadOnlyMS = float64(sum.ReadOnly) / 1e6
		f.Detail = fmt.Sprintf("read-only %.0fms", rep.ReadOnlyMS)
		r.mu.Lock()
		r.faults = append(r.faults, f)
		r.mu.Unlock()
		r.logf("moved %s → %s in %s; read-only window %.0f ms; %d rows copied, %d caught up",
			sum.From, sum.To, f.End.Sub(f.Start).Round(time.Millisecond), rep.ReadOnlyMS, sum.RowsCopied, sum.RowsCaughtUp)
		sleepCtx(ctx, cfg.After)
		return nil
	}()
	stopLoad()
	wg.Wait()
	loadEnd := time.Now()
	if moveErr != nil {
		return nil, fmt.Errorf("move: %w", moveErr)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	hist, err := r.readHistories(ctx)
	if err != nil {
		return nil, err
	}
	heads := map[string]int64{}
	for ch, evs := range hist {
		if len(evs) > 0 {
			heads[ch] = evs[len(evs)-1].Seq
		}
		for _, ev := range evs {
			rep.LoggedEvents++
			if ev.Type == parley.EventMessageCreated {
				rep.LoggedMessages++
			}
		}
	}
	settleStart := time.Now()
	r.waitCaughtUp(ctx, readers, heads)
	r.logf("readers settled in %s", time.Since(settleStart).Round(100*time.Millisecond))
	r.saveMetrics(ctx)
	rep.Chaos = r.check(readers, hist, loadStart, loadEnd)

	r.mu.Lock()
	for _, w := range r.writes {
		rep.Refusals += w.Refused
		if w.Refused > 0 {
			rep.PostsRefused++
			if w.Acked.IsZero() {
				rep.RefusedFailed++
			}
		}
	}
	r.mu.Unlock()
	rep.Reconnects = rep.Chaos.Client.Reconnects
	for _, n := range nodes {
		b, err := os.ReadFile(filepath.Join(cfg.Out, fmt.Sprintf("metrics-%d.txt", n.idx)))
		if err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("node %d's metrics: %v", n.idx, err))
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			var v float64
			name, val, ok := strings.Cut(line, " ")
			if !ok || strings.HasPrefix(line, "#") {
				continue
			}
			if _, err := fmt.Sscan(val, &v); err != nil {
				continue
			}
			switch {
			case strings.HasPrefix(name, "parley_http_requests_total{") && strings.Contains(name, `code="503"`) &&
				strings.Contains(name, `method="POST"`) && strings.Contains(name, "/messages"):
				rep.NodePost503 += int64(v)
			case name == "parley_shardstore_read_only_refusals_total":
				rep.RouterRefusals += int64(v)
			case name == `parley_store_write_retries_total{reason="serialization"}`:
				rep.SerializationRetries += int64(v)
			}
		}
	}
	rep.FenceRefusals = max(0, rep.NodePost503-rep.RouterRefusals)
	if err := rep.checkShards(ctx, control.direct, second.direct, ws, cli); err != nil {
		return nil, err
	}
	rep.Pass = rep.Chaos.Pass && len(rep.Problems) == 0
	if err := rep.Chaos.write(cfg.Out); err != nil {
		return rep, err
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(filepath.Join(cfg.Out, "move.json"), b, 0o644); err != nil {
		return rep, err
	}
	return rep, nil
}

// checkShards counts the workspace's rows on both shards and reads its
// catalogue record, and notes what is not as it must be.
func (rep *MoveReport) checkShards(ctx context.Context, source, target, ws string, cli func(...string) (string, error)) error {
	counts := func(dsn string) (msgs, evs int64, err error) {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			return 0, 0, err
		}
		defer db.Close()
		err = db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM messages WHERE workspace_id = $1),
			(SELECT COUNT(*) FROM events WHERE workspace_id = $1)`, ws).Scan(&msgs, &evs)
		if err != nil {
			return 0, 0, fmt.Errorf("count the workspace's rows: %w", err)
		}
		return msgs, evs, nil
	}
	var err error
	if rep.SourceMessages, rep.SourceEvents, err = counts(source); err != nil {
		return err
	}
	if rep.TargetMessages, rep.TargetEvents, err = counts(target); err != nil {
		return err
	}
	out, err := cli("workspaces", "show", ws, "--json")
	if err != nil {
		return err
	}
	var rec struct {
		ShardID string `json:"shard_id"`
		Status  string `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		return fmt.Errorf("workspaces show: %w\n%s", err, out)
	}
	rep.Shard, rep.Status = rec.ShardID, rec.Status
	if rep.Shard != moveTarget || rep.Status != "active" {
		rep.Problems = append(rep.Problems, fmt.Sprintf("the catalogue says %s on %s, want active on %s", rep.Status, rep.Shard, moveTarget))
	}
	if rep.SourceMessages != 0 || rep.SourceEvents != 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("the source still holds %d messages and %d events of the workspace", rep.SourceMessages, rep.SourceEvents))
	}
	if rep.TargetEvents < rep.LoggedEvents {
		rep.Problems = append(rep.Problems, fmt.Sprintf("the target holds %d events, fewer than the %d of the logs read over the API", rep.TargetEvents, rep.LoggedEvents))
	}
	if rep.Move != nil && rep.Move.Tables["messages"] > rep.TargetMessages {
		rep.Problems = append(rep.Problems, fmt.Sprintf("the target holds %d messages, fewer than the %d of the switch", rep.TargetMessages, rep.Move.Tables["messages"]))
	}
	if rep.RefusedFailed > 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d refused posts never succeeded", rep.RefusedFailed))
	}
	return nil
}

// runMove runs `parley workspaces move --json` and returns its stdout (the
// summary). Its progress (stderr) is read as it comes: when the move has
// switched, a stopped node is continued (and in any case once the command
// ends).
func (r *chaosRun) runMove(ctx context.Context, cfg MoveConfig, control, ws string, stopped *chaosNode) (string, error) {
	args := append(append([]string{}, cfg.Exec[1:]...), "workspaces", "move", ws, "--to", moveTarget, "--json",
		"--db", control, "--data", filepath.Join(cfg.Out, "cli-data"))
	cmd := exec.CommandContext(ctx, cfg.Exec[0], append(args, cfg.MoveArgs...)...)
	cmd.Env = chaosEnv()
	var stdout strings.Builder
	cmd.Stdout = &stdout
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	var progress strings.Builder
	var once sync.Once
	cont := func(why string) {
		once.Do(func() {
			if stopped == nil {
				return
			}
			if err := stopped.signal(syscall.SIGCONT); err != nil {
				r.logf("continue node %d: %v", stopped.idx, err)
				return
			}
			r.logf("node %d continued (%s)", stopped.idx, why)
		})
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			progress.WriteString(line + "\n")
			if strings.Contains(line, "  switch ") {
				cont("the move switched")
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	err := cmd.Run()
	pw.Close()
	<-scanned
	cont("the move command ended")
	_ = os.WriteFile(filepath.Join(cfg.Out, "move-progress.txt"), []byte(progress.String()), 0o644)
	if err != nil {
		return stdout.String(), fmt.Errorf("parley workspaces move: %w\n%s%s", err, stdout.String(), progress.String())
	}
	return stdout.String(), nil
}
