// Package loadtest drives a running Parley server the way a crowd of real
// clients would, and measures what it does: `parley loadtest`. A setup
// phase makes a workspace with users and channels (through the API, or
// from the JSON of `parley seed` for large sizes); then a scenario runs —
// big-team-boot, reconnect-storm, hot-channel, join-spike or steady — with
// every user booting and holding a gateway session through package client.
//
// Every durable event each user receives is checked against its channel's
// seq: duplicates and out-of-order arrivals are counted as they happen,
// and after a final catch-up window each channel's head is read from the
// server and every seq a user was owed but never got is counted as lost.
// Those three figures must be zero. Latency is post → delivery (the send
// time is in the message text; sender and receivers share the machine's
// clock), kept per second. The results are a summary table, a JSON file
// and a self-contained HTML report with SVG plots.
//
// Connections can leave from several 127.0.0.x addresses and be spread
// over several worker processes (the parent re-executes itself). The
// package speaks only the public API and gateway protocol, through package
// client; it must not import the server's packages.
package loadtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The scenarios.
const (
	ScenarioBigTeamBoot    = "big-team-boot"
	ScenarioReconnectStorm = "reconnect-storm"
	ScenarioHotChannel     = "hot-channel"
	ScenarioJoinSpike      = "join-spike"
	ScenarioSteady         = "steady"
	ScenarioAudience       = "audience"
)

// Scenarios lists them, for help texts.
var Scenarios = []string{ScenarioBigTeamBoot, ScenarioReconnectStorm, ScenarioHotChannel, ScenarioJoinSpike, ScenarioSteady, ScenarioAudience}

// Config is one run. Zero values are the documented defaults (see
// Defaults).
type Config struct {
	URL      string // base URL of the server, http://127.0.0.1:8080
	Scenario string

	Users    int    // users taking part; API setup creates this many, a seed supplies them (0: all of the seed)
	Channels int    // API setup: public channels besides #general, joined round-robin
	Seed     string // JSON of `parley seed --out` (its users and tokens) instead of API setup

	ConnectRate float64 // sessions booted and connected per second
	Rate        float64 // messages/s (big-team-boot, reconnect-storm, hot-channel), joins/s (join-spike), actions/s (steady)
	Posters     int     // users who post the messages
	// MaxInFlight caps the actions of one schedule running at once in a
	// process (posts, joins, connects…); an action due beyond it starts
	// late and is counted (0: 256).
	MaxInFlight int
	// ServerPID, when set, is the server's process on this machine: its
	// cores over the load phase and the drain are reported beside the
	// generator's (read from /proc/<pid>/stat by worker part 0 only).
	ServerPID int
	Watchers  int // join-spike: members of the channel before the spike
	// OtherRate (join-spike, hot-channel): messages a second posted
	// meanwhile into the other channels, whose delivery latency is
	// "delivery" (join-spike) or "other_delivery" (hot-channel).
	OtherRate float64
	// Viewers (hot-channel): users who have #general in focus (spread
	// evenly over the users); the others do not focus it until the load
	// is over (0: a tenth of the users).
	Viewers int
	// Baseline (hot-channel): post nothing into #general, only OtherRate
	// into the other channels: the other channels' latency without the
	// hot channel.
	Baseline bool
	// The audience scenario: users in each session's view, workspace
	// admins among the online users, and the actions of each phase.
	View           int
	Admins         int
	StatusChanges  int
	Joins          int
	WorkspaceJoins int
	Duration       time.Duration // the load phase
	StormAfter     time.Duration // reconnect-storm: into the load phase, when every socket drops
	TextBytes      int           // message size
	CatchUp        time.Duration // longest final catch-up window before counting losses

	SourceIPs []netip.Addr // local addresses to spread sockets over (none: the system's choice)
	Procs     int          // worker processes (1: all in this one)
	Out       string       // directory for result.json and report.html ("" : none)

	Stdout   io.Writer    // the summary table
	Progress io.Writer    // the live progress line (stderr)
	Log      *slog.Logger // warnings of the clients

	// Worker mode (set by the parent on the command line of its workers).
	WorkerPlan string // plan file: run as worker WorkerPart of Procs
	WorkerPart int
	// Exec is the command that starts a worker: the program and its
	// arguments up to the flags (the parent appends the worker flags).
	Exec []string
}

// Defaults fills in the zero values.
func (c *Config) Defaults() {
	if c.ConnectRate <= 0 {
		c.ConnectRate = 200
	}
	if c.Posters <= 0 {
		c.Posters = 10
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 256
	}
	if c.Duration <= 0 {
		c.Duration = 30 * time.Second
	}
	if c.StormAfter <= 0 {
		c.StormAfter = min(5*time.Second, c.Duration/3)
	}
	if c.TextBytes <= 0 {
		c.TextBytes = 200
	}
	if c.CatchUp <= 0 {
		c.CatchUp = 30 * time.Second
	}
	if c.Procs <= 0 {
		c.Procs = 1
	}
	if c.Watchers <= 0 && c.Users > 0 { // with a seed, once Users is known
		c.Watchers = max(1, min(50, c.Users/10))
	}
	if c.Viewers <= 0 && c.Users > 0 {
		c.Viewers = max(1, c.Users/10)
	}
	if c.Rate <= 0 {
		switch c.Scenario {
		case ScenarioHotChannel:
			c.Rate = 100
		case ScenarioJoinSpike:
			c.Rate = 200
		case ScenarioSteady, ScenarioAudience:
			c.Rate = 50
		default:
			c.Rate = 5
		}
	}
	if c.Scenario == ScenarioJoinSpike && c.OtherRate == 0 {
		c.OtherRate = 2
	}
	if c.Scenario == ScenarioAudience {
		c.View = cmp.Or(c.View, 50)
		c.Admins = cmp.Or(c.Admins, 5)
		c.StatusChanges = cmp.Or(c.StatusChanges, 100)
		c.Joins = cmp.Or(c.Joins, 1000)
		c.WorkspaceJoins = cmp.Or(c.WorkspaceJoins, 500)
	}
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
}

// Validate checks the config before anything runs.
func (c *Config) Validate() error {
	if !strings.HasPrefix(c.URL, "http://") && !strings.HasPrefix(c.URL, "https://") {
		return fmt.Errorf("--url %q: want http://host:port", c.URL)
	}
	known := false
	for _, s := range Scenarios {
		known = known || s == c.Scenario
	}
	if !known {
		return fmt.Errorf("--scenario %q: want one of %s", c.Scenario, strings.Join(Scenarios, ", "))
	}
	if c.Seed == "" && c.WorkerPlan == "" && c.Users < 1 {
		return errors.New("--users must be at least 1 (or give --seed)")
	}
	if c.Users < 0 || c.Channels < 0 || c.Procs < 1 || c.Procs > 64 {
		return errors.New("--users and --channels must not be negative; --procs must be 1 to 64")
	}
	if c.Scenario == ScenarioJoinSpike && c.Users > 0 && c.Watchers >= c.Users {
		return fmt.Errorf("join-spike: --watchers (%d) must be fewer than --users (%d)", c.Watchers, c.Users)
	}
	if c.Viewers < 0 {
		return errors.New("--viewers must not be negative")
	}
	if c.Baseline && c.Scenario != ScenarioHotChannel {
		return errors.New("--baseline is for hot-channel")
	}
	if c.Scenario == ScenarioAudience && c.Procs != 1 {
		return errors.New("audience: runs in one process (--procs 1): it follows every session's view")
	}
	if c.View < 0 || c.Admins < 0 || c.StatusChanges < 0 || c.Joins < 0 || c.WorkspaceJoins < 0 || c.OtherRate < 0 {
		return errors.New("--view, --admins, --status-changes, --joins, --workspace-joins and --other-rate must not be negative")
	}
	if c.View > 500 {
		return errors.New("--view: at most 500 users (the gateway keeps the first 500 of a presence_sub)")
	}
	if len(c.SourceIPs) > 0 && strings.HasPrefix(c.URL, "https://") {
		return errors.New("--source-ips works with http:// (ws://) URLs only")
	}
	return nil
}

// Run runs the whole load test: setup, the scenario (in this process or in
// workers), and the reports. It returns the result; the caller decides the
// exit status from Result.Pass.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.WorkerPlan != "" {
		return nil, runWorker(ctx, &cfg)
	}
	hcs := httpClients(cfg.SourceIPs)
	var plan *Plan
	var err error
	setupStart := time.Now()
	if cfg.Seed != "" {
		plan, err = planFromSeed(cfg.Seed)
		if err == nil && cfg.Users > len(plan.Users) {
			err = fmt.Errorf("--users %d: the seed has only %d users", cfg.Users, len(plan.Users))
		}
	} else {
		plan, err = setupAPI(ctx, &cfg, hcs)
	}
	if err != nil {
		return nil, err
	}
	plan.BaseURL = cfg.URL
	if cfg.Users == 0 {
		cfg.Users = len(plan.Users)
		cfg.Defaults()
		if cfg.Scenario == ScenarioJoinSpike && cfg.Watchers >= cfg.Users {
			return nil, fmt.Errorf("join-spike: --watchers (%d) must be fewer than the users (%d)", cfg.Watchers, cfg.Users)
		}
	}
	if err := prepareScenario(ctx, &cfg, plan, hcs); err != nil {
		return nil, err
	}
	setup := time.Since(setupStart)
	fmt.Fprintf(cfg.Progress, "setup: %d users, %d channels (%s) in %.1f s\n", cfg.Users, len(plan.Channels),
		map[bool]string{true: "from the seed", false: "through the API"}[cfg.Seed != ""], setup.Seconds())
	plan.Start = time.Now()

	var parts []*Part
	if cfg.Procs == 1 {
		r := newRunner(&cfg, plan, 0, 1, func(string) error { return nil })
		stop := startProgress(&cfg, plan.Start, func() []Progress { return []Progress{r.progress()} })
		p, err := r.run(ctx)
		stop()
		if err != nil {
			return nil, err
		}
		parts = []*Part{p}
	} else {
		if parts, err = runWorkers(ctx, &cfg, plan); err != nil {
			return nil, err
		}
	}
	res := buildResult(&cfg, plan, parts, setup)
	res.Print(cfg.Stdout)
	if cfg.Out != "" {
		if err := res.Write(cfg.Out); err != nil {
			return res, err
		}
		fmt.Fprintf(cfg.Stdout, "report: %s, %s\n", filepath.Join(cfg.Out, "result.json"), filepath.Join(cfg.Out, "report.html"))
	}
	return res, nil
}
