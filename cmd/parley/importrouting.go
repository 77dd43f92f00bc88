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

// Store routing in `parley import` and `parley export` (docs/directory.md
// "Store routing"): on a deployment whose catalogue has more than one shard
// (or with --store-routing=on), the command goes through a
// shardstore.Router as serve's calls do: the workspace is found on
// whichever shard has its slug (an import creates it with a placement in
// the catalogue when none has), and its history is written on, or read
// from, its shard; accounts stay on the node's own database, the control
// database. Without a running node there is no directory replica to ask:
// the router looks workspaces up in the catalogue itself.

// importTarget is what an import writes to: the node's own store, or the
// router over every shard.
type importTarget interface {
	parley.Importer
	parley.ImportFileStore
	parley.FileService
}

// exportSource is what an export reads from: the node's own store, or the
// router over every shard.
type exportSource interface {
	parley.Exporter
	WorkspaceOwner(ctx context.Context, slug string) (workspaceID, ownerID string, err error)
}

var (
	_ importTarget = (*sqlstore.Store)(nil)
	_ importTarget = (*shardstore.Router)(nil)
	_ exportSource = (*sqlstore.Store)(nil)
	_ exportSource = (*shardstore.Router)(nil)
)

// storeRouting are the import's and export's flags that find the shards,
// as serve's.
type storeRouting struct {
	ControlDB    string
	StoreRouting string
	DefaultShard string
	Region       string
}

func (o *storeRouting) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.ControlDB, "control-db", "", "PostgreSQL URL of the tenant directory's control database (as for serve; default: <data>/control.db on SQLite, or the --db database)")
	fs.StringVar(&o.StoreRouting, "store-routing", "auto", "find the workspace on the shard the directory's catalogue places it on (auto: when the catalogue has more than one shard; on; off: the --db/--data database)")
	fs.StringVar(&o.DefaultShard, "default-shard", defaultShard, "the catalogue's shard id of the --db/--data database (as for serve)")
	fs.StringVar(&o.Region, "region", "local", "the region a new workspace is placed in (import; as for serve)")
}

func (o *storeRouting) validate() error {
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

// router returns the router over every shard whose default shard is store,
// or nil when routing is off (or auto with one shard): the command then
// works on store itself. closeFn closes what router opened.
func (o *storeRouting) router(ctx context.Context, store *sqlstore.Store, sf storeFlags, log *slog.Logger) (r *shardstore.Router, closeFn func(), err error) {
	none := func() {}
	if o.StoreRouting == "off" {
		return nil, none, nil
	}
	cfg := catalogueConfig(o.ControlDB, sf.DB, sf.DataDir)
	cat, err := tenantdir.OpenCatalogue(ctx, cfg)
	if err != nil {
		return nil, none, fmt.Errorf("store routing: %w", err)
	}
	if _, on, err := routingOn(ctx, cat, o.StoreRouting, o.DefaultShard); err != nil || !on {
		cat.Close()
		return nil, none, err
	}
	live, err := store.LoadLiveConfig(ctx)
	if err != nil {
		cat.Close()
		return nil, none, fmt.Errorf("store routing: %w", err)
	}
	base := sqlstore.Config{Logger: log}
	r, err = shardstore.New(shardstore.Config{Default: store, DefaultShard: o.DefaultShard,
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
