package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/lesismal/nbio/logging"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"parley/loadtest"
)

// `parley loadtest` drives a running server with a scenario and reports
// (package loadtest). Only flag parsing lives here.

type loadtestOptions struct {
	cfg       loadtest.Config
	sourceIPs string
	logLevel  string
}

func (o *loadtestOptions) register(fs *pflag.FlagSet) {
	c := &o.cfg
	fs.StringVar(&c.URL, "url", "http://127.0.0.1:8080", "base URL of the running server")
	fs.StringVar(&c.Scenario, "scenario", "", "scenario: "+strings.Join(loadtest.Scenarios, ", "))
	fs.IntVar(&c.Users, "users", 0, "users taking part (API setup creates them; with --seed, the first N of the seed; 0: all of the seed)")
	fs.IntVar(&c.Channels, "channels", 0, "API setup: public channels besides #general, joined round-robin")
	fs.StringVar(&c.Seed, "seed", "", "JSON written by `parley seed --out` (users and tokens) instead of setting up through the API")
	fs.Float64Var(&c.ConnectRate, "connect-rate", 200, "sessions booted and connected per second")
	fs.Float64Var(&c.Rate, "rate", 0, "messages/s (big-team-boot, reconnect-storm, hot-channel), joins/s (join-spike), actions/s (steady) or actions/s of each phase (audience); default by scenario: 5, 5, 100, 200, 50, 50")
	fs.IntVar(&c.Posters, "posters", 10, "users who post the messages")
	fs.IntVar(&c.MaxInFlight, "max-in-flight", 256, "actions of one schedule running at once per process; an action due beyond it starts late (counted)")
	fs.IntVar(&c.ServerPID, "server-pid", 0, "the server's process id on this machine: report its cores beside the load generator's")
	fs.IntVar(&c.Watchers, "watchers", 0, "join-spike: members of the channel before the spike (default users/10, at most 50)")
	fs.Float64Var(&c.OtherRate, "other-rate", 0, "join-spike, hot-channel: messages/s posted meanwhile into the other channels, whose delivery latency is reported (default 2 for join-spike, 0 for hot-channel)")
	fs.IntVar(&c.Viewers, "viewers", 0, "hot-channel: users with #general in focus, spread evenly; the others focus it only after the load (default users/10)")
	fs.BoolVar(&c.Baseline, "baseline", false, "hot-channel: post nothing into #general, only --other-rate into the other channels (their baseline latency)")
	fs.IntVar(&c.View, "view", 0, "audience: users in each session's view (presence_sub), four fifths recent posters of its channel and one fifth DM partners (default 50)")
	fs.IntVar(&c.Admins, "admins", 0, "audience: online users promoted to workspace admin (default 5)")
	fs.IntVar(&c.StatusChanges, "status-changes", 0, "audience: status changes, half by online and half by offline users (default 100)")
	fs.IntVar(&c.Joins, "joins", 0, "audience: joins into one public channel by users not in it, one in five online (default 1000)")
	fs.IntVar(&c.WorkspaceJoins, "workspace-joins", 0, "audience: new users accepting an invite (default 500)")
	fs.DurationVar(&c.Duration, "duration", 0, "length of the load phase (default 30s)")
	fs.DurationVar(&c.StormAfter, "storm-after", 0, "reconnect-storm: time into the load phase when every socket drops (default min(5s, duration/3))")
	fs.IntVar(&c.TextBytes, "text", 200, "bytes of text per message")
	fs.DurationVar(&c.CatchUp, "catch-up", 0, "longest final catch-up window before losses are counted (default 30s)")
	fs.StringVar(&o.sourceIPs, "source-ips", "", "local addresses to spread connections over, such as 127.0.0.1-127.0.0.8 (default: the system's choice)")
	fs.IntVar(&c.Procs, "procs", 1, "worker processes to spread the users over (each holds ~20,000 open files)")
	fs.StringVar(&c.Out, "out", "", "directory for result.json and report.html")
	fs.StringVar(&o.logLevel, "log-level", "warn", "log level of the clients: debug, info, warn or error")
	fs.StringVar(&c.WorkerPlan, "worker-plan", "", "internal: run as a worker on this plan")
	fs.IntVar(&c.WorkerPart, "worker-part", 0, "internal: this worker's part")
	_ = fs.MarkHidden("worker-plan")
	_ = fs.MarkHidden("worker-part")
}

func newLoadtestCmd() *cobra.Command {
	var o loadtestOptions
	cmd := &cobra.Command{
		Use:   "loadtest",
		Short: "Drive a running server with a load scenario and report losses, latency and rates",
		Long: "Run a load scenario against a running Parley (--url): big-team-boot, reconnect-storm,\n" +
			"hot-channel, join-spike, steady or audience (docs/loadtest.md). Every received durable event is\n" +
			"checked per channel: lost, duplicated and out-of-order events must be zero, or the\n" +
			"command fails. A progress line goes to stderr every second; the summary to stdout;\n" +
			"result.json and report.html to --out.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level, err := parseLevel(o.logLevel)
			if err != nil {
				return err
			}
			if o.cfg.SourceIPs, err = loadtest.ParseSourceIPs(o.sourceIPs); err != nil {
				return fmt.Errorf("--source-ips: %w", err)
			}
			o.cfg.Stdout, o.cfg.Progress = cmd.OutOrStdout(), cmd.ErrOrStderr()
			o.cfg.Log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			if o.cfg.Procs > 1 && o.cfg.WorkerPlan == "" {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("--procs: %w", err)
				}
				o.cfg.Exec = []string{exe, "loadtest"}
				cmd.Flags().Visit(func(f *pflag.Flag) {
					o.cfg.Exec = append(o.cfg.Exec, "--"+f.Name+"="+f.Value.String())
				})
			}
			// The client engine's start and stop lines are noise here.
			logging.SetLevel(logging.LevelError)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := loadtest.Run(ctx, o.cfg)
			if err != nil {
				return err
			}
			if res != nil && !res.Pass {
				stale := ""
				if res.Audience != nil {
					stale = fmt.Sprintf(", %d stale entries", res.Audience.StaleEntries)
				}
				return fmt.Errorf("loadtest failed: %d lost, %d duplicated, %d out of order, %d of %d users connected%s",
					res.Lost, res.Duplicated, res.OutOfOrder, res.Connected, res.Users, stale)
			}
			return nil
		},
	}
	o.register(cmd.Flags())
	cmd.AddCommand(newSoakCmd(), newFleetStormCmd(), newMoveLoadCmd())
	return cmd
}
