package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// A start that fails exits 1 with one line on stderr that says what is
// wrong (and, for an address, which flag changes it), never a panic, and
// leaves nothing behind.

// holdPort listens on a free loopback port until the test ends and returns
// its address: a port that is taken.
func holdPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// freePort is a port to hand to the node: free now, checked free again
// after the node failed.
func freePort(t *testing.T) string { return closedPort(t) }

// mustBindable fails unless addr can be listened on: whatever the failed
// start bound, it let go of.
func mustBindable(t *testing.T, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("%s is still taken after the failed start: %v", addr, err)
	}
	ln.Close()
}

type startFailure struct {
	name string
	args []string
	env  []string
	want []string // in the error line
	not  []string // never in the output
}

func startFailures(t *testing.T) []startFailure {
	taken, closed := holdPort(t), closedPort(t)
	dataFile := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(dataFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return []startFailure{
		{name: "APIPortTaken", args: []string{"--listen", taken, "--admin", "off"},
			want: []string{"listen on " + taken + ": address already in use", "--listen", "PARLEY_LISTEN"}},
		{name: "AdminPortTaken", args: []string{"--admin", taken},
			want: []string{"listen on " + taken + ": address already in use", "--admin", "PARLEY_ADMIN"}},
		{name: "ListenNotAnAddress", args: []string{"--listen", "nonsense"},
			want: []string{"listen on nonsense", "missing port", "--listen"}},
		{name: "DBUnreachable", args: []string{"--db", "postgres://postgres:hunter2@" + closed + "/parley", "--db-wait", "1s"},
			want: []string{"open store", "connection refused", "did not answer within --db-wait"}, not: []string{"hunter2"}},
		{name: "DBUnreachableNoWait", args: []string{"--db", "postgres://postgres@" + closed + "/parley", "--db-wait", "0"},
			want: []string{"open store", "connection refused"}},
		{name: "DBWaitNegative", args: []string{"--db", "postgres://postgres@" + closed + "/parley", "--db-wait", "-1s"},
			want: []string{"--db-wait must not be negative"}},
		{name: "DBBadURL", args: []string{"--db", "postgres://postgres:hunter2@127.0.0.1:notaport/parley"},
			want: []string{"--db is not a valid URL", "invalid port"}, not: []string{"hunter2"}},
		{name: "DBNotPostgres", args: []string{"--db", "mysql://root@127.0.0.1/parley"},
			want: []string{"--db must be a postgres:// URL"}},
		{name: "DataIsAFile", args: []string{"--data", dataFile},
			want: []string{"open store", dataFile, "not a directory"}},
		{name: "NATSUnreachable", args: []string{"--nats", "nats://" + closed},
			want: []string{"start bus", closed}},
		{name: "NATSClusterPortTaken", args: []string{"--nats-cluster", taken},
			want: []string{"start bus", "address already in use"}},
		{name: "NATSClusterNotHostPort", args: []string{"--nats-cluster", "nonsense"},
			want: []string{"--nats-cluster must be host:port"}},
		{name: "NATSRouteNotNATS", args: []string{"--nats-cluster", "127.0.0.1:0", "--nats-routes", "http://other:6222"},
			want: []string{"--nats-routes", "http://other:6222"}},
		{name: "NATSClusterWithNATS", args: []string{"--nats-cluster", "127.0.0.1:0", "--nats", "nats://" + closed},
			want: []string{"cannot be used with --nats"}},
		{name: "LogLevel", args: []string{"--log-level", "loud"},
			want: []string{"--log-level must be debug, info, warn or error"}},
		{name: "PublicURL", args: []string{"--public-url", "ftp://chat.example"},
			want: []string{"--public-url must start with http:// or https://"}},
		{name: "NodeID", args: []string{"--node-id", "bad id!"},
			want: []string{"--node-id"}},
		{name: "EnvNotANumber", env: []string{"PARLEY_IDENTIFY_RATE=lots"},
			want: []string{"PARLEY_IDENTIFY_RATE"}},
	}
}

func TestServeStartFailures(t *testing.T) {
	for _, tc := range startFailures(t) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			listen, admin := freePort(t), freePort(t)
			// The case's own flags come last and win over these defaults.
			args := append([]string{"serve", "--listen", listen, "--admin", admin, "--data", t.TempDir()}, tc.args...)
			cmd := exec.Command(binPath, args...)
			cmd.Env = cleanEnv(tc.env...)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("exit: %v, want status 1; stderr:\n%s", err, stderr.String())
			}
			out := stdout.String() + stderr.String()
			for _, bad := range append([]string{"panic", "goroutine ", "Parley is running"}, tc.not...) {
				if strings.Contains(out, bad) {
					t.Fatalf("output contains %q:\n%s", bad, out)
				}
			}
			var errLines []string
			for line := range strings.Lines(stderr.String()) {
				if strings.HasPrefix(line, "parley: ") {
					errLines = append(errLines, strings.TrimSuffix(line, "\n"))
				}
			}
			if len(errLines) != 1 || !strings.HasSuffix(stderr.String(), errLines[0]+"\n") {
				t.Fatalf("want one error line, last on stderr; stderr:\n%s", stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(errLines[0], w) {
					t.Errorf("error line %q does not say %q", errLines[0], w)
				}
			}
			mustBindable(t, listen)
			mustBindable(t, admin)
		})
	}
}

// In one process (as the tests and an embedding would run it), a failed
// start returns its error and closes what it had opened: the listeners it
// bound are free again and the embedded bus and store are closed.
func TestServeStartFailureReleasesListeners(t *testing.T) {
	taken := holdPort(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"AdminPortTaken", []string{"--admin", taken}, "PARLEY_ADMIN"},
		{"DataIsAFile", []string{"--data", filepath.Join(t.TempDir(), "f", "x")}, "open store"},
		{"DBUnreachable", []string{"--db", "postgres://postgres@" + closedPort(t) + "/x", "--db-wait", "500ms"}, "open store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "DataIsAFile" {
				os.WriteFile(filepath.Dir(tc.args[1]), nil, 0o600)
			}
			listen, admin := freePort(t), freePort(t)
			var o serveOptions
			fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
			o.register(fs)
			args := append([]string{"--listen", listen, "--admin", admin, "--data", t.TempDir()}, tc.args...)
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			if err := o.validate(); err != nil {
				t.Fatal(err)
			}
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			err := serve(context.Background(), o, io.Discard, log)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("serve: %v, want an error saying %q", err, tc.want)
			}
			mustBindable(t, listen)
			if tc.name != "AdminPortTaken" {
				mustBindable(t, admin)
			}
		})
	}
}
