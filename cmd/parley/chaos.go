package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/lesismal/nbio/logging"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"parley/loadtest"
)

// `parley chaos` runs nodes of this binary on a fresh PostgreSQL database,
// drives traffic through them while it kills, stops and starves them, and
// checks the histories (loadtest/chaos.go, docs/reliability.md). Only flag
// parsing lives here.

type chaosOptions struct {
	cfg      loadtest.ChaosConfig
	logLevel string
}

func (o *chaosOptions) register(fs *pflag.FlagSet) {
	c := &o.cfg
	fs.IntVar(&c.Nodes, "nodes", 3, "parley serve processes of this binary")
	fs.StringVar(&c.Postgres, "postgres", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "admin URL of the PostgreSQL server; each run creates (and drops) a database of its own there")
	fs.BoolVar(&c.KeepDB, "keep-db", false, "keep the run's database afterwards")
	fs.StringVar(&c.NATS, "nats", "", `NATS for the nodes: empty, their embedded NATS, clustered; "own", a NATS server the run hosts and restarts (fault natsrestart); or the URL of an external server (not restarted)`)
	fs.StringVar(&c.Scenario, "scenario", "both", "traffic: steady (posts over the channels), hot-channel (posts into #general) or both (alternating)")
	fs.IntVar(&c.Users, "users", 30, "seeded users, each with a gateway session")
	fs.IntVar(&c.Channels, "channels", 5, "channels besides #general")
	fs.IntVar(&c.Writers, "writers", 10, "users who also post")
	fs.Float64Var(&c.Rate, "rate", 20, "posts per second")
	fs.DurationVar(&c.Duration, "duration", 0, "length of the load with faults (default 1m)")
	fs.Uint64Var(&c.Seed, "seed", 0, "seed of the fault schedule (default: random, printed)")
	fs.StringSliceVar(&c.Faults, "faults", nil, "fault kinds to inject: kill, stop, pgterm, dbstall, natsrestart (default all; natsrestart only with --nats own)")
	fs.DurationVar(&c.GapMin, "gap-min", 0, "shortest quiet time between faults (default 5s)")
	fs.DurationVar(&c.GapMax, "gap-max", 0, "longest quiet time between faults (default 20s)")
	fs.DurationVar(&c.StopMin, "stop-min", 0, "shortest SIGSTOP (default 5s)")
	fs.DurationVar(&c.StopMax, "stop-max", 0, "longest SIGSTOP (default 20s)")
	fs.DurationVar(&c.Settle, "settle", 0, "longest wait after the load for every reader to reach the logs' heads (default 60s)")
	fs.StringVar(&c.Out, "out", "out/chaos", "directory for chaos.json, chaos.html and the nodes' logs")
	fs.StringVar(&o.logLevel, "log-level", "error", "log level of the clients: debug, info, warn or error")
}

func newChaosCmd() *cobra.Command {
	var o chaosOptions
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Run nodes on PostgreSQL under load and faults, and check that nothing committed is lost, duplicated or reordered",
		Long: "Start --nodes parley nodes of this binary on a fresh PostgreSQL database behind a fault proxy,\n" +
			"drive steady and hot-channel traffic through them, and meanwhile, at seeded random intervals,\n" +
			"kill -9 and restart a node, SIGSTOP one, terminate the database's backends or stall the\n" +
			"database. At the end every channel's log is read back and checked against what the writers\n" +
			"were told and the readers were handed (docs/reliability.md). The command fails on any lost,\n" +
			"undelivered, duplicated, out-of-order or mismatched message; recovered posts are allowed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, log, stop, err := startHarness(cmd, o.logLevel)
			if err != nil {
				return err
			}
			defer stop()
			o.cfg.Stdout = cmd.OutOrStdout()
			o.cfg.Log = log
			rep, err := loadtest.RunChaos(ctx, o.cfg)
			if err != nil {
				return err
			}
			c := rep.Counts
			fmt.Fprintf(cmd.OutOrStdout(), "chaos: seed %d, %d faults %v; %d posts, %d acknowledged, %d recovered, %d failed; %d receipts\n",
				rep.Seed, len(rep.Faults), rep.FaultCounts, c.Posts, c.Acked, c.Recovered, c.Failed, c.Receipts)
			for _, l := range rep.Latency {
				if l.Window == "all" || l.Window == "none" || len(l.Window) > 0 && l.Window[0] != '#' {
					fmt.Fprintf(cmd.OutOrStdout(), "  sent during %-11s n=%-7d commit→delivery p50 %6.1f ms p99 %7.1f ms max %7.1f ms; sent→delivery p99 %7.1f ms max %7.1f ms\n",
						l.Window, l.Count, l.P50, l.P99, l.Max, l.E2EP99, l.E2EMax)
				}
			}
			if !rep.Pass {
				return fmt.Errorf("chaos failed (seed %d): %d lost, %d undelivered, %d duplicated, %d out of order, %d mismatched, %d readers gave up; see %s/chaos.html",
					rep.Seed, c.Lost, c.Undelivered, c.Duplicated, c.OutOfOrder, c.Mismatched, c.GaveUp, o.cfg.Out)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "chaos: PASS (0 lost, 0 undelivered, 0 duplicated, 0 out of order)")
			return nil
		},
	}
	o.register(cmd.Flags())
	return cmd
}

// startHarness is the common start of the harness commands (chaos, move,
// fleet-storm): their clients' logger at logLevel on stderr, the client
// engine's start and stop lines quieted, and a context that ends on
// SIGINT or SIGTERM (stop releases it).
func startHarness(cmd *cobra.Command, logLevel string) (ctx context.Context, log *slog.Logger, stop context.CancelFunc, err error) {
	level, err := parseLevel(logLevel)
	if err != nil {
		return nil, nil, nil, err
	}
	log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
	logging.SetLevel(logging.LevelError)
	ctx, stop = signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	return ctx, log, stop, nil
}
