package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
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
	"parley/gateway"
	"parley/httpapi"
	"parley/liveconfig"
	"parley/natsbus"
	"parley/nodes"
	"parley/presence"
	"parley/querycache"
	"parley/ring"
	"parley/sqlstore"
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

// node is one running Parley process: what serve started, in the order it
// must be stopped.
type node struct {
	opts  serveOptions
	log   *slog.Logger
	reg   *prometheus.Registry
	bus   *natsbus.Bus
	store *sqlstore.Store
	demo  *demoInfo // nil without --demo

	// members is the cluster's live node list, this node included.
	members *nodes.Members
	// cache is the node's query cache (querycache.go).
	cache *querycache.Cache
	// affinity is the ring over the live gateway nodes (affinity.go).
	affinity *ring.Tracker

	// config is the live configuration: read by the store's writes,
	// changed through the admin listener's /config (liveconfig).
	config *liveconfig.Manager

	// The WebSocket gateway (cmd/parley/gateway.go) and its presence.
	gateway  *gateway.Gateway
	presence *presence.Tracker

	api, admin     *http.Server
	apiLn, adminLn net.Listener // adminLn is nil when the admin listener is off

	// ready is true from the moment the listeners serve until shutdown
	// begins; /readyz reports it.
	ready atomic.Bool
}

// serve runs a node until ctx ends (a signal) or a listener fails, then shuts
// it down. It prints the node's address (and the demo logins) to stdout.
func serve(ctx context.Context, o serveOptions, stdout io.Writer, log *slog.Logger) error {
	n, err := startNode(ctx, o, log)
	if err != nil {
		return err
	}
	errc := make(chan error, 2)
	var wg sync.WaitGroup
	run := func(name string, srv *http.Server, ln net.Listener) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("%s listener: %w", name, err)
			}
		}()
	}
	run("api", n.api, n.apiLn)
	if n.admin != nil {
		run("admin", n.admin, n.adminLn)
	}
	n.ready.Store(true)

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
	case runErr = <-errc:
		log.Error("listener failed; shutting down", "err", runErr)
	}
	shutErr := n.shutdown()
	wg.Wait()
	if runErr != nil {
		return runErr
	}
	return shutErr
}

// startNode opens the bus and the store, seeds the demo, and binds the
// listeners. On error, whatever was started is stopped again.
func startNode(ctx context.Context, o serveOptions, log *slog.Logger) (n *node, err error) {
	n = &node{opts: o, log: log, reg: newRegistry()}
	n.config = liveconfig.New(liveconfig.Options{Logger: log, Registerer: n.reg})
	defer func() {
		if err != nil {
			n.closeBackends()
		}
	}()

	bcfg := natsbus.Config{URL: o.NATS, Logger: log, Registerer: n.reg}
	if o.NATSCluster != "" {
		bcfg.ClusterListen, bcfg.Routes, bcfg.ClusterName = o.NATSCluster, o.NATSRoutes, o.NATSClusterName
		bcfg.ServerName = "parley-" + o.NodeID // unique in the cluster
	}
	n.bus, err = natsbus.Start(bcfg)
	if err != nil {
		return nil, err
	}
	scfg := sqlstore.Config{Publisher: n.bus, Logger: log, LiveConfig: n.config}
	if o.DB != "" {
		scfg.PostgresURL = o.DB
		log.Info("opening store", "dialect", "postgres", "url", redactURL(o.DB))
	} else {
		scfg.Path = o.sqlitePath()
		log.Info("opening store", "dialect", "sqlite", "path", scfg.Path)
	}
	n.store, err = sqlstore.Open(ctx, scfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := n.config.Start(ctx, n.store, n.bus); err != nil {
		return nil, err
	}
	if o.Demo {
		n.demo, err = seedDemo(ctx, n.store, log)
		if err != nil {
			return nil, fmt.Errorf("seed demo: %w", err)
		}
	}

	api := httpapi.New(httpapi.Config{Store: n.store, Logger: log, Registerer: n.reg, WSURL: n.wsURLFor, Cache: n.startQueryCache(),
		TrustedProxies: n.opts.proxies, Rates: n.opts.Rates, Live: n.config})
	n.api = &http.Server{
		Handler:           rootHandler(api.Handler(), webui.Dist()),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if n.apiLn, err = net.Listen("tcp", o.Listen); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", o.Listen, err)
	}
	if o.Admin != "" {
		n.admin = &http.Server{
			Handler:           n.adminHandler(),
			ReadHeaderTimeout: readHeaderTimeout,
			ReadTimeout:       readTimeout,
			WriteTimeout:      adminWriteTimeout,
			IdleTimeout:       idleTimeout,
			MaxHeaderBytes:    maxHeaderBytes,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
		if n.adminLn, err = net.Listen("tcp", o.Admin); err != nil {
			n.apiLn.Close()
			return nil, fmt.Errorf("listen on %s (admin): %w", o.Admin, err)
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
		Roles:  []string{"api", ring.GatewayRole},
	}})
	if err != nil {
		return nil, fmt.Errorf("node announce: %w", err)
	}
	n.startAffinity()
	if err := n.startGateway(); err != nil {
		return nil, err
	}
	return n, nil
}

// shutdown stops taking requests, lets those in flight finish (up to
// shutdownTimeout), then closes the store and the bus. The admin listener
// stays up until the end so that the drain can be watched.
func (n *node) shutdown() error {
	n.ready.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	var errs []error
	if err := n.stopGateway(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := n.api.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("api shutdown: %w", err))
		n.api.Close()
	}
	errs = append(errs, n.closeBackends())
	if n.admin != nil {
		if err := n.admin.Shutdown(ctx); err != nil {
			n.admin.Close()
		}
	}
	err := errors.Join(errs...)
	if err != nil {
		n.log.Error("shutdown", "err", err)
	} else {
		n.log.Info("stopped")
	}
	return err
}

// closeBackends closes the store, then the bus: the store publishes its last
// commits to the bus as it stops. It is called once, by startNode's error
// path or by shutdown; the fields stay set (the admin handlers read them).
func (n *node) closeBackends() error {
	var errs []error
	n.stopAffinity()
	n.stopQueryCache()
	n.config.Stop()
	if n.members != nil {
		n.members.Close() // goodbye to the other nodes while the bus is up
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
	return errors.Join(errs...)
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
