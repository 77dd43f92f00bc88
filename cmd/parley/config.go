package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"parley/nodes"
)

// serveOptions are the settings of `parley serve`, from flags and their
// PARLEY_* environment twins.
type serveOptions struct {
	Listen  string // API listener, host:port
	Admin   string // admin listener; "" or "off" disables it
	DataDir string // SQLite's directory (parley.db inside)
	DB      string // postgres:// URL; selects PostgreSQL
	// DBWait is how long a starting node waits for PostgreSQL to answer
	// (dbwait.go); 0: the first failure ends the start.
	DBWait    time.Duration
	NATS      string // external NATS URL; empty runs an embedded one
	Demo      bool   // seed a demo workspace
	LogLevel  string
	LogFormat string

	NodeID          string   // this node's id on the bus; default <host>-<random>
	NATSCluster     string   // route listen address of the embedded NATS; "" = not clustered
	NATSRoutes      []string // route URLs of other nodes' embedded NATS
	NATSClusterName string   // the embedded cluster's name, the same on every node

	Origins        []string // origins browsers may open the gateway from; empty: the server's own host
	PublicURL      string   // base URL others reach this node's API at; empty: from the bound --listen address
	IdentifyPerMin float64  // identify/resume attempts per client IP per minute; 0: the gateway's default

	limitOptions     // --trusted-proxies, --rate-* (limits.go)
	directoryOptions // --region, --control-db, --directory-regions (directory.go)
	fileOptions      // --files-dir, --s3-*, --file-url-ttl (files.go)
	emailOptions     // --smtp-*, --email-* (email.go)
}

// envPrefix starts the environment twin of every flag: --log-level is
// PARLEY_LOG_LEVEL.
const envPrefix = "PARLEY_"

func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func (o *serveOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:8080", "address of the HTTP API and landing page (port 0 picks a free port)")
	fs.StringVar(&o.Admin, "admin", "127.0.0.1:9091", `address of the admin listener: /metrics, /debug/pprof/, /healthz, /readyz ("off" disables)`)
	fs.StringVar(&o.DataDir, "data", "./data", "data directory; the SQLite database is <data>/parley.db")
	fs.StringVar(&o.DB, "db", "", "PostgreSQL URL (postgres://…); when set, PostgreSQL is used instead of SQLite")
	fs.DurationVar(&o.DBWait, "db-wait", time.Minute, "how long a starting node waits for PostgreSQL while connections to it fail, are ended or stall (a restart, a failover), trying again with backoff; 0: exit at the first failure")
	fs.StringVar(&o.NATS, "nats", "", "URL of an external NATS server or cluster; empty runs an embedded in-process NATS")
	fs.BoolVar(&o.Demo, "demo", false, "seed a demo workspace with users, channels and messages (once; idempotent)")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&o.LogFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.NodeID, "node-id", "", "this node's id on the bus, unique in the cluster (default: host name and a random suffix)")
	fs.StringVar(&o.NATSCluster, "nats-cluster", "", "host:port on which the embedded NATS accepts routes from other nodes; empty: no clustering")
	fs.StringSliceVar(&o.NATSRoutes, "nats-routes", nil, "comma-separated route URLs (nats://host:port) of other nodes' embedded NATS")
	fs.StringVar(&o.NATSClusterName, "nats-cluster-name", "parley", "name of the embedded NATS cluster; the same on every node")
	fs.StringSliceVar(&o.Origins, "origins", nil, `comma-separated origins (scheme://host[:port]) browsers may open the gateway from; "*" allows any (default: the server's own host)`)
	fs.StringVar(&o.PublicURL, "public-url", "", "base URL (http[s]://host[:port][/prefix]) at which clients and other nodes reach this node's API; the node announces it and its ws[s]:// gateway URL (default: from the bound --listen address)")
	fs.Float64Var(&o.IdentifyPerMin, "identify-rate", 0, "identify and resume attempts allowed per client IP per minute (default 120; raise it for load tests from one address)")
	o.registerLimits(fs)
	o.registerDirectory(fs)
	o.registerFiles(fs)
	o.registerEmail(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		f.Usage += " [$" + envName(f.Name) + "]"
	})
}

// applyEnv gives every flag not set on the command line the value of its
// environment twin, if that is set: a flag wins over the environment, the
// environment over the default.
func applyEnv(fs *pflag.FlagSet, lookupEnv func(string) (string, bool)) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		name := envName(f.Name)
		v, ok := lookupEnv(name)
		if !ok {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
		}
	})
	return errors.Join(errs...)
}

// validate checks the options that can be checked before anything starts.
func (o *serveOptions) validate() error {
	if o.Listen == "" {
		return errors.New("--listen is required")
	}
	if o.Admin == "off" {
		o.Admin = ""
	}
	if o.DB != "" {
		u, err := url.Parse(o.DB)
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a password
		}
		if err != nil {
			return fmt.Errorf("--db is not a valid URL: %w", err)
		}
		if u.Scheme != "postgres" && u.Scheme != "postgresql" {
			return errors.New("--db must be a postgres:// URL")
		}
		if o.DBWait < 0 {
			return errors.New("--db-wait must not be negative")
		}
	} else if o.DataDir == "" {
		return errors.New("--data is required when --db is not set")
	}
	if o.IdentifyPerMin < 0 {
		return errors.New("--identify-rate must not be negative")
	}
	if err := validatePublicURL(o.PublicURL); err != nil {
		return err
	}
	if err := o.validateLimits(); err != nil {
		return err
	}
	if err := o.validateDirectory(); err != nil {
		return err
	}
	if err := o.validateFiles(); err != nil {
		return err
	}
	if err := o.validateEmail(); err != nil {
		return err
	}
	if _, err := parseLevel(o.LogLevel); err != nil {
		return err
	}
	if o.LogFormat != "text" && o.LogFormat != "json" {
		return fmt.Errorf("--log-format must be text or json, not %q", o.LogFormat)
	}
	return o.validateCluster()
}

// validateCluster checks the node id and the NATS clustering flags, and
// picks the default node id.
func (o *serveOptions) validateCluster() error {
	if o.NodeID == "" {
		o.NodeID = defaultNodeID()
	}
	if err := nodes.ValidID(o.NodeID); err != nil {
		return fmt.Errorf("--node-id: %w", err)
	}
	if o.NATSCluster == "" {
		if len(o.NATSRoutes) > 0 {
			return errors.New("--nats-routes needs --nats-cluster")
		}
		return nil
	}
	if o.NATS != "" {
		return errors.New("--nats-cluster clusters the embedded NATS; it cannot be used with --nats")
	}
	if _, _, err := net.SplitHostPort(o.NATSCluster); err != nil {
		return fmt.Errorf("--nats-cluster must be host:port: %w", err)
	}
	for _, r := range o.NATSRoutes {
		if !strings.HasPrefix(r, "nats://") && !strings.HasPrefix(r, "nats-route://") {
			return fmt.Errorf("--nats-routes: %q is not a nats://host:port URL", redactURL(r))
		}
	}
	if o.NATSClusterName == "" || strings.ContainsAny(o.NATSClusterName, " \t\r\n") {
		return fmt.Errorf("--nats-cluster-name %q: want a name without spaces", o.NATSClusterName)
	}
	return nil
}

// defaultNodeID is the first label of the host name, reduced to what a node
// id allows, and a random suffix, so that two processes on one host differ.
func defaultNodeID() string {
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(strings.ToLower(host), ".")
	var b strings.Builder
	for _, r := range host {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			b.WriteRune(r)
		}
	}
	name := b.String()
	if len(name) > 40 {
		name = name[:40]
	}
	if name == "" {
		name = "node"
	}
	var suffix [3]byte
	rand.Read(suffix[:])
	return name + "-" + hex.EncodeToString(suffix[:])
}

// sqlitePath is where the SQLite database lives.
func (o *serveOptions) sqlitePath() string { return filepath.Join(o.DataDir, "parley.db") }

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level must be debug, info, warn or error, not %q", s)
	}
	return l, nil
}

// newLogger returns the process's logger, writing to w (stderr).
func newLogger(o *serveOptions, w io.Writer) *slog.Logger {
	level, _ := parseLevel(o.LogLevel) // checked by validate
	hopts := &slog.HandlerOptions{Level: level}
	if o.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, hopts))
	}
	return slog.New(slog.NewTextHandler(w, hopts))
}

// redactURL hides the password of a database or NATS URL before it is
// logged.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}
