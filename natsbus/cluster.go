package natsbus

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Embedded clustering. Several `parley serve` processes, each with its own
// embedded NATS server, form one bus when those servers route to each other:
// each server listens for routes on Config.ClusterListen and dials the
// Config.Routes of the others (the servers then learn of each other's routes,
// so every node may name just one seed).
//
// The embedded server must still open no client port. nats-server's
// DontListen cannot be used for that with routes: the server starts routing
// only after its client accept loop has run, and with DontListen that loop
// never runs, so routing never starts (nats-io/nats-server#5174). Instead the
// clustered server is given a client port that cannot be bound (65536): the
// accept loop fails before any socket exists, and as on any listen failure
// it lets routing start. The one log line of that failure is expected and
// logged at debug level. The bus connects in process as before.

// DefaultClusterName names the embedded cluster unless Config.ClusterName
// says otherwise; every node of one bus must use the same name.
const DefaultClusterName = "parley"

// unbindablePort is outside the TCP port range: listening on it fails
// before a socket is created.
const unbindablePort = 65536

// clusterReadyTimeout bounds the wait for the route listener.
const clusterReadyTimeout = 10 * time.Second

// clustered reports whether cfg asks for embedded clustering.
func (cfg Config) clustered() bool { return cfg.ClusterListen != "" }

// checkCluster rejects cluster settings that cannot work.
func checkCluster(cfg Config) error {
	if !cfg.clustered() {
		if len(cfg.Routes) > 0 {
			return errors.New("nats routes need a cluster listen address")
		}
		return nil
	}
	if cfg.URL != "" {
		return errors.New("nats clustering applies to the embedded server only, not with an external NATS URL")
	}
	if _, _, err := splitListen(cfg.ClusterListen); err != nil {
		return err
	}
	if _, err := parseRoutes(cfg.Routes); err != nil {
		return err
	}
	if strings.ContainsAny(cfg.ClusterName, " \t\r\n") {
		return fmt.Errorf("nats cluster name %q contains whitespace", cfg.ClusterName)
	}
	return nil
}

// splitListen parses "host:port" for the route listener; port 0 picks a
// free port.
func splitListen(hp string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, fmt.Errorf("nats cluster listen address %q: %w", hp, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("nats cluster listen address %q: bad port", hp)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

// parseRoutes parses route URLs: nats://host:port (or nats-route://).
func parseRoutes(routes []string) ([]*url.URL, error) {
	var out []*url.URL
	for _, r := range routes {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		u, err := url.Parse(r)
		if err != nil || (u.Scheme != "nats" && u.Scheme != "nats-route") || u.Hostname() == "" || u.Port() == "" {
			return nil, fmt.Errorf("nats route %q: want nats://host:port", redact(r))
		}
		out = append(out, u)
	}
	return out, nil
}

// applyCluster sets the server options for clustering (cfg.clustered()).
func applyCluster(cfg Config, opts *server.Options) error {
	host, port, err := splitListen(cfg.ClusterListen)
	if err != nil {
		return err
	}
	routes, err := parseRoutes(cfg.Routes)
	if err != nil {
		return err
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	name := cfg.ClusterName
	if name == "" {
		name = DefaultClusterName
	}
	opts.DontListen = false
	opts.Host = "127.0.0.1"
	opts.Port = unbindablePort
	opts.Cluster = server.ClusterOpts{
		Name: name,
		Host: host,
		Port: port,
		// Peers have no client port to offer our in-process client.
		NoAdvertise: true,
	}
	opts.Routes = routes
	return nil
}

// waitClustered waits until the route listener is up, or fails with what
// the server reported.
func waitClustered(srv *server.Server, fatal <-chan string) error {
	deadline := time.Now().Add(clusterReadyTimeout)
	for srv.ClusterAddr() == nil {
		select {
		case msg := <-fatal:
			return fmt.Errorf("embedded nats cluster: %s", msg)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("embedded nats cluster: no route listener after %s", clusterReadyTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// clusterLogger is the clustered server's logger: the expected failure of
// the unbindable client port goes to debug, any other fatal report is also
// handed to waitClustered.
type clusterLogger struct {
	serverLogger
	fatal chan string
}

func (l *clusterLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	if strings.HasPrefix(format, "Error listening on port") && strings.Contains(msg, strconv.Itoa(unbindablePort)) {
		l.log.Debug("client port disabled: " + msg)
		return
	}
	l.log.Error(msg)
	select {
	case l.fatal <- msg:
	default:
	}
}

func newClusterLogger(log *slog.Logger) *clusterLogger {
	return &clusterLogger{serverLogger: serverLogger{log: log}, fatal: make(chan string, 1)}
}

// uniqueServerName is the default server name of a clustered node: names
// must differ within a cluster.
func uniqueServerName(base string) string {
	var b [4]byte
	rand.Read(b[:])
	return base + "-" + hex.EncodeToString(b[:])
}

// ClusterAddr returns the address the embedded server accepts routes on, or
// "" when it is not clustered.
func (b *Bus) ClusterAddr() string {
	if b.srv == nil {
		return ""
	}
	if a := b.srv.ClusterAddr(); a != nil {
		return a.String()
	}
	return ""
}

// ClusterPeers returns how many other embedded servers this one has a route
// to right now (0 when not clustered).
func (b *Bus) ClusterPeers() int {
	if b.srv == nil || b.srv.ClusterAddr() == nil {
		return 0
	}
	rz, err := b.srv.Routez(nil)
	if err != nil {
		return 0
	}
	peers := map[string]bool{}
	for _, r := range rz.Routes {
		peers[r.RemoteID] = true
	}
	return len(peers)
}
