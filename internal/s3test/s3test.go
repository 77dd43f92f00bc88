// Package s3test starts a real S3 server for tests: versitygw, built from
// the Go module proxy at a pinned version with a POSIX backend in a
// temporary directory, on a random loopback port.
//
// The binary is built once (package gotool) into the user cache directory
// (<cache>/parley/versitygw-<version>/versitygw) and reused by every later
// run; `make s3-server` builds it ahead of `make test`. Concurrent test
// binaries take a file lock around the build. When the build fails the
// tests that need it are skipped with the reason, unless CI=true, where
// they fail. PARLEY_VERSITYGW names a binary to use instead.
//
// It must only ever be imported by tests, their build command
// (cmd/build-s3-server) and benchmarks.
package s3test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"parley/internal/gotool"
	"strconv"
	"testing"
)

// Module and Version are what is built.
const (
	Module  = "github.com/versity/versitygw"
	Version = "v1.8.0"
)

// Server is a running versitygw.
type Server struct {
	Endpoint  string // http://127.0.0.1:port
	AccessKey string
	SecretKey string
}

// tool is the binary, built once into the user cache directory
// (package gotool); PARLEY_VERSITYGW names one to use instead.
var tool = gotool.Tool{Name: "versitygw", Package: Module + "/cmd/versitygw", Version: Version, Env: "PARLEY_VERSITYGW"}

// BinaryPath is where the binary is built.
func BinaryPath() (string, error) { return tool.Path() }

// Build builds the binary unless it is there already, and returns its path.
func Build() (string, error) { return tool.Build() }

// Start starts a versitygw for the test and stops it at cleanup. It skips
// the test when the binary cannot be built, unless CI=true.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := Build()
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("S3 server: %v", err)
		}
		tb.Skipf("SKIPPED: no S3 server (run `make s3-server`): %v", err)
	}
	srv, stop, err := Run(bin, tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
	return srv
}

// Run starts the versitygw binary with a POSIX backend in root, on a free
// loopback port, and waits until it listens; stop kills it.
func Run(bin, root string) (srv *Server, stop func(), err error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, nil, fmt.Errorf("s3test: %w", err)
	}
	srv = &Server{AccessKey: "parley" + randHex(4), SecretKey: randHex(16)}
	port, err := gotool.FreePort()
	if err != nil {
		return nil, nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(bin, "--access", srv.AccessKey, "--secret", srv.SecretKey,
		"--port", addr, "posix", root)
	if stop, err = gotool.Serve("versitygw", cmd, addr); err != nil {
		return nil, nil, err
	}
	srv.Endpoint = "http://" + addr
	return srv, stop, nil
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
