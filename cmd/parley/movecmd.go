package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"parley/shardmove"
	"parley/tenantdir"
)

// `parley workspaces move ID --to SHARD`: the online move (package
// shardmove), with a line of progress per step and a summary. Only flag
// parsing and printing live here.

type moveOptions struct {
	batch      int
	drain      time.Duration
	checksums  bool
	purgePause time.Duration
	noPurge    bool
}

func (m *moveOptions) register(fs *pflag.FlagSet) {
	fs.IntVar(&m.batch, "batch", shardmove.DefaultBatch, "rows per copy read, write and delete")
	fs.DurationVar(&m.drain, "drain", shardmove.DefaultDrain,
		"wait this long after the freeze before the final catch-up, so every node has heard of read_only (part of the read-only window)")
	fs.BoolVar(&m.checksums, "checksums", false, "also compare every table's checksum on both shards before the switch (reads the whole workspace inside the read-only window)")
	fs.DurationVar(&m.purgePause, "purge-pause", 0, "pause between the source purge's batches")
	fs.BoolVar(&m.noPurge, "no-wait-purge", false, "exit after the switch without waiting for the source's rows to be deleted (run the move again later to finish it)")
}

func runMove(ctx context.Context, w io.Writer, o *controlOptions, mo *moveOptions, c *tenantdir.Catalogue, ws, to string) error {
	if mo.batch <= 0 || mo.batch > 100_000 {
		return fmt.Errorf("--batch must be between 1 and 100000")
	}
	if mo.drain < 0 || mo.drain > time.Minute {
		return fmt.Errorf("--drain must be between 0 and 1m")
	}
	start := time.Now()
	pw := w
	if o.json {
		pw = os.Stderr // stdout is the summary's JSON; progress goes beside it
	}
	progress := func(p shardmove.Progress) {
		w := pw
		at := time.Since(start).Round(time.Millisecond)
		switch p.Phase {
		case "copy":
			fmt.Fprintf(w, "%8v  copy      %-20s %d rows so far\n", at, p.Table, p.Rows)
		case "catchup", "final":
			fmt.Fprintf(w, "%8v  %-9s round %d: %d events behind, %d rows written or deleted\n", at, p.Phase, p.Round, p.Lag, p.Rows)
		case "purge":
			fmt.Fprintf(w, "%8v  purge     %-20s %d rows deleted from the source %s\n", at, p.Table, p.Rows, p.Note)
		default:
			fmt.Fprintf(w, "%8v  %-9s %s\n", at, p.Phase, p.Note)
		}
	}
	drain := mo.drain
	if drain == 0 {
		drain = -1 // none
	}
	mv, err := shardmove.New(shardmove.Config{Catalogue: c, Batch: mo.batch, Drain: drain, Checksums: mo.checksums,
		PurgePause: mo.purgePause, Progress: progress, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	sum, err := mv.Run(ctx, ws, to)
	if err != nil {
		return err
	}
	var purgeErr error
	if !mo.noPurge {
		purgeErr = <-sum.Purged
	}
	if o.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(sum); err != nil {
			return err
		}
		return purgeErr
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nworkspace\t%s\nfrom → to\t%s → %s\n", sum.Workspace, sum.From, sum.To)
	if sum.From != sum.To {
		secs := sum.Copy.Seconds()
		rate := 0.0
		if secs > 0 {
			rate = float64(sum.RowsCopied) / secs
		}
		fmt.Fprintf(tw, "rows copied\t%d in %v (%.0f rows/s)\n", sum.RowsCopied, sum.Copy.Round(time.Millisecond), rate)
		fmt.Fprintf(tw, "catch-up\t%d rounds before the freeze, %d after; %d rows written or deleted\n", sum.Rounds, sum.FinalRounds, sum.RowsCaughtUp)
		fmt.Fprintf(tw, "read-only window\t%v\n", sum.ReadOnly.Round(time.Millisecond))
		tables := make([]string, 0, len(sum.Tables))
		for t, n := range sum.Tables {
			if n > 0 {
				tables = append(tables, t)
			}
		}
		sort.Strings(tables)
		for _, t := range tables {
			fmt.Fprintf(tw, "  %s\t%d rows, equal on both shards\n", t, sum.Tables[t])
		}
	}
	switch {
	case mo.noPurge:
		fmt.Fprintf(tw, "source\tbeing purged in the background (run the move again to finish it)\n")
	case purgeErr != nil:
		fmt.Fprintf(tw, "source\tNOT purged: %v\n", purgeErr)
	default:
		fmt.Fprintf(tw, "source\tpurged\n")
	}
	fmt.Fprintf(tw, "total\t%v\n", time.Since(start).Round(time.Millisecond))
	if err := tw.Flush(); err != nil {
		return err
	}
	return purgeErr
}
