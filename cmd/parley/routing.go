package main

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"parley/shardstore"
	"parley/sqlstore"
	"parley/tenantdir"
)

// Store routing in `parley serve` (docs/directory.md#store-routing-item-4):
// with more than one shard in the directory's catalogue (or
// --store-routing=on), the node's chat store is a shardstore.Router over
// every shard, the node's own database being the default shard (the
// control database of accounts and sessions). Each shard's store is
// opened with the node's settings, so its outbox relay, group commit and
// event publishing run per shard. Files, integrations, email notifications
// and export are routed too; `parley import` routes the same way
// (importrouting.go).

// defaultShardPoolSize is --shard-pool-size's default: what a store's
// PostgreSQL pool had before the flag (16 writers, 8 lanes, 8 readers).
// maxShardPoolSize bounds it: PostgreSQL's max_connections is shared by
// every node, and a larger pool per shard is a configuration mistake.
const (
	defaultShardPoolSize = 32
	maxShardPoolSize     = 1000
)

// shardStoreConfig is the configuration of a shard's store: the node's
// own (publisher, live configuration, caps) with a pool of poolSize
// connections.
func shardStoreConfig(base sqlstore.Config, poolSize int) sqlstore.Config {
	base.MaxConns = poolSize
	return base
}

// routingOn says whether store routing is on for mode (on, or auto with
// more than one shard in the catalogue), with the number of shards, and
// refuses a default shard the catalogue does not have. serve, import and
// export decide it alike.
func routingOn(ctx context.Context, cat *tenantdir.Catalogue, mode, defaultShard string) (shards int, on bool, err error) {
	list, err := cat.Shards(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("store routing: %w", err)
	}
	if mode == "auto" && len(list) < 2 {
		return len(list), false, nil
	}
	if !slices.ContainsFunc(list, func(s tenantdir.Shard) bool { return s.ID == defaultShard }) {
		return 0, false, fmt.Errorf("store routing: the default shard %q (--default-shard) is not in the catalogue", defaultShard)
	}
	return len(list), true, nil
}

// startRouting makes n.chat the router when routing is on.
func (n *node) startRouting(ctx context.Context, base sqlstore.Config) error {
	o, log := n.opts, n.log.With("component", "shardstore")
	// The router's series exist on every node, 0 while routing is off
	// (New registers the same collectors again when it is on).
	shardstore.RegisterMetrics(n.reg)
	if o.StoreRouting == "off" {
		return nil
	}
	if n.dir == nil || n.dir.client == nil {
		if o.StoreRouting == "on" {
			return errors.New("store routing: --store-routing=on needs the tenant directory, which is off (see the warning above)")
		}
		return nil
	}
	shards, on, err := routingOn(ctx, n.dir.cat, o.StoreRouting, o.DefaultShard)
	if err != nil || !on {
		return err
	}
	shardCfg := shardStoreConfig(base, o.ShardPoolSize)
	n.router, err = shardstore.New(shardstore.Config{Default: n.store, DefaultShard: o.DefaultShard,
		Directory: n.dir.client, Catalogue: n.dir.cat, Region: o.Region, Live: n.config, Logger: n.log, Registerer: n.reg,
		Open: func(ctx context.Context, dsn string) (*sqlstore.Store, error) {
			return shardstore.OpenShard(ctx, shardCfg, dsn)
		}})
	if err != nil {
		return fmt.Errorf("store routing: %w", err)
	}
	n.chat = n.router
	log.Info("store routing on", "shards", shards, "default_shard", o.DefaultShard, "shard_pool_size", o.ShardPoolSize)
	return nil
}
