package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
)

// serveOptions are the settings of `parley serve`, from flags and their
// PARLEY_* environment twins.
type serveOptions struct {
	Listen    string // API listener, host:port
	Admin     string // admin listener; "" or "off" disables it
	DataDir   string // SQLite's directory (parley.db inside)
	DB        string // postgres:// URL; selects PostgreSQL
	NATS      string // external NATS URL; empty runs an embedded one
	Demo      bool   // seed a demo workspace
	LogLevel  string
	LogFormat string
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
	fs.StringVar(&o.NATS, "nats", "", "URL of an external NATS server or cluster; empty runs an embedded in-process NATS")
	fs.BoolVar(&o.Demo, "demo", false, "seed a demo workspace with users, channels and messages (once; idempotent)")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&o.LogFormat, "log-format", "text", "log format: text or json")
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
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return errors.New("--db must be a postgres:// URL")
		}
	} else if o.DataDir == "" {
		return errors.New("--data is required when --db is not set")
	}
	if _, err := parseLevel(o.LogLevel); err != nil {
		return err
	}
	if o.LogFormat != "text" && o.LogFormat != "json" {
		return fmt.Errorf("--log-format must be text or json, not %q", o.LogFormat)
	}
	return nil
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
