package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"

	"parley"
	"parley/auth"
	"parley/sqlstore"
)

// `parley seed` fills a database with a load-test workspace: an owner, N
// users who all share one password, M channels besides #general, the
// memberships, and one live session token per user, written to a JSON file
// the load tools read. It writes through the Store, like the API, but skips
// what makes the API slow for this: the password is hashed once (argon2 per
// user would take minutes for 10,000 users), sessions are created directly,
// and members are added a thousand at a time.

// seedDomain is the email domain of seeded users.
const seedDomain = "seed.parley.test"

// seedOptions are the settings of `parley seed`.
type seedOptions struct {
	DataDir    string
	DB         string
	Slug       string
	Users      int
	Channels   int
	Membership string // "spread" or "all"
	Password   string
	TokenTTL   time.Duration
	Out        string // "-" is stdout
	BaseURL    string
	Workers    int
	LogLevel   string
}

func (o *seedOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.DataDir, "data", "./data", "data directory; the SQLite database is <data>/parley.db (as for serve)")
	fs.StringVar(&o.DB, "db", "", "PostgreSQL URL (postgres://…); when set, PostgreSQL is used instead of SQLite (as for serve)")
	fs.StringVar(&o.Slug, "slug", "load", "slug of the new workspace; user handles start with it")
	fs.IntVar(&o.Users, "users", 100, "number of users besides the owner; every user is in #general")
	fs.IntVar(&o.Channels, "channels", 0, "number of public channels besides #general (load-1 … load-M)")
	fs.StringVar(&o.Membership, "membership", "spread", `who joins the extra channels: "spread" (user i joins load-(i mod M + 1)) or "all" (everyone joins every channel)`)
	fs.StringVar(&o.Password, "password", "parley-load-test", "the password every seeded user shares (hashed once)")
	fs.DurationVar(&o.TokenTTL, "token-ttl", 30*24*time.Hour, "lifetime of the seeded session tokens")
	fs.StringVar(&o.Out, "out", "-", `file to write the JSON to ("-": stdout)`)
	fs.StringVar(&o.BaseURL, "base-url", "", "the server's base URL, copied into the JSON for the load tools (optional)")
	fs.IntVar(&o.Workers, "workers", 16, "concurrent store writes while seeding users")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
}

func (o *seedOptions) validate() error {
	if o.DB == "" && o.DataDir == "" {
		return errors.New("--data is required when --db is not set")
	}
	if err := parley.ValidateSlug(o.Slug); err != nil {
		return fmt.Errorf("--slug: %w", err)
	}
	if o.Users < 1 || o.Users > 1_000_000 {
		return errors.New("--users must be 1 to 1,000,000")
	}
	if o.Channels < 0 || o.Channels > 10_000 {
		return errors.New("--channels must be 0 to 10,000")
	}
	if o.Membership != "spread" && o.Membership != "all" {
		return fmt.Errorf(`--membership must be "spread" or "all", not %q`, o.Membership)
	}
	if err := parley.ValidatePassword(o.Password); err != nil {
		return fmt.Errorf("--password: %w", err)
	}
	if o.TokenTTL <= 0 {
		return errors.New("--token-ttl must be positive")
	}
	if o.Workers < 1 {
		o.Workers = 1
	}
	_, err := parseLevel(o.LogLevel)
	return err
}

// handlePrefix starts every seeded handle: the slug, cut so that a handle
// with a seven-digit index still fits the 32 characters a handle may have.
func (o *seedOptions) handlePrefix() string {
	p := o.Slug
	if len(p) > 23 {
		p = p[:23]
	}
	return p + "-"
}

func newSeedCmd() *cobra.Command {
	var o seedOptions
	cmd := &cobra.Command{
		Use:   "seed",
		Short: "Create a load-test workspace with users, channels and session tokens",
		Long: "Create a workspace for load tests in the database of --data or --db: an owner,\n" +
			"--users users sharing one password, --channels public channels besides #general,\n" +
			"the memberships, and one session token per user. The JSON written to --out lists\n" +
			"the workspace, the channels and every user with their token.\n\n" +
			"Run it while no node serves the database: the events of the seeding go nowhere.\n" +
			"It fails with a clear error if the slug is already taken.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			level, _ := parseLevel(o.LogLevel)
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			return runSeed(cmd.Context(), o, cmd.OutOrStdout(), log)
		},
	}
	o.register(cmd.Flags())
	return cmd
}

// seedResult is the JSON that `parley seed` writes.
type seedResult struct {
	BaseURL     string        `json:"base_url,omitempty"`
	WorkspaceID string        `json:"workspace_id"`
	Slug        string        `json:"slug"`
	Password    string        `json:"password"`
	Owner       seedUser      `json:"owner"`
	Channels    []seedChannel `json:"channels"`
	Users       []seedUser    `json:"users"`
}

type seedChannel struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Members int    `json:"members"` // the owner included
}

type seedUser struct {
	ID     string `json:"id"`
	Handle string `json:"handle"`
	Email  string `json:"email"`
	Token  string `json:"token"`
	// Channels are the ids of the user's channels, #general first.
	Channels []string `json:"channels"`
}

func runSeed(ctx context.Context, o seedOptions, stdout io.Writer, log *slog.Logger) error {
	cfg := sqlstore.Config{Logger: log}
	if o.DB != "" {
		cfg.PostgresURL = o.DB
	} else {
		if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
		cfg.Path = (&serveOptions{DataDir: o.DataDir}).sqlitePath()
	}
	store, err := sqlstore.Open(ctx, cfg)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer store.Close()
	start := time.Now()
	res, err := seed(ctx, store, o, log)
	if err != nil {
		return err
	}
	res.BaseURL = o.BaseURL
	if err := writeSeedJSON(o.Out, stdout, res); err != nil {
		return err
	}
	log.Info("seeded", "workspace_id", res.WorkspaceID, "users", len(res.Users),
		"channels", len(res.Channels), "took", time.Since(start).Round(time.Millisecond), "out", o.Out)
	return nil
}

func writeSeedJSON(path string, stdout io.Writer, res *seedResult) error {
	b, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("encode seed: %w", err)
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = stdout.Write(b)
		return err
	}
	if err := os.WriteFile(path, b, 0o600); err != nil { // tokens inside
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// seed does the work of `parley seed` on an open store.
func seed(ctx context.Context, store parley.Store, o seedOptions, log *slog.Logger) (*seedResult, error) {
	hash, err := auth.HashPassword(o.Password)
	if err != nil {
		return nil, err
	}
	prefix := o.handlePrefix()
	taken := func(err error) error {
		return fmt.Errorf("workspace %q is already seeded in this database (%w): use another --slug or a fresh database", o.Slug, err)
	}

	// The owner comes first: their email is derived from the slug, so an
	// earlier seed with this slug is caught before anything is written.
	owner, err := seedAccount(ctx, store, prefix+"owner", "Load-test owner", hash, o.TokenTTL)
	if parley.ErrorCode(err) == parley.ECONFLICT {
		return nil, taken(err)
	}
	if err != nil {
		return nil, fmt.Errorf("create owner: %w", err)
	}
	ws, err := store.CreateWorkspace(ctx, owner.ID, "Load test "+o.Slug, o.Slug)
	if parley.ErrorCode(err) == parley.ECONFLICT {
		return nil, taken(err)
	}
	if err != nil {
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	res := &seedResult{WorkspaceID: ws.ID, Slug: o.Slug, Password: o.Password, Owner: *owner}
	found, err := store.ListChannels(ctx, owner.ID, ws.ID, parley.ChannelQuery{Q: "general", Limit: 1})
	if err != nil || len(found.Channels) != 1 {
		return nil, fmt.Errorf("find #general: %v", err)
	}
	general := found.Channels[0]
	res.Channels = append(res.Channels, seedChannel{ID: general.ID, Name: general.Name, Members: 1 + o.Users})
	for i := 1; i <= o.Channels; i++ {
		ch, err := store.CreateChannel(ctx, owner.ID, ws.ID, parley.NewChannel{
			Name: "load-" + strconv.Itoa(i), Kind: parley.KindPublic, Topic: "Load-test channel",
		})
		if err != nil {
			return nil, fmt.Errorf("create load-%d: %w", i, err)
		}
		res.Channels = append(res.Channels, seedChannel{ID: ch.ID, Name: ch.Name, Members: 1})
	}
	res.Owner.Channels = make([]string, len(res.Channels))
	for i, ch := range res.Channels {
		res.Owner.Channels[i] = ch.ID
	}

	inv, err := store.CreateInvite(ctx, owner.ID, ws.ID, parley.InviteParams{})
	if err != nil {
		return nil, fmt.Errorf("create invite: %w", err)
	}
	res.Users, err = seedUsers(ctx, store, o, prefix, hash, inv.Code, log)
	if err != nil {
		return nil, err
	}

	// Memberships of the extra channels, a thousand users per call.
	for ci := 1; ci < len(res.Channels); ci++ {
		ch := &res.Channels[ci]
		var ids []string
		for ui := range res.Users {
			u := &res.Users[ui]
			if o.Membership == "all" || ui%o.Channels == ci-1 {
				ids = append(ids, u.ID)
				u.Channels = append(u.Channels, ch.ID)
			}
		}
		for len(ids) > 0 {
			n := min(len(ids), parley.MaxAddMembers)
			if _, err := store.AddMembers(ctx, owner.ID, ch.ID, ids[:n]); err != nil {
				return nil, fmt.Errorf("add members to %s: %w", ch.Name, err)
			}
			ch.Members += n
			ids = ids[n:]
		}
	}
	for ui := range res.Users {
		res.Users[ui].Channels = append([]string{general.ID}, res.Users[ui].Channels...)
	}
	return res, nil
}

// seedUsers creates the users with several writers at once (the store
// commits concurrent writes together): each user, their workspace
// membership (which joins #general) and their session.
func seedUsers(ctx context.Context, store parley.Store, o seedOptions, prefix, hash, invite string, log *slog.Logger) ([]seedUser, error) {
	users := make([]seedUser, o.Users)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(o.Workers, 1))
	var done atomic.Int64
	for i := range o.Users {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			handle := prefix + strconv.Itoa(i+1)
			u, err := seedAccount(gctx, store, handle, "Load user "+strconv.Itoa(i+1), hash, o.TokenTTL)
			if err == nil {
				_, err = store.AcceptInvite(gctx, u.ID, invite)
			}
			if err != nil {
				return fmt.Errorf("seed user %s: %w", handle, err)
			}
			users[i] = *u
			if n := done.Add(1); n%1000 == 0 {
				log.Info("seeding users", "done", n, "of", o.Users)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return users, nil
}

// seedAccount creates a user with the shared password hash and a session.
func seedAccount(ctx context.Context, store parley.Store, handle, name, hash string, ttl time.Duration) (*seedUser, error) {
	email := handle + "@" + seedDomain
	u, err := store.CreateUser(ctx, parley.NewUser{Email: email, Name: name, Handle: handle, PasswordHash: hash})
	if err != nil {
		return nil, err
	}
	token, tokenHash, err := auth.NewToken()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if err := store.CreateSession(ctx, parley.Session{
		TokenHash: tokenHash, UserID: u.ID, CreatedAt: now, ExpiresAt: now.Add(ttl),
	}); err != nil {
		return nil, fmt.Errorf("create session of %s: %w", handle, err)
	}
	return &seedUser{ID: u.ID, Handle: handle, Email: email, Token: token}, nil
}
