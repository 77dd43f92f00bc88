package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"parley"
	"parley/affinity"
	"parley/auditlog"
	"parley/files"
	"parley/gateway"
	"parley/hot"
	"parley/httpapi"
	"parley/internal/promutil"
	"parley/liveconfig"
	"parley/natsbus"
	"parley/nodes"
	"parley/notify"
	"parley/presence"
	"parley/purge"
	"parley/querycache"
	"parley/recent"
	"parley/shardstore"
	"parley/sqlstore"
	"parley/storeguard"
	"parley/webui"
)

// HTTP server limits. The API's slowest legitimate request is a large
// history page; anything slower than these is a stuck or hostile client.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 64 << 10
	// adminWriteTimeout leaves room for a 30 s CPU profile or trace.
	adminWriteTimeout = 2 * time.Minute
	// shutdownTimeout bounds how long in-flight requests may take to finish
	// after a signal.
	shutdownTimeout = 20 * time.Second
)

func newServeCmd(lookupEnv func(string) (string, bool)) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a Parley node (API, bus and store)",
		Long: "Run a Parley node. Every flag has an environment twin, PARLEY_ and the flag's\n" +
			"name in capitals with '-' as '_' (--log-level: PARLEY_LOG_LEVEL); a flag given\n" +
			"on the command line wins over its environment variable.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags(), lookupEnv); err != nil {
				return err
			}
			if err := o.validate(); err != nil {
				return err
			}
			log := newLogger(&o, cmd.ErrOrStderr())
			slog.SetDefault(log)
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return serve(ctx, o, cmd.OutOrStdout(), log)
		},
	}
	o.register(cmd.Flags())
	return cmd
}

// node is one Parley process. Run opens its parts one after the other, in
// the order the fields are listed, and starts serving; Close closes what was
// opened, in reverse, whether Run got to the end or failed half way. A nil
// field is a part that was never opened.
type node struct {
	opts serveOptions
	log  *slog.Logger
	reg  *prometheus.Registry

	bus   *natsbus.Bus
	store *sqlstore.Store
	// guarded is the store behind its bulkheads and circuit breaker
	// (storeguard): what the API, the gateway and the query cache call.
	guarded *storeguard.Guard
	// chat is what the API, the gateway, the query cache and the purger
	// call: guarded, or the store router over the directory's shards
	// (router, routing.go) when store routing is on.
	chat   parley.Store
	router *shardstore.Router
	// config is the live configuration: read by the store's writes,
	// changed through the admin listener's /config (liveconfig). It exists
	// before the store (which reads it).
	config *liveconfig.Manager
	demo   *demoInfo // nil without --demo
	// cache is the node's query cache (the Flannel role: the directory,
	// /users/batch, the switcher, mention suggestions, channel headers and
	// the gateway's just-in-time users, answered from memory).
	cache *querycache.Cache
	// hot is the node's hot-channel detector (package hot): the gateway
	// observes its channels' durable events and reads the marks.
	hot *hot.Detector
	// files stores and serves uploads (package files); sweeping counts its
	// sweeper goroutine, which stopSweep stops.
	files     *files.Service
	stopSweep context.CancelFunc
	sweeping  sync.WaitGroup
	// recent buffers the hot channels' latest events and answers /events
	// and /sync from them (package recent); the API reads through it.
	recent *recent.Buffer
	// purger removes deleted workspaces' files and rows in the
	// background (package purge); Files is the files feature's hook.
	purger *purge.Purger
	// notifier emails missed mentions and DMs (email.go); nil without
	// --smtp-host.
	notifier *notify.Notifier
	// audit writes the bot audit log (auditlog); closed after the API.
	audit *auditlog.Writer

	// dir is the tenant directory's parts (directory.go); nil when off.
	dir *nodeDirectory
	// jetStreamTmp is the embedded NATS's temporary JetStream directory,
	// removed after the bus closes ("" when none).
	jetStreamTmp string

	apiLn, adminLn net.Listener // adminLn is nil when the admin listener is off

	// members is the cluster's live node list, this node included.
	members *nodes.Members
	// affinity is the ring over the live gateway nodes (affinity.go).
	affinity *affinity.Tracker
	// The WebSocket gateway (gateway.go) and its presence.
	presence *presence.Tracker
	gateway  *gateway.Gateway

	api, admin *http.Server
	// serving counts the Serve goroutines; failed receives the error of a
	// listener that stopped on its own.
	serving sync.WaitGroup
	failed  chan error

	// ready is true from the moment the listeners serve until Close
	// begins; /readyz reports it.
	ready     atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

func newNode(o serveOptions, log *slog.Logger) *node {
	return &node{opts: o, log: log, failed: make(chan error, 2)}
}

// serve runs a node until ctx ends (a signal) or a listener fails, then
// closes it. It prints the node's address (and the demo logins) to stdout.
func serve(ctx context.Context, o serveOptions, stdout io.Writer, log *slog.Logger) error {
	n := newNode(o, log)
	if err := n.Run(ctx); err != nil {
		n.Close()
		return err
	}
	url := "http://" + displayAddr(n.apiLn.Addr()) + "/"
	log.Info("parley started", "version", parley.Version, "url", url, "addr", n.apiLn.Addr().String(),
		"store", string(n.store.Dialect()), "bus_embedded", n.bus.Embedded())
	fmt.Fprintf(stdout, "Parley is running at %s\n", url)
	if n.demo != nil {
		n.demo.print(stdout)
	}

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "reason", context.Cause(ctx))
	case runErr = <-n.failed:
		log.Error("listener failed; shutting down", "err", runErr)
	}
	if err := n.Close(); runErr == nil {
		runErr = err
	}
	return runErr
}

// exporter streams workspace exports: from each workspace's shard when
// store routing is on.
func (n *node) exporter() parley.Exporter {
	if n.router != nil {
		return n.router
	}
	return n.store
}

// notifyStore keeps email preferences and the notifier's state: the
// router when store routing is on (preferences and claims on the control
// database, unread items from every shard).
func (n *node) notifyStore() parley.NotifyStore {
	if n.router != nil {
		return n.router
	}
	return n.store
}

// Run opens the node's parts in order (the bus, the store, the live
// configuration, the demo, the query cache, the listeners, the membership,
// the affinity ring, presence and the gateway) and starts serving. It
// returns the first failure; the caller then calls Close, which closes
// whatever was opened.
func (n *node) Run(ctx context.Context) (err error) {
	o, log := n.opts, n.log
	n.reg = newRegistry()
	n.config = liveconfig.New(liveconfig.Options{Logger: log, Registerer: n.reg})

	bcfg := natsbus.Config{URL: o.NATS, Logger: log, Registerer: n.reg}
	if o.NATSCluster != "" {
		bcfg.ClusterListen, bcfg.Routes, bcfg.ClusterName = o.NATSCluster, o.NATSRoutes, o.NATSClusterName
		bcfg.ServerName = "parley-" + o.NodeID // unique in the cluster
	}
	if o.NATS == "" && o.NATSCluster == "" {
		// JetStream for the tenant directory's streams (directory.go).
		// A directory that cannot be made leaves JetStream off: the store
		// (whose --data it is) says what is wrong, and the directory fails.
		if dir, temporary, jerr := o.jetStreamDir(); jerr == nil {
			bcfg.JetStreamDir = dir
			if temporary {
				n.jetStreamTmp = dir
			}
		}
	}
	if n.bus, err = natsbus.Start(bcfg); err != nil {
		return fmt.Errorf("start bus: %w", err)
	}

	scfg := sqlstore.Config{Publisher: n.bus, Logger: log, LiveConfig: n.config, Caps: o.Caps}
	if o.DB != "" {
		scfg.PostgresURL = o.DB
		log.Info("opening store", "dialect", "postgres", "url", redactURL(o.DB))
	} else {
		scfg.Path = o.sqlitePath()
		log.Info("opening store", "dialect", "sqlite", "path", scfg.Path)
	}
	// The database steps wait for a database that is briefly unavailable
	// (dbwait.go), all of them against one --db-wait.
	db := newDBStartup(o, log)
	if err := db.do(ctx, "open store", func(ctx context.Context) (err error) {
		n.store, err = sqlstore.Open(ctx, scfg)
		return err
	}); err != nil {
		return fmt.Errorf("open store: %w", err)
	}

	if err := n.startDirectory(ctx); err != nil {
		return err // it says "tenant directory: …"
	}

	if err := db.do(ctx, "live config", func(ctx context.Context) error {
		return n.config.Start(ctx, n.store, n.bus)
	}); err != nil {
		return err // it says "live config: …"
	}
	n.guarded = storeguard.New(storeguard.Config{Store: n.store, Live: n.config,
		Database: string(n.store.Dialect()), Logger: log, Registerer: n.reg})
	n.chat = n.guarded
	if err := n.startRouting(ctx, scfg); err != nil {
		return err // it says "store routing: …"
	}

	if o.Demo {
		if n.demo, err = seedDemo(ctx, n.store, log); err != nil {
			return fmt.Errorf("seed demo: %w", err)
		}
	}

	n.cache = querycache.New(querycache.Config{Store: n.chat, Bus: n.bus, Logger: log, Registerer: n.reg})
	if n.hot, err = hot.New(hot.Config{Live: n.config, Bus: n.bus, NodeID: o.NodeID, Logger: log, Registerer: n.reg}); err != nil {
		return err // it says "hot: …"
	}
	if n.recent, err = recent.New(recent.Config{Store: n.chat, Bus: n.bus, Hot: n.hot, Access: n.cache.CanRead,
		Live: n.config, Logger: log, Registerer: n.reg}); err != nil {
		return err
	}

	if n.apiLn, err = listen(o.Listen, "listen"); err != nil {
		return err
	}
	if o.Admin != "" {
		if n.adminLn, err = listen(o.Admin, "admin"); err != nil {
			return err
		}
		addr := n.adminLn.Addr().(*net.TCPAddr)
		log.Info("admin listening", "addr", addr.String(), "url", "http://"+displayAddr(addr)+"/")
		if !addr.IP.IsLoopback() {
			log.Warn("the admin listener (metrics, pprof) is reachable from other hosts", "addr", addr.String())
		}
	} else {
		log.Info("admin listener off")
	}

	// Announce this node once its listeners are bound: the URLs are real.
	apiURL, wsURL := announcedURLs(o.PublicURL, n.apiLn.Addr())
	n.members, err = nodes.Start(nodes.Config{Bus: n.bus, Logger: log, Self: nodes.Node{
		ID:     o.NodeID,
		APIURL: apiURL,
		WSURL:  wsURL,
		Roles:  []string{"api", affinity.GatewayRole},
	}})
	if err != nil {
		return fmt.Errorf("node announce: %w", err)
	}
	n.affinity = affinity.Track(n.members)
	n.warnLoopbackAnnounce()

	if err := n.openGateway(); err != nil {
		return err
	}

	storage, where, err := o.openFileStorage(ctx)
	if err != nil {
		return fmt.Errorf("open file storage: %w", err)
	}
	log.Info("file storage", "at", where)
	var fileStore parley.FileService = n.guarded.Files(n.store)
	if n.router != nil {
		fileStore = n.router // file metadata on each workspace's shard, behind its guard
	}
	n.files = files.New(files.Config{Storage: storage, Store: fileStore, Live: n.config, URLTTL: o.FileURLTTL,
		Logger: log, Registerer: n.reg})
	sweepCtx, stopSweep := context.WithCancel(context.Background())
	n.stopSweep = stopSweep
	n.sweeping.Go(func() { n.files.Run(sweepCtx) })

	// Deleted workspaces: their purge resumes here after a restart. The
	// files service removes their stored files first (purge.Config.Files).
	n.purger = purge.New(purge.Config{Store: n.chat, Files: n.files, Logger: log, Registerer: n.reg})
	if err := n.purger.Resume(context.Background()); err != nil {
		log.Warn("workspace purges not all resumed (a listing the store could not finish is retried in the background)", "err", err)
	}

	if err := n.startNotifier(apiURL); err != nil {
		return err
	}

	// The bot audit log is written off the request path, in batches; it
	// is flushed at shutdown after the API has drained (close).
	integStore := n.guarded.Integrations(n.store)
	if n.router != nil {
		integStore = n.router // bots, webhooks, commands and their audit on each workspace's shard
	}
	n.audit = auditlog.New(auditlog.Config{Store: integStore, Logger: log, Registerer: n.reg})

	panics := promutil.Panics(n.reg)
	api := httpapi.New(httpapi.Config{Store: n.recent.Wrap(n.chat), Exporter: n.exporter(), Logger: log, Registerer: n.reg, WSURL: n.wsURLFor, Directory: n.cache,
		TrustedProxies: n.opts.proxies, Rates: n.opts.Rates, Live: n.config,
		LiveNodes:        func() int { return len(n.members.Live()) },
		Integrations:     integStore,
		Audit:            n.audit,
		Files:            n.files,
		Notify:           n.notifyStore(),
		NotifySecret:     []byte(o.EmailSecret),
		EmailEnabled:     n.notifier != nil,
		WorkspaceLimits:  n.dir.workspaceLimits(),
		Caps:             o.Caps,
		WorkspaceDeleted: n.purger.Start})
	n.api = newHTTPServer(httpapi.Recover(log, panics, rootHandler(api.Handler(), n.gateway, webui.Dist())), writeTimeout, log)
	n.serve("api", n.api, n.apiLn)
	if n.adminLn != nil {
		n.admin = newHTTPServer(httpapi.Recover(log, panics, n.adminHandler()), adminWriteTimeout, log)
		n.serve("admin", n.admin, n.adminLn)
	}
	n.ready.Store(true)
	return nil
}

// newHTTPServer is an http.Server with the node's limits.
func newHTTPServer(h http.Handler, writeTimeout time.Duration, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// serve serves srv on ln until Close; a listener that stops on its own is
// reported on n.failed.
func (n *node) serve(name string, srv *http.Server, ln net.Listener) {
	n.serving.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.failed <- fmt.Errorf("%s listener: %w", name, err)
		}
	})
}

// listen binds addr, the value of the flag named flag. A failure says which
// flag and environment variable change the address: a port already taken
// is the most common way a first start fails.
func listen(addr, flag string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	// net's error repeats the address ("listen tcp 127.0.0.1:8080: bind:
	// address already in use"); keep its cause only.
	cause := err
	var sys *os.SyscallError
	if errors.As(err, &sys) {
		cause = sys.Err
	} else if op := (*net.OpError)(nil); errors.As(err, &op) {
		cause = op.Err
	}
	hint := ""
	if flag == "admin" {
		hint = `; "off" turns it off`
	}
	return nil, fmt.Errorf("listen on %s: %w (change it with --%s or %s%s)", addr, cause, flag, envName(flag), hint)
}

// Close stops the node: it closes the parts Run opened in the reverse order,
// skipping those it never got to, with two exceptions. Public traffic goes
// first: the gateway tells its clients to reconnect elsewhere and drains
// (its hijacked sockets are its own to close, http.Server.Shutdown does not
// touch them), then the API lets the requests in flight finish, up to
// shutdownTimeout, before the parts they use go. The admin listener goes
// last, so that the drain can be watched. Close may be called more than
// once; later calls return the first one's result.
func (n *node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.close() })
	return n.closeErr
}

func (n *node) close() error {
	n.ready.Store(false)
	var errs []error
	if n.gateway != nil {
		// The gateway's drain may linger for handovers (--drain-handover,
		// again after each session taken, at most MaxLingerFactor times
		// it) on top of closing its sockets; the rest gets shutdownTimeout
		// afterwards.
		gctx, gcancel := context.WithTimeout(context.Background(),
			shutdownTimeout+gateway.MaxLingerFactor*max(0, n.opts.DrainHandover))
		if err := n.gateway.Shutdown(gctx); err != nil {
			errs = append(errs, fmt.Errorf("gateway shutdown: %w", err))
		}
		gcancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if n.api != nil {
		if err := n.api.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("api shutdown: %w", err))
			n.api.Close()
		}
	} else if n.apiLn != nil {
		n.apiLn.Close()
	}
	if n.audit != nil {
		if err := n.audit.Close(ctx); err != nil { // flushes what the requests queued
			errs = append(errs, err)
		}
	}
	if n.purger != nil {
		n.purger.Close() // stops between batches; resumed on the next start
	}
	if n.stopSweep != nil {
		n.stopSweep() // the sweeper stops before the store closes
		n.sweeping.Wait()
	}
	if n.notifier != nil {
		n.notifier.Close() // waits for a scan in progress
	}
	if n.presence != nil {
		n.presence.Close() // says goodbye on the bus
	}
	if n.affinity != nil {
		n.affinity.Close()
	}
	if n.members != nil {
		n.members.Close() // goodbye to the other nodes while the bus is up
	}
	if n.recent != nil {
		n.recent.Close()
	}
	if n.hot != nil {
		n.hot.Close() // announces its marks off while the bus is up
	}
	if n.cache != nil {
		n.cache.Close()
	}
	if n.config != nil {
		n.config.Stop() // nothing when it was not started
	}
	n.dir.close() // before the bus its relay and replicas use
	// The stores publish their last commits to the bus as they stop:
	// the shards the router opened, then the node's own.
	if n.router != nil {
		if err := n.router.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close shards: %w", err))
		}
	}
	if n.store != nil {
		if err := n.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close store: %w", err))
		}
	}
	if n.bus != nil {
		if err := n.bus.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close bus: %w", err))
		}
	}
	if n.jetStreamTmp != "" {
		os.RemoveAll(n.jetStreamTmp)
	}
	if n.admin != nil {
		if err := n.admin.Shutdown(ctx); err != nil {
			n.admin.Close()
		}
	} else if n.adminLn != nil {
		n.adminLn.Close()
	}
	n.serving.Wait()
	err := errors.Join(errs...)
	switch {
	case err != nil:
		n.log.Error("shutdown", "err", err)
	case n.api != nil: // it ran; a failed start says why on its own
		n.log.Info("stopped")
	}
	return err
}

// newRegistry returns the process's metrics registry with the Go runtime and
// process collectors, the store's (process-wide) metrics and a build-info
// gauge.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	reg.MustRegister(sqlstore.Collectors()...)
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "parley_build_info",
		Help:        "Always 1; the version label says which build runs.",
		ConstLabels: prometheus.Labels{"version": parley.Version},
	})
	info.Set(1)
	reg.MustRegister(info)
	return reg
}

// displayAddr turns a bound address into the host:port a person can open:
// an unspecified IP (":8080", "[::]:8080") becomes 127.0.0.1.
func displayAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	host := tcp.IP.String()
	if tcp.IP == nil || tcp.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}
