package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"parley/loadtest"
)

// `parley loadtest move` moves a workspace between two PostgreSQL shards
// with the real `parley workspaces move` while nodes of this binary, with
// store routing on, serve writers and gateway sessions, and checks the
// histories (loadtest/move.go, docs/directory.md "Moving a workspace").
// Only flag parsing and printing live here.

func newMoveLoadCmd() *cobra.Command {
	var c loadtest.MoveConfig
	var logLevel string
	cmd := &cobra.Command{
		Use:   "move",
		Short: "Move a busy workspace between shards under load, and check that no client saw an event lost, duplicated or reordered",
		Long: "Create a control database (shard local) and a second shard (s2) on --postgres, seed a workspace on\n" +
			"local, start --nodes parley nodes of this binary with store routing on (and a NATS with JetStream\n" +
			"for the tenant directory), connect a gateway session per user, post at --rate through the HTTP API,\n" +
			"and after --before run `parley workspaces move WS --to s2`. Posts refused in the read-only window\n" +
			"(503 + Retry-After) are retried with the same client_msg_id. After --after more load, every channel's\n" +
			"log is read back and checked against the writers and readers (the chaos checker), and the shards:\n" +
			"the workspace on s2 only, active. Writes move.json, chaos.json and chaos.html to --out.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, log, stop, err := startHarness(cmd, logLevel)
			if err != nil {
				return err
			}
			defer stop()
			c.Stdout = cmd.OutOrStdout()
			c.Log = log
			rep, err := loadtest.RunMove(ctx, c)
			if err != nil {
				return err
			}
			k := rep.Chaos.Counts
			fmt.Fprintf(cmd.OutOrStdout(), "move: read-only window %.0f ms; %d posts, %d acknowledged, %d failed; %d refused with 503 (%d answers), %d of them never acknowledged\n",
				rep.ReadOnlyMS, k.Posts, k.Acked, k.Failed, rep.PostsRefused, rep.Refusals, rep.RefusedFailed)
			fmt.Fprintf(cmd.OutOrStdout(), "move: %d receipts (%d live); lost %d, undelivered %d, duplicated %d, out of order %d, mismatched %d; reconnects %d\n",
				k.Receipts, k.Live, k.Lost, k.Undelivered, k.Duplicated, k.OutOfOrder, k.Mismatched, rep.Reconnects)
			fmt.Fprintf(cmd.OutOrStdout(), "move: catalogue %s on %s; source %d messages %d events; target %d messages %d events (logs %d events)\n",
				rep.Status, rep.Shard, rep.SourceMessages, rep.SourceEvents, rep.TargetMessages, rep.TargetEvents, rep.LoggedEvents)
			fmt.Fprintf(cmd.OutOrStdout(), "move: nodes answered %d posts 503: %d refused by a router on read_only, %d by the source's fence (%d serialization retries)\n",
				rep.NodePost503, rep.RouterRefusals, rep.FenceRefusals, rep.SerializationRetries)
			for _, p := range rep.Problems {
				fmt.Fprintf(cmd.OutOrStdout(), "move: PROBLEM %s\n", p)
			}
			if !rep.Pass {
				return fmt.Errorf("move run failed (%s)", c.Out)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&c.Nodes, "nodes", 2, "parley serve processes of this binary")
	fs.StringVar(&c.Postgres, "postgres", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "admin URL of the PostgreSQL server; the run creates (and drops) two databases there")
	fs.BoolVar(&c.KeepDB, "keep-db", false, "keep the run's databases afterwards")
	fs.IntVar(&c.Users, "users", 60, "seeded users, each with a gateway session")
	fs.IntVar(&c.Channels, "channels", 5, "channels besides #general")
	fs.IntVar(&c.Writers, "writers", 10, "users who also post")
	fs.Float64Var(&c.Rate, "rate", 10, "posts per second")
	fs.DurationVar(&c.Before, "before", 0, "load before the move starts (default 10s)")
	fs.DurationVar(&c.After, "after", 0, "load after the move command returned (default 10s)")
	fs.BoolVar(&c.StopNode, "stop-node", false, "SIGSTOP the last node just before the move and continue it the moment the move has switched: a node that never heard of the freeze handles its queued posts on its old record")
	fs.StringSliceVar(&c.MoveArgs, "move-args", nil, "extra flags of parley workspaces move, comma-separated (e.g. --drain=200ms)")
	fs.DurationVar(&c.Settle, "settle", 0, "longest wait after the load for every reader to reach the logs' heads (default 60s)")
	fs.StringVar(&c.Out, "out", "out/move", "directory for move.json, chaos.json, chaos.html and the nodes' logs")
	fs.StringVar(&logLevel, "log-level", "error", "log level of the clients: debug, info, warn or error")
	return cmd
}
