package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"parley/loadtest"
)

// `parley loadtest soak` samples a running server's admin listener while
// load runs against it (loadtest/soak.go, loadtest/run-soak.sh, `make
// soak`). Only flag parsing lives here.

func newSoakCmd() *cobra.Command {
	var c loadtest.SoakConfig
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "Sample a server's goroutines, heap, RSS, open files and database connections over a long run, and judge whether they stayed flat",
		Long: "Read the server's admin listener (--admin) every --every for --duration: goroutines, heap in use,\n" +
			"RSS and open files from /metrics, and with --db (the URL of the server's PostgreSQL database) its\n" +
			"connections from pg_stat_activity. Heap and goroutine profiles are saved at the start and the end.\n" +
			"The series go to soak.csv and soak.json in --out; the verdict compares the median of the last\n" +
			"10/60 of the run with that of 5/60–15/60 (minutes 50–60 against 5–15 of an hour), and the\n" +
			"command fails if a series rose beyond its threshold. Run the load separately (run-soak.sh).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c.Progress = cmd.ErrOrStderr()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := loadtest.RunSoak(ctx, c)
			if res != nil {
				res.Print(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			if !res.Verdict.Flat {
				return fmt.Errorf("soak: not flat (%s)", c.Out)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&c.Admin, "admin", "http://127.0.0.1:9091", "the server's admin listener (/metrics, /debug/pprof/)")
	fs.StringVar(&c.DB, "db", "", "URL of the server's PostgreSQL database: its connections from pg_stat_activity")
	fs.DurationVar(&c.Every, "every", 0, "time between samples (default 30s)")
	fs.DurationVar(&c.Duration, "duration", 0, "how long to sample (default 1h)")
	fs.StringVar(&c.Out, "out", "out/soak", "directory for soak.csv, soak.json and the profiles")
	return cmd
}
