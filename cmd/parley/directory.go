package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"parley"
	"parley/httpapi"
	"parley/tenantdir"
)

// The tenant directory in `parley serve` (docs/directory.md): the
// catalogue in the control database, its relay to JetStream, the api and
// edge projections with this region's replicas, and the node's directory
// client. Request paths do not use it yet (store routing is issue 17 item
// 4); with no flags it runs on what a single node already has: the
// control tables beside the node's own database and the embedded NATS
// with JetStream on.

// directoryOptions are the directory's flags of `parley serve`.
type directoryOptions struct {
	Region                  string   // this node's region
	ControlDB               string   // postgres:// URL of the control database; empty: beside the node's database
	DirectoryRegions        []string // regions whose replicas the client races; empty: this node's
	DirectoryStreamReplicas int      // servers of a JetStream cluster that keep each directory stream
	StoreRouting            string   // auto | on | off (routing.go)
	DefaultShard            string   // the catalogue's id of this node's own database
	ShardPoolSize           int      // connections of each shard's store the router opens (routing.go)
}

func (o *directoryOptions) registerDirectory(fs *pflag.FlagSet) {
	fs.StringVar(&o.Region, "region", "local", "this node's region: its directory replica answers for it, and its default shard is placed in it")
	fs.StringVar(&o.ControlDB, "control-db", "", "PostgreSQL URL of the tenant directory's control database (default: <data>/control.db on SQLite, or the --db database)")
	fs.StringVar(&o.StoreRouting, "store-routing", "auto", "route each workspace's store calls to its shard (auto: when the directory's catalogue has more than one shard at start; on; off)")
	fs.StringVar(&o.DefaultShard, "default-shard", defaultShard, "the catalogue's shard id of this node's own database: the control database of accounts and sessions, and the shard of workspaces not in the directory")
	fs.IntVar(&o.ShardPoolSize, "shard-pool-size", defaultShardPoolSize, "with store routing, the most connections the node opens to each shard's database other than its own (1 to 1000)")
	fs.StringSliceVar(&o.DirectoryRegions, "directory-regions", nil, "comma-separated regions whose directory replicas this node's client asks in parallel (default: --region)")
	fs.IntVar(&o.DirectoryStreamReplicas, "directory-stream-replicas", 1, "servers of the (external) JetStream cluster that keep each directory stream: 3 for a cluster spanning regions, 1 for a single server")
}

func (o *directoryOptions) validateDirectory() error {
	for _, r := range append([]string{o.Region}, o.DirectoryRegions...) {
		if r == "" || strings.ContainsAny(r, ". *>\t") {
			return fmt.Errorf("region %q: use letters, digits, '-' or '_'", r)
		}
	}
	if o.DirectoryStreamReplicas < 1 || o.DirectoryStreamReplicas > 5 {
		return fmt.Errorf("--directory-stream-replicas %d: want 1 to 5", o.DirectoryStreamReplicas)
	}
	switch o.StoreRouting {
	case "auto", "on", "off":
	default:
		return fmt.Errorf("--store-routing %q: use auto, on or off", o.StoreRouting)
	}
	if o.DefaultShard == "" || strings.ContainsAny(o.DefaultShard, ". *>\t") {
		return fmt.Errorf("--default-shard %q: use letters, digits, '-' or '_'", o.DefaultShard)
	}
	if o.ShardPoolSize < 1 || o.ShardPoolSize > maxShardPoolSize {
		return fmt.Errorf("--shard-pool-size %d: want 1 to %d connections per shard", o.ShardPoolSize, maxShardPoolSize)
	}
	if o.ControlDB != "" && !strings.HasPrefix(o.ControlDB, "postgres://") && !strings.HasPrefix(o.ControlDB, "postgresql://") {
		return errors.New("--control-db must be a postgres:// URL")
	}
	return nil
}

// catalogueConfig is where the control database is: --control-db, else
// the --db database (its tables are prefixed tenantdir_), else
// <data>/control.db.
func catalogueConfig(controlDB, db, dataDir string) tenantdir.CatalogueConfig {
	switch {
	case controlDB != "":
		return tenantdir.CatalogueConfig{PostgresURL: controlDB}
	case db != "":
		return tenantdir.CatalogueConfig{PostgresURL: db}
	default:
		return tenantdir.CatalogueConfig{Path: filepath.Join(dataDir, "control.db")}
	}
}

// jetStreamDir is where the embedded NATS keeps its JetStream files:
// <data>/jetstream on SQLite. A node on PostgreSQL (whose --data is only a
// default, and may be shared by every node started from one directory)
// gets a temporary directory of its own, removed when it stops: the
// streams are derived data, and a relay that finds its streams empty
// republishes the catalogue (tenantdir.Relay).
func (o *serveOptions) jetStreamDir() (dir string, temporary bool, err error) {
	if o.DB == "" {
		dir = filepath.Join(o.DataDir, "jetstream")
		return dir, false, os.MkdirAll(dir, 0o700)
	}
	dir, err = os.MkdirTemp("", "parley-jetstream-")
	return dir, true, err
}

// nodeDirectory is the directory's parts in a node, opened by
// startDirectory and closed in reverse by close.
type nodeDirectory struct {
	cat     *tenantdir.Catalogue
	stop    context.CancelFunc
	relayed chan struct{} // closed when the relay's goroutine ends
	proj    []*tenantdir.Projection
	reps    []*tenantdir.Replica
	client  *tenantdir.Client
	chaos   *tenantdir.Chaos
}

// defaultShard is the shard a node's own database is when the catalogue
// has none: an empty DSN means "the node's own database".
const defaultShard = "local"

// startDirectory opens the directory's parts. It needs JetStream: on a
// clustered embedded bus, or an external NATS without it, the node runs
// without a directory and says so (nothing on a request path needs it
// yet).
func (n *node) startDirectory(ctx context.Context) error {
	o, log := n.opts, n.log.With("component", "tenantdir")
	if n.opts.NATSCluster != "" && n.opts.NATS == "" {
		log.Warn("tenant directory off: the clustered embedded NATS runs without JetStream; use an external NATS with JetStream")
		return nil
	}
	d := &nodeDirectory{chaos: &tenantdir.Chaos{}, relayed: make(chan struct{})}
	n.dir = d
	var err error
	if d.cat, err = tenantdir.OpenCatalogue(ctx, catalogueConfig(o.ControlDB, o.DB, o.DataDir)); err != nil {
		return fmt.Errorf("tenant directory: %w", err)
	}
	shards, err := d.cat.ListShards(ctx)
	if err != nil {
		return fmt.Errorf("tenant directory: %w", err)
	}
	if len(shards) == 0 {
		if _, err := d.cat.AddShard(ctx, tenantdir.Shard{ID: o.DefaultShard, Region: o.Region, Capacity: 1_000_000}); err != nil {
			return fmt.Errorf("tenant directory: default shard: %w", err)
		}
		log.Info("tenant directory: added the default shard (this node's database)", "shard", o.DefaultShard, "region", o.Region)
	}
	nc := tenantdir.NATS{Conn: n.bus.Conn(), Prefix: n.bus.SubjectPrefix(), Replicas: o.DirectoryStreamReplicas}
	relay, err := tenantdir.NewRelay(ctx, tenantdir.RelayConfig{Catalogue: d.cat, NATS: nc, Logger: n.log, Registerer: n.reg})
	if err != nil && o.NATS != "" {
		// An external NATS without JetStream (or with fewer JetStream
		// servers than --directory-stream-replicas): the node serves
		// without a directory rather than not at all.
		log.Warn("tenant directory off: the external NATS cannot keep its streams (no JetStream, or fewer servers than --directory-stream-replicas)",
			"err", err, "stream_replicas", o.DirectoryStreamReplicas)
		d.cat.Close()
		n.dir = nil
		return nil
	}
	if err != nil {
		return fmt.Errorf("tenant directory: %w", err)
	}
	d.cat.SetOnChange(relay.Kick)
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	d.stop = stop
	go func() {
		defer close(d.relayed)
		relay.Run(rctx)
	}()
	for _, aud := range tenantdir.Audiences {
		p, err := tenantdir.StartProjection(ctx, tenantdir.ProjectionConfig{NATS: nc, Audience: aud, Chaos: d.chaos, Logger: n.log})
		if err != nil {
			return err
		}
		d.proj = append(d.proj, p)
		r, err := tenantdir.StartReplica(tenantdir.ReplicaConfig{NATS: nc, Projection: p, Region: o.Region, Chaos: d.chaos, Logger: n.log})
		if err != nil {
			return err
		}
		d.reps = append(d.reps, r)
	}
	regions := o.DirectoryRegions
	if len(regions) == 0 {
		regions = []string{o.Region}
	}
	if d.client, err = tenantdir.NewClient(tenantdir.ClientConfig{NATS: nc, Audience: tenantdir.AudienceAPI, Regions: regions,
		Chaos: d.chaos, Logger: n.log, Registerer: n.reg}); err != nil {
		return err
	}
	log.Info("tenant directory started", "control_db", d.cat.Dialect(), "region", o.Region, "client_regions", regions)
	return nil
}

// workspaceLimits is the API's lookup of a workspace's limits and features
// through this node's client (the api audience's records carry them); nil
// when the node runs without a directory: the global defaults.
func (d *nodeDirectory) workspaceLimits() httpapi.WorkspaceLimitsFunc {
	if d == nil || d.client == nil {
		return nil
	}
	return func(ctx context.Context, ws string) (parley.WorkspaceLimits, error) {
		rec, err := d.client.Lookup(ctx, ws)
		if err != nil {
			return parley.WorkspaceLimits{}, err
		}
		return parley.WorkspaceLimits{Limits: rec.Limits, Features: rec.Features}, nil
	}
}

// onChange has fn called with every workspace change the node's client
// hears (tenantdir.Client.OnChange); nothing without a directory.
func (d *nodeDirectory) onChange(fn func(tenantdir.Record)) {
	if d == nil || d.client == nil {
		return
	}
	d.client.OnChange(fn)
}

// close closes what startDirectory opened, in reverse.
func (d *nodeDirectory) close() {
	if d == nil {
		return
	}
	if d.client != nil {
		d.client.Close()
	}
	for _, r := range d.reps {
		r.Stop()
	}
	for _, p := range d.proj {
		p.Stop()
	}
	if d.stop != nil {
		d.stop()
		<-d.relayed
	}
	if d.cat != nil {
		d.cat.Close()
	}
}

// adminRoutes are the directory's admin endpoints: the chaos switches
// (GET|PUT /tenantdir/chaos) and a lookup through this node's client
// (GET /tenantdir/workspaces/{id}, ?cold=1 to drop the cached entry
// first), DSN passwords redacted; the lookup's duration is in the
// Server-Timing header ("lookup;dur=<ms>").
func (d *nodeDirectory) adminRoutes(mux *http.ServeMux) {
	if d == nil || d.client == nil {
		return
	}
	mux.Handle("/tenantdir/chaos", d.chaos.Handler())
	mux.HandleFunc("GET /tenantdir/workspaces/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		switch r.URL.Query().Get("cold") {
		case "", "0", "false":
		case "1", "true":
			// Drop the cached entry (its last-known-good stays) so that
			// this lookup asks the replicas: what a cold node pays.
			d.client.Invalidate(id)
		default:
			writeJSONError(w, http.StatusBadRequest, parley.EINVALID, "cold must be 1 or 0")
			return
		}
		start := time.Now()
		rec, err := d.client.Lookup(r.Context(), id)
		// The lookup's own time, without HTTP's: what a request path pays.
		w.Header().Set("Server-Timing", fmt.Sprintf("lookup;dur=%.6f", float64(time.Since(start).Nanoseconds())/1e6))
		if err != nil {
			writeAdminError(w, err)
			return
		}
		rec.DSN, rec.TargetDSN = redactDSN(rec.DSN), redactDSN(rec.TargetDSN)
		writeAdminJSON(w, http.StatusOK, rec)
	})
}

// redactDSN hides a DSN's password ("" stays "").
func redactDSN(dsn string) string {
	if dsn == "" {
		return ""
	}
	return redactURL(dsn)
}

func writeAdminError(w http.ResponseWriter, err error) {
	code := parley.ErrorCode(err)
	writeJSONError(w, httpapi.StatusOf(code), code, parley.ErrorMessage(err))
}

func writeAdminJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
