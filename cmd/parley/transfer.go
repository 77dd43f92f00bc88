package main

import (
	"archive/zip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"parley"
	"parley/files"
	"parley/sqlstore"
	"parley/transfer"
)

// `parley import slack|parley FILE.zip` and `parley export`: moving a
// workspace's history in and out (docs/import.md). Both open the store the
// way serve does (--data or --db) and work through package transfer; both
// route the workspace to its shard as serve would (importrouting.go).

// storeFlags are the flags that name the database, as for serve.
type storeFlags struct {
	DataDir string
	DB      string
}

func (o *storeFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.DataDir, "data", "./data", "data directory; the SQLite database is <data>/parley.db (as for serve)")
	fs.StringVar(&o.DB, "db", "", "PostgreSQL URL (postgres://…); when set, PostgreSQL is used instead of SQLite (as for serve)")
}

func (o *storeFlags) open(ctx context.Context, log *slog.Logger) (*sqlstore.Store, error) {
	cfg := sqlstore.Config{Logger: log}
	if o.DB != "" {
		cfg.PostgresURL = o.DB
	} else {
		if o.DataDir == "" {
			return nil, errors.New("--data is required when --db is not set")
		}
		if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
		cfg.Path = (&serveOptions{DataDir: o.DataDir}).sqlitePath()
	}
	s, err := sqlstore.Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return s, nil
}

type importOptions struct {
	storeFlags
	storeRouting
	fileOptions // where attached files go (as for serve)
	// SlackToken downloads the export's files (url_private); FileHosts
	// are the hosts it may be sent to, FileConcurrency the downloads at once.
	SlackToken      string
	FileHosts       []string
	FileConcurrency int
	FileTimeout     time.Duration
	Workspace       string
	Name            string
	Owner           string // email
	Batch           int
	JSON            bool
	Progress        string // auto, bar, lines, off
}

func newImportCmd(lookupEnv func(string) (string, bool)) *cobra.Command {
	var o importOptions
	cmd := &cobra.Command{
		Use:   "import slack|parley EXPORT.zip",
		Short: "Import a Slack export or a Parley export into a workspace",
		Long: "Import a Slack export (Workspace settings → Import/Export data) or a Parley export\n" +
			"(parley export) into the workspace --workspace, created if missing and owned by the\n" +
			"account whose email is --owner. Users are matched by email; the others get accounts\n" +
			"that cannot log in until someone signs up with their email. Run it again over the\n" +
			"same export to finish an import that was cut off: nothing is imported twice.\n" +
			"Servers running on the database see the imported channels after a restart.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := applyEnv(cmd.Flags(), lookupEnv); err != nil {
				return err
			}
			kind := args[0]
			if kind != parley.ImportSlack && kind != parley.ImportParley {
				return fmt.Errorf(`the first argument must be "slack" or "parley", not %q`, kind)
			}
			if err := parley.ValidateSlug(o.Workspace); err != nil {
				return fmt.Errorf("--workspace: %w", err)
			}
			if o.Owner == "" {
				return errors.New("--owner (the email of the account that owns the workspace) is required")
			}
			if o.Batch < 1 || o.Batch > 10_000 {
				return errors.New("--batch must be 1 to 10,000")
			}
			if o.FileConcurrency < 1 || o.FileConcurrency > 64 {
				return errors.New("--file-concurrency must be 1 to 64")
			}
			if o.FileTimeout <= 0 {
				return errors.New("--file-timeout must be positive")
			}
			if err := o.validateFiles(); err != nil {
				return err
			}
			if err := o.storeRouting.validate(); err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			return runImport(cmd.Context(), o, kind, args[1], cmd.OutOrStdout(), cmd.ErrOrStderr(), log)
		},
	}
	o.storeFlags.register(cmd.Flags())
	fs := cmd.Flags()
	o.storeRouting.register(fs)
	fs.StringVar(&o.Workspace, "workspace", "", "slug of the workspace to import into (created when missing)")
	fs.StringVar(&o.Name, "name", "", "name of the workspace when it is created (default: the export's, else the slug)")
	fs.StringVar(&o.Owner, "owner", "", "email of the existing account that owns the workspace")
	fs.IntVar(&o.Batch, "batch", 2000, "messages per transaction")
	fs.BoolVar(&o.JSON, "json", false, "print the summary as JSON")
	fs.StringVar(&o.Progress, "progress", "auto", `progress: "bar" (redrawn in place), "lines" (a line every 2 s), "off", or "auto" (bar on a terminal, else lines)`)
	fs.StringVar(&o.SlackToken, "slack-token", "", "Slack token (xoxb-… or xoxp-… with files:read) to download the export's files; without it only the files inside the zip are attached (prefer the environment variable to the flag)")
	fs.StringSliceVar(&o.FileHosts, "slack-file-hosts", transfer.DefaultFileHosts, "hosts the Slack token may be sent to (.domain: its subdomains); file URLs elsewhere are not fetched")
	fs.IntVar(&o.FileConcurrency, "file-concurrency", 4, "files downloaded at once")
	fs.DurationVar(&o.FileTimeout, "file-timeout", 10*time.Minute, "how long one file's download may take")
	o.registerFiles(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		f.Usage += " [$" + envName(f.Name) + "]"
	})
	return cmd
}

func runImport(ctx context.Context, o importOptions, kind, file string, stdout, stderr io.Writer, log *slog.Logger) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	var src *transfer.Source
	if kind == parley.ImportSlack {
		src, err = transfer.ReadSlack(f, st.Size())
	} else {
		src, err = transfer.ReadParley(f, st.Size())
	}
	if err != nil {
		return err
	}
	store, err := o.open(ctx, log)
	if err != nil {
		return err
	}
	defer store.Close()
	// Accounts are the node's own database's (the control database of
	// accounts when routing); the workspace goes where the target says.
	owner, _, err := store.UserCredentials(ctx, o.Owner)
	if err != nil {
		return fmt.Errorf("--owner %s: %w", o.Owner, err)
	}
	router, closeRouter, err := o.storeRouting.router(ctx, store, o.storeFlags, log)
	if err != nil {
		return err
	}
	defer closeRouter()
	var target importTarget = store
	if router != nil {
		target = router
	}
	p := newProgress(stderr, o.Progress)
	sum, err := transfer.Import(ctx, target, src, transfer.Options{
		OwnerID: owner.ID, Slug: o.Workspace, Name: o.Name, Batch: o.Batch, Progress: p.update,
	})
	p.done()
	if err != nil {
		return fmt.Errorf("import %s: %w (run the same command again to go on from the last batch committed)", filepath.Base(file), err)
	}
	if kind == parley.ImportSlack {
		if sum.FileImport, err = importFiles(ctx, o, store, target, f, st.Size(), sum.WorkspaceID, log); err != nil {
			return fmt.Errorf("import %s: files: %w (run the same command again to fetch the rest)", filepath.Base(file), err)
		}
	}
	if o.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	}
	printSummary(stdout, sum)
	return nil
}

// importFiles attaches the files of the imported messages: those the zip
// carries, and with --slack-token the others, downloaded.
func importFiles(ctx context.Context, o importOptions, store *sqlstore.Store, target importTarget, zf io.ReaderAt, size int64, workspaceID string,
	log *slog.Logger) (*transfer.FileSummary, error) {
	zr, err := zip.NewReader(zf, size)
	if err != nil {
		return nil, err
	}
	storage, _, err := (&serveOptions{DataDir: o.DataDir, fileOptions: o.fileOptions}).openFileStorage(ctx)
	if err != nil {
		return nil, fmt.Errorf("open file storage: %w", err)
	}
	live, err := store.LoadLiveConfig(ctx)
	if err != nil {
		return nil, err
	}
	svc := files.New(files.Config{Storage: storage, Store: target, Live: parley.StaticConfig(live), Logger: log})
	return transfer.ImportFiles(ctx, target, svc, transfer.FileOptions{WorkspaceID: workspaceID, Token: o.SlackToken,
		Hosts: o.FileHosts, Zip: zr, Concurrency: o.FileConcurrency, Timeout: o.FileTimeout})
}

func printSummary(w io.Writer, s *transfer.Summary) {
	ws := "existing"
	if s.WorkspaceCreated {
		ws = "created"
	}
	rate := 0.0
	if s.Took > 0 {
		rate = float64(s.Messages) / s.Took.Seconds()
	}
	fmt.Fprintf(w, "workspace   %s (%s)\n", s.WorkspaceID, ws)
	fmt.Fprintf(w, "users       %d created (cannot log in until claimed), %d matched by email, %d from an earlier run, %d bots\n",
		s.UsersCreated, s.UsersMatched, s.UsersKnown, s.Bots)
	fmt.Fprintf(w, "channels    %d created, %d existing\n", s.ChannelsCreated, s.ChannelsKnown)
	fmt.Fprintf(w, "messages    %d imported (%d replies in %d threads), %d from an earlier run\n",
		s.Messages, s.Replies, s.Threads, s.AlreadyImported)
	fmt.Fprintf(w, "joins       %d join and leave notices (member.joined, member.left), %d from an earlier run\n",
		s.Notices, s.NoticesKnown)
	fmt.Fprintf(w, "reactions   %d\npins        %d\nfiles       %d recorded\n", s.Reactions, s.Pins, s.Files)
	if fs := s.FileImport; fs != nil {
		fmt.Fprintf(w, "attached    %d files (%d from the export, %d downloaded, %.1f MiB)\n",
			fs.Attached, fs.FromZip, fs.Downloaded, float64(fs.Bytes)/(1<<20))
		if fs.Waiting > 0 {
			fmt.Fprintf(w, "waiting     %d files to download (run again with --slack-token)\n", fs.Waiting)
		}
		for _, k := range sortedKeys(fs.Failed) {
			fmt.Fprintf(w, "not fetched %d %s\n", fs.Failed[k], k)
		}
	}
	for _, k := range sortedKeys(s.Skipped) {
		fmt.Fprintf(w, "skipped     %d %s\n", s.Skipped[k], k)
	}
	for _, p := range s.Problems {
		fmt.Fprintf(w, "problem     %s\n", p)
	}
	fmt.Fprintf(w, "took        %s (%.0f messages/s)\n", s.Took.Round(time.Millisecond), rate)
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// progress shows an import's progress on stderr: a bar redrawn in place on
// a terminal, a plain line every two seconds otherwise.
type progress struct {
	w     io.Writer
	bar   bool
	off   bool
	start time.Time
	last  time.Time
	drawn bool
}

func newProgress(w io.Writer, mode string) *progress {
	p := &progress{w: w, start: time.Now()}
	switch mode {
	case "off":
		p.off = true
	case "bar":
		p.bar = true
	case "lines":
	default:
		if f, ok := w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				p.bar = true
			}
		}
	}
	return p
}

func (p *progress) update(pr transfer.Progress) {
	if p.off {
		return
	}
	now := time.Now()
	final := pr.ChannelsDone == pr.Channels
	if !p.bar && now.Sub(p.last) < 2*time.Second && !final {
		return
	}
	p.last = now
	rate := float64(pr.Messages) / max(now.Sub(p.start).Seconds(), 1e-3)
	if p.bar {
		const width = 30
		filled := 0
		if pr.Channels > 0 {
			filled = width * pr.ChannelsDone / pr.Channels
		}
		bar := make([]byte, width)
		for i := range bar {
			bar[i] = ' '
			if i < filled {
				bar[i] = '='
			}
		}
		fmt.Fprintf(p.w, "\r[%s] %d/%d channels  %d messages  %.0f/s  #%-20.20s", bar, pr.ChannelsDone, pr.Channels,
			pr.Messages, rate, pr.Channel)
		p.drawn = true
		return
	}
	fmt.Fprintf(p.w, "import: %d/%d channels, %d messages, %.0f messages/s, at #%s (%d/%d of it)\n",
		pr.ChannelsDone, pr.Channels, pr.Messages, rate, pr.Channel, pr.ChannelMessagesNew, pr.MessagesOfChannel)
}

func (p *progress) done() {
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}

type exportOptions struct {
	storeFlags
	storeRouting
	Workspace string
	Out       string
	Private   bool
}

func newExportCmd() *cobra.Command {
	var o exportOptions
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Export a workspace as a Parley export zip",
		Long: "Write the workspace --workspace to --out as a Parley export (docs/import.md): the\n" +
			"workspace, its members, its public channels (and private ones with --private) and\n" +
			"their messages with threads, reactions, pins and edits, in order. `parley import\n" +
			"parley FILE.zip` reads it back. On a deployment with several shards the workspace\n" +
			"is read from its shard.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := parley.ValidateSlug(o.Workspace); err != nil {
				return fmt.Errorf("--workspace: %w", err)
			}
			if o.Out == "" {
				return errors.New("--out is required")
			}
			if err := o.storeRouting.validate(); err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			return runExport(cmd.Context(), o, cmd.OutOrStdout(), log)
		},
	}
	o.storeFlags.register(cmd.Flags())
	fs := cmd.Flags()
	o.storeRouting.register(fs)
	fs.StringVar(&o.Workspace, "workspace", "", "slug of the workspace to export")
	fs.StringVar(&o.Out, "out", "", "the zip file to write")
	fs.BoolVar(&o.Private, "private", false, "include the private channels (DMs are never exported)")
	return cmd
}

func runExport(ctx context.Context, o exportOptions, stdout io.Writer, log *slog.Logger) error {
	store, err := o.open(ctx, log)
	if err != nil {
		return err
	}
	defer store.Close()
	router, closeRouter, err := o.storeRouting.router(ctx, store, o.storeFlags, log)
	if err != nil {
		return err
	}
	defer closeRouter()
	var src exportSource = store
	if router != nil {
		src = router
	}
	wsID, owner, err := src.WorkspaceOwner(ctx, o.Workspace)
	if err != nil {
		return fmt.Errorf("--workspace %s: %w", o.Workspace, err)
	}
	tmp := o.Out + ".partial"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600) // emails inside
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	start := time.Now()
	man, err := transfer.Export(ctx, src, owner, wsID, parley.ExportOptions{Private: o.Private}, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := os.Rename(tmp, o.Out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "exported %s: %d users, %d channels, %d messages to %s in %s\n", o.Workspace,
		man.Users, man.Channels, man.Messages, o.Out, time.Since(start).Round(time.Millisecond))
	return nil
}
