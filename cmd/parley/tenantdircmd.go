package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"parley"
	"parley/tenantdir"
)

// `parley shards …` and `parley workspaces …` edit the tenant directory's
// catalogue (docs/directory.md) in the control database directly. Each
// change is committed with its change-log entry; the relay of any running
// node publishes it within its interval (250 ms), and every node's
// directory client hears of it from there. Only flag parsing and printing
// live here.

// controlOptions say which control database the commands open, as `parley
// serve` does: --control-db, else --db, else <data>/control.db.
type controlOptions struct {
	dataDir, db, controlDB string
	json                   bool
}

func (o *controlOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.dataDir, "data", "./data", "data directory of the node (SQLite control database: <data>/control.db)")
	fs.StringVar(&o.db, "db", "", "the node's PostgreSQL URL (its control tables live there unless --control-db is given)")
	fs.StringVar(&o.controlDB, "control-db", "", "PostgreSQL URL of the control database")
	fs.BoolVar(&o.json, "json", false, "print JSON")
}

func (o *controlOptions) open(cmd *cobra.Command, lookupEnv func(string) (string, bool)) (*tenantdir.Catalogue, error) {
	if err := applyEnv(cmd.Flags(), lookupEnv); err != nil {
		return nil, err
	}
	cfg := catalogueConfig(o.controlDB, o.db, o.dataDir)
	if cfg.Path != "" {
		if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
	}
	return tenantdir.OpenCatalogue(cmd.Context(), cfg)
}

func newShardsCmd(lookupEnv func(string) (string, bool)) *cobra.Command {
	var o controlOptions
	cmd := &cobra.Command{Use: "shards", Short: "Add, list, drain and re-point the tenant directory's shards"}
	o.register(cmd.PersistentFlags())

	var add tenantdir.Shard
	addCmd := &cobra.Command{
		Use:   "add ID --region REGION [--dsn URL] [--capacity N]",
		Short: "Add an active shard (a database that holds workspaces)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withCatalogue(cmd, &o, lookupEnv, func(ctx context.Context, c *tenantdir.Catalogue) error {
				add.ID = args[0]
				s, err := c.AddShard(ctx, add)
				if err != nil {
					return err
				}
				return printShards(cmd.OutOrStdout(), &o, []tenantdir.Shard{s})
			})
		},
	}
	addCmd.Flags().StringVar(&add.Region, "region", "", "the shard's region (required)")
	addCmd.Flags().StringVar(&add.DSN, "dsn", "", "URL of the shard's database (empty: the node's own database)")
	addCmd.Flags().IntVar(&add.Capacity, "capacity", 1000, "workspaces the shard is meant to hold (placement weighs load by it)")

	listCmd := &cobra.Command{
		Use:   "list",
		Short: "List the shards with their workspace counts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withCatalogue(cmd, &o, lookupEnv, func(ctx context.Context, c *tenantdir.Catalogue) error {
				shards, err := c.ListShards(ctx)
				if err != nil {
					return err
				}
				return printShards(cmd.OutOrStdout(), &o, shards)
			})
		},
	}
	drainCmd := &cobra.Command{
		Use:   "drain ID",
		Short: "Stop placing new workspaces on a shard (its workspaces stay until moved)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withCatalogue(cmd, &o, lookupEnv, func(ctx context.Context, c *tenantdir.Catalogue) error {
				s, err := c.DrainShard(ctx, args[0])
				if err != nil {
					return err
				}
				return printShards(cmd.OutOrStdout(), &o, []tenantdir.Shard{s})
			})
		},
	}
	var setDSN string
	setCmd := &cobra.Command{
		Use:   "set ID --dsn URL",
		Short: "Change where a shard's database is; nodes switch to it without a restart",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("dsn") {
				return errors.New("shards set: --dsn is required")
			}
			return withCatalogue(cmd, &o, lookupEnv, func(ctx context.Context, c *tenantdir.Catalogue) error {
				s, err := c.SetShardDSN(ctx, args[0], setDSN)
				if err != nil {
					return err
				}
				return printShards(cmd.OutOrStdout(), &o, []tenantdir.Shard{s})
			})
		},
	}
	setCmd.Flags().StringVar(&setDSN, "dsn", "", "new URL of the shard's database (empty: the node's own database)")
	cmd.AddCommand(addCmd, listCmd, drainCmd, setCmd)
	return cmd
}

func newWorkspacesCmd(lookupEnv func(string) (string, bool)) *cobra.Command {
	var o controlOptions
	cmd := &cobra.Command{Use: "workspaces", Short: "Place, move and show workspaces in the tenant directory"}
	o.register(cmd.PersistentFlags())

	var (
		place            tenantdir.Placement
		limits, features []string
	)
	placeCmd := &cobra.Command{
		Use:   "place ID --region REGION [--shard SHARD] [--slug SLUG] [--limit KEY=N]… [--feature KEY=BOOL]…",
		Short: "Place a new workspace on the least loaded active shard of its region (or the one named)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if place.Limits, place.Features, err = parseOverrides(limits, features); err != nil {
				return err
			}
			return withCatalogue(cmd, &o, lookupEnv, func(ctx context.Context, c *tenantdir.Catalogue) error {
				place.WorkspaceID = args[0]
				r, err := c.Place(ctx, place)
				if err != nil {
					return err
				}
				return printRecord(cmd.OutOrStdout(), &o, r, place.Slug)
			})
		},
	}
	placeCmd.Flags().StringVar(&place.Region, "region", "", "the workspace's region (required)")
	placeCmd.Flags().StringVar(&place.Shard, "shard", "", "put it on this shard instead of letting the policy choose")
	placeCmd.Flags().StringVar(&place.Slug, "slug", "", "reserve the workspace's slug (refused if another placed workspace holds it)")
	placeCmd.Flags().StringArrayVar(&limits, "limit", nil, "a limit override, KEY=N (repeatable)")
	placeCmd.Flags().StringArrayVar(&features, "feature", nil, "a feature override, KEY=true|false (repeatable)")

	var to, step string
	var mo moveOptions
	moveCmd := &cobra.Command{
		Use:   "move ID --to SHARD [--step move|all|begin|freeze|complete|abort]",
		Short: "Move a workspace, data and all, to another PostgreSQL shard of its region, online",
		Long: "Move a workspace to another shard of its region (docs/directory.md, \"Moving a workspace\"): copy it from a\n" +
			"snapshot of its shard while it keeps serving, catch up from the per-channel event log, make it read-only\n" +
			"for a moment, catch up a last time, check both shards agree, switch the catalogue to the target, and\n" +
			"delete it from the source. Any failure before the switch leaves it active on its source. Run it again after\n" +
			"an interruption: it resumes safely. Both shards need DSNs.\n\n" +
			"--step walks the catalogue only, without touching data: begin (active -> moving, to --to), freeze\n" +
			"(-> read_only), complete (-> active on the target), abort (-> active on the source), or all (begin, freeze\n" +
			"and complete) for shards that hold no data yet.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ws := args[0]
			return withCatalogue(cmd, &o, lookupEnv, func(ctx context.Context, c *tenantdir.Catalogue) error {
				if step == "move" {
					if to == "" {
						return fmt.Errorf("--to is required")
					}
					return runMove(ctx, cmd.OutOrStdout(), &o, &mo, c, ws, to)
				}
				var steps []func() (tenantdir.Record, error)
				begin := func() (tenantdir.Record, error) { return c.BeginMove(ctx, ws, to) }
				freeze := func() (tenantdir.Record, error) { return c.Freeze(ctx, ws) }
				complete := func() (tenantdir.Record, error) { return c.CompleteMove(ctx, ws) }
				switch step {
				case "all":
					steps = append(steps, begin, freeze, complete)
				case "begin":
					steps = append(steps, begin)
				case "freeze":
					steps = append(steps, freeze)
				case "complete":
					steps = append(steps, complete)
				case "abort":
					steps = append(steps, func() (tenantdir.Record, error) { return c.AbortMove(ctx, ws) })
				default:
					return fmt.Errorf("--step must be move, all, begin, freeze, complete or abort, not %q", step)
				}
				if (step == "all" || step == "begin") && to == "" {
					return fmt.Errorf("--to is required to begin a move")
				}
				var r tenantdir.Record
				for _, s := range steps {
					var err error
					if r, err = s(); err != nil {
						return err
					}
				}
				return printEntry(ctx, cmd.OutOrStdout(), &o, c, r)
			})
		},
	}
	moveCmd.Flags().StringVar(&to, "to", "", "the target shard")
	moveCmd.Flags().StringVar(&step, "step", "move", "move (the whole online move), or a catalogue step only: all, begin, freeze, complete, abort")
	mo.register(moveCmd.Flags())

	showCmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a workspace's entry in the catalogue",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withCatalogue(cmd, &o, lookupEnv, func(ctx context.Context, c *tenantdir.Catalogue) error {
				r, err := c.Workspace(ctx, args[0])
				if err != nil {
					return err
				}
				return printEntry(ctx, cmd.OutOrStdout(), &o, c, r)
			})
		},
	}

	var setLimits, setFeatures []string
	setCmd := &cobra.Command{
		Use:   "set ID [--limit KEY=N]… [--feature KEY=BOOL]…",
		Short: "Replace a workspace's limit or feature overrides (a set given replaces that set)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			lim, fea, err := parseOverrides(setLimits, setFeatures)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("limit") && lim == nil {
				lim = map[string]int64{}
			}
			if cmd.Flags().Changed("feature") && fea == nil {
				fea = map[string]bool{}
			}
			return withCatalogue(cmd, &o, lookupEnv, func(ctx context.Context, c *tenantdir.Catalogue) error {
				r, err := c.SetOverrides(ctx, args[0], lim, fea)
				if err != nil {
					return err
				}
				return printEntry(ctx, cmd.OutOrStdout(), &o, c, r)
			})
		},
	}
	setCmd.Flags().StringArrayVar(&setLimits, "limit", nil, "a limit override, KEY=N (repeatable; --limit '' clears them)")
	setCmd.Flags().StringArrayVar(&setFeatures, "feature", nil, "a feature override, KEY=true|false (repeatable; --feature '' clears them)")

	cmd.AddCommand(placeCmd, moveCmd, showCmd, setCmd)
	return cmd
}

func withCatalogue(cmd *cobra.Command, o *controlOptions, lookupEnv func(string) (string, bool),
	fn func(ctx context.Context, c *tenantdir.Catalogue) error) error {
	c, err := o.open(cmd, lookupEnv)
	if err != nil {
		return err
	}
	defer c.Close()
	err = fn(cmd.Context(), c)
	if code := parley.ErrorCode(err); code != "" && code != parley.EINTERNAL {
		// A refusal reads as its message ("no active shard with room in
		// region …"), not as "place workspace x: parley: limit_reached: …".
		return errors.New(parley.ErrorMessage(err))
	}
	return err
}

// parseOverrides reads KEY=N limits and KEY=BOOL features ("" entries are
// skipped: they clear a set).
func parseOverrides(limits, features []string) (map[string]int64, map[string]bool, error) {
	var lim map[string]int64
	var fea map[string]bool
	for _, kv := range limits {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			return nil, nil, fmt.Errorf("--limit %q: want KEY=N", kv)
		}
		if lim == nil {
			lim = map[string]int64{}
		}
		lim[k] = n
	}
	for _, kv := range features {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		b, err := strconv.ParseBool(v)
		if !ok || err != nil {
			return nil, nil, fmt.Errorf("--feature %q: want KEY=true or KEY=false", kv)
		}
		if fea == nil {
			fea = map[string]bool{}
		}
		fea[k] = b
	}
	// Refused here already, before the catalogue is opened, with the
	// known keys in the message.
	if err := parley.ValidateOverrides(lim, fea); err != nil {
		return nil, nil, err
	}
	return lim, fea, nil
}

func printShards(w io.Writer, o *controlOptions, shards []tenantdir.Shard) error {
	for i := range shards {
		shards[i].DSN = redactDSN(shards[i].DSN)
	}
	if o.json {
		return json.NewEncoder(w).Encode(shards)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tREGION\tSTATE\tWORKSPACES\tCAPACITY\tDSN")
	for _, s := range shards {
		dsn := s.DSN
		if dsn == "" {
			dsn = "(the node's own database)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", s.ID, s.Region, s.State, s.Workspaces, s.Capacity, dsn)
	}
	return tw.Flush()
}

// printEntry prints r with the slug the catalogue reserves for it.
func printEntry(ctx context.Context, w io.Writer, o *controlOptions, c *tenantdir.Catalogue, r tenantdir.Record) error {
	slug, err := c.Slug(ctx, r.WorkspaceID)
	if err != nil {
		return err
	}
	return printRecord(w, o, r, slug)
}

// printRecord prints a workspace's entry and its reserved slug ("" for
// none: placed by id alone, or deleted).
func printRecord(w io.Writer, o *controlOptions, r tenantdir.Record, slug string) error {
	r.DSN, r.TargetDSN = redactDSN(r.DSN), redactDSN(r.TargetDSN)
	if o.json {
		// The slug is not part of the record the directory serves (it
		// lives in the catalogue only), so it is added here.
		return json.NewEncoder(w).Encode(struct {
			tenantdir.Record
			Slug string `json:"slug,omitempty"`
		}{r, slug})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "workspace\t%s\n", r.WorkspaceID)
	if slug == "" {
		slug = "-"
	}
	fmt.Fprintf(tw, "slug\t%s\n", slug)
	fmt.Fprintf(tw, "shard\t%s\n", r.ShardID)
	fmt.Fprintf(tw, "region\t%s\n", r.Region)
	fmt.Fprintf(tw, "status\t%s\n", r.Status)
	if r.TargetShard != "" {
		fmt.Fprintf(tw, "moving to\t%s\n", r.TargetShard)
	}
	fmt.Fprintf(tw, "limits\t%s\n", sortedPairs(r.Limits))
	fmt.Fprintf(tw, "features\t%s\n", sortedPairs(r.Features))
	fmt.Fprintf(tw, "version\t%d\n", r.Version)
	fmt.Fprintf(tw, "changed\t%s\n", r.ChangedAt.UTC().Format("2006-01-02 15:04:05.000Z07:00"))
	return tw.Flush()
}

func sortedPairs[V any](m map[string]V) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, m[k])
	}
	return strings.Join(parts, " ")
}
