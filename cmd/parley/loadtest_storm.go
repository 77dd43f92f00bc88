package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"parley/loadtest"
)

// `parley loadtest fleet-storm` starts nodes of this binary on a fresh
// PostgreSQL database, drops every session of every node at once and
// restarts the nodes one by one (loadtest/storm.go, docs/reliability.md).
// Only flag parsing lives here.

func newFleetStormCmd() *cobra.Command {
	var c loadtest.StormConfig
	var logLevel string
	cmd := &cobra.Command{
		Use:   "fleet-storm",
		Short: "Drop every session of every node at once, and restart every node in turn, and measure the way back",
		Long: "Start --nodes parley nodes of this binary on a fresh PostgreSQL database (embedded NATS,\n" +
			"clustered), connect one gateway session per seeded user spread over them, post all along, then\n" +
			"cut every socket at once from the client side and (--rolling-restart) stop each node with SIGTERM\n" +
			"and start it again. Each phase is measured against a steady window just before it: sessions back\n" +
			"and when, the database's transactions a second, and where the resumes were served from (the\n" +
			"gateways' parley_gateway_resume_sources_total). Fails unless every session came back and no\n" +
			"event was lost, duplicated or reordered; the issue's targets are reported beside the figures.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, log, stop, err := startHarness(cmd, logLevel)
			if err != nil {
				return err
			}
			defer stop()
			c.Progress = cmd.ErrOrStderr()
			c.Log = log
			rep, err := loadtest.RunStorm(ctx, c)
			if rep != nil {
				rep.Print(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			if !rep.Pass {
				return fmt.Errorf("fleet-storm failed: %d lost, %d duplicated, %d out of order, %d sessions short of a head, or sessions not back (%s)",
					rep.Lost, rep.Duplicated, rep.OutOfOrder, rep.NotCaught, c.Out)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&c.Nodes, "nodes", 3, "parley serve processes of this binary")
	fs.StringVar(&c.Postgres, "postgres", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "admin URL of the PostgreSQL server; each run creates (and drops) a database of its own there")
	fs.BoolVar(&c.KeepDB, "keep-db", false, "keep the run's database afterwards")
	fs.IntVar(&c.Sessions, "sessions", 300, "seeded users, one gateway session each, spread evenly over the nodes")
	fs.IntVar(&c.Channels, "channels", 10, "channels besides #general")
	fs.IntVar(&c.Writers, "writers", 10, "users who also post")
	fs.Float64Var(&c.Rate, "rate", 10, "posts a second all along, half into #general")
	fs.DurationVar(&c.Window, "window", 0, "steady window before each phase, and the shortest storm window (default 15s)")
	fs.BoolVar(&c.Rolling, "rolling-restart", false, "after the drop, restart every node in turn with SIGTERM")
	fs.BoolVar(&c.NoDrop, "no-drop", false, "skip the all-at-once drop (with --rolling-restart)")
	fs.DurationVar(&c.BackWithin, "back-within", 0, "the target: sessions back within this (default 60s)")
	fs.DurationVar(&c.Settle, "settle", 0, "longest wait at the end for every session to reach the heads (default 60s)")
	fs.IntVar(&c.Connect, "connect", 50, "sessions connecting at once at the start")
	fs.StringVar(&c.Out, "out", "out/fleet-storm", "directory for fleet-storm.json and the nodes' logs")
	fs.StringVar(&logLevel, "log-level", "error", "log level of the clients: debug, info, warn or error")
	return cmd
}
