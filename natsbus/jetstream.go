package natsbus

import (
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// applyJetStream turns JetStream on in the embedded server when the config
// names a store directory. Every write is synced before it is acknowledged
// (sync_interval: always): JetStream's default acknowledges before it
// flushes, and a stream Parley depends on must not lose what it
// acknowledged in a crash (ARCHITECTURE §9).
func applyJetStream(cfg Config, opts *server.Options) {
	if cfg.JetStreamDir == "" {
		return
	}
	opts.JetStream = true
	opts.StoreDir = cfg.JetStreamDir
	opts.SyncAlways = true
}

// Conn is the bus's NATS connection, for the packages that need NATS
// itself rather than the bus's topics: the tenant directory (tenantdir)
// keeps its catalogue stream in JetStream and builds its own subjects under
// the bus's SubjectPrefix. Nothing else should use it.
func (b *Bus) Conn() *nats.Conn { return b.nc }

// SubjectPrefix is the prefix every subject of this bus starts with,
// ending in ".".
func (b *Bus) SubjectPrefix() string { return b.prefix }
