package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"

	"parley"
	"parley/shardstore"
	"parley/sqlstore"
	"parley/tenantdir"
)

// Store routing in `parley import` (docs/directory.md "Store routing"): on
// a deployment whose catalogue has more than one shard (or with
// --store-routing=on), the import goes through a shardstore.Router as
// serve's calls do: the workspace is found on whichever shard has its
// slug, or created with a placement in the catalogue, and its history is
// written on its shard; accounts stay on the node's own database, the
// control database. Without a running node there is no directory replica
// to ask: the router looks workspaces up in the catalogue itself.

// importTarget is what an import writes to: the node's own store, or the
// router over every shard.
type importTarget interface {
	parley.Importer
	parley.ImportFileStore
	parley.FileService
}

var (
	_ importTarget = (*sqlstore.Store)(nil)
	_ importTarget = (*shardstore.Router)(nil)
)

// importRouting are the import's flags that find the shards, as serve's.
type importRouting struct {
	ControlDB    string
	StoreRouting string
	DefaultShard string
	Region       string
}

func (o *importRouting) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.ControlDB, "control-db", "", "PostgreSQL URL of the tenant directory's control database (as for serve; default: <data>/control.db on SQLite, or the --db database)")
	fs.StringVar(&o.StoreRouting, "store-routing", "auto", "write the workspace on the shard the directory's catalogue places it on (auto: when the catalogue has more than one shard; on; off: the --db/--data database)")
	fs.StringVar(&o.DefaultShard, "default-shard", defaultShard, "the catalogue's shard id of the --db/--data database (as for serve)")
	fs.StringVar(&o.Region, "region", "local", "the region a new workspace is placed in (as for serve)")
}

func (o *importRouting) validate() error {
	switch o.StoreRouting {
	case "auto", "on", "off":
	default:
		return fmt.Errorf("--store-routing %q: use auto, on or off", o.StoreRouting)
	}
	for flag, v := range map[string]string{"--default-shard": o.DefaultShard, "--region": o.Region} {
		if v == "" || strings.ContainsAny(v, ". *>\t") {
			return fmt.Errorf("%s %q: use letters, digits, '-' or '_'", flag, v)
		}
	}
	if o.ControlDB != "" && !strings.HasPrefix(o.ControlDB, "postgres://") && !strings.HasPrefix(o.ControlDB, "postgresql://") {
		return errors.New("--control-db must be a postgres:// URL")
	}
	return nil
}

// target returns the store the import writes to: store itself when routing
// is off (or auto with one shard), else a router whose default shard is
// store; closeFn closes what target opened.
func (o *importRouting) target(ctx context.Context, store *sqlstore.Store, sf storeFlags, log *slog.Logger) (t importTarget, closeFn func(), err error) {
	none := func() {}
	if o.StoreRouting == "off" {
		return store, none, nil
	}
	cfg := catalogueConfig(o.ControlDB, sf.DB, sf.DataDir)
	cat, err := tenantdir.OpenCatalogue(ctx, cfg)
	if err != nil {
		return nil, none, fmt.Errorf("store routing: %w", err)
	}
	shards, err := cat.ListShards(ctx)
	if err != nil {
		cat.Close()
		return nil, none, fmt.Errorf("store routing: %w", err)
	}
	if o.StoreRouting == "auto" && len(shards) < 2 {
		cat.Close()
		return store, none, nil
	}
	found := false
	for _, s := range shards {
		found = found || s.ID == o.DefaultShard
	}
	if !found {
		cat.Close()
		return nil, none, fmt.Errorf("store routing: the default shard %q (--default-shard) is not in the catalogue", o.DefaultShard)
	}
	live, err := store.LoadLiveConfig(ctx)
	if err != nil {
		cat.Close()
		return nil, none, fmt.Errorf("store routing: %w", err)
	}
	base := sqlstore.Config{Logger: log}
	r, err := shardstore.New(shardstore.Config{Default: store, DefaultShard: o.DefaultShard,
		Directory: catalogueDirectory{cat}, Catalogue: cat, Region: o.Region, Live: parley.StaticConfig(live), Logger: log,
		Open: func(ctx context.Context, dsn string) (*sqlstore.Store, error) {
			return shardstore.OpenShard(ctx, base, dsn)
		}})
	if err != nil {
		cat.Close()
		return nil, none, fmt.Errorf("store routing: %w", err)
	}
	return r, func() {
		if err := r.Close(); err != nil {
			log.Warn("close shards", "err", err)
		}
		cat.Close()
	}, nil
}

// catalogueDirectory answers the router's lookups from the catalogue: a
// command has no directory replica, and reads the records' source.
type catalogueDirectory struct{ cat *tenantdir.Catalogue }

func (d catalogueDirectory) Lookup(ctx context.Context, workspaceID string) (tenantdir.Record, error) {
	return d.cat.Workspace(ctx, workspaceID)
}
