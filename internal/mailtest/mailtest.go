// Package mailtest starts a real SMTP server for tests: mailpit, built from
// the Go module proxy at a pinned version, on random loopback ports, with
// its HTTP API to read what it received.
//
// The binary is built once (package gotool) into the user cache directory
// (<cache>/parley/mailpit-<version>/mailpit) and reused by later runs;
// `make mailpit` builds it ahead of `make test`. Concurrent test binaries
// take a file lock around the build. When the binary cannot be built or
// started, the tests that need it are skipped with the reason, unless
// CI=true, where they fail. PARLEY_MAILPIT names a binary to use instead.
//
// Only tests and the build command (cmd/build-mailpit) import it.
package mailtest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"parley/internal/gotool"
	"path/filepath"
	"strconv"
	"testing"
)

// Module and Version are what is built.
const (
	Module  = "github.com/axllent/mailpit"
	Version = "v1.27.11"
)

// Server is a running mailpit.
type Server struct {
	SMTPHost string // 127.0.0.1
	SMTPPort int
	APIURL   string // http://127.0.0.1:port
}

// tool is the binary, built once into the user cache directory
// (package gotool); PARLEY_MAILPIT names one to use instead.
var tool = gotool.Tool{Name: "mailpit", Package: Module, Version: Version, Env: "PARLEY_MAILPIT"}

// BinaryPath is where the binary is built.
func BinaryPath() (string, error) { return tool.Path() }

// Build builds the binary unless it is there already, and returns its path.
func Build() (string, error) { return tool.Build() }

// Start starts a mailpit for the test and stops it at cleanup. It skips
// the test when mailpit cannot be built or started, unless CI=true.
func Start(tb testing.TB) *Server {
	tb.Helper()
	fail := func(err error) {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("mailpit: %v", err)
		}
		tb.Skipf("SKIPPED: no SMTP server (run `make mailpit`; under CI=true this fails): %v", err)
	}
	bin, err := Build()
	if err != nil {
		fail(err)
	}
	srv, stop, err := Run(bin, tb.TempDir())
	if err != nil {
		fail(err)
	}
	tb.Cleanup(stop)
	return srv
}

// Run starts mailpit with its database in dir, SMTP and HTTP on free
// loopback ports, and waits until both listen; stop kills it.
func Run(bin, dir string) (srv *Server, stop func(), err error) {
	smtpPort, err := gotool.FreePort()
	if err != nil {
		return nil, nil, err
	}
	httpPort, err := gotool.FreePort()
	if err != nil {
		return nil, nil, err
	}
	smtpAddr := "127.0.0.1:" + strconv.Itoa(smtpPort)
	httpAddr := "127.0.0.1:" + strconv.Itoa(httpPort)
	cmd := exec.Command(bin, "--smtp", smtpAddr, "--listen", httpAddr,
		"--database", filepath.Join(dir, "mailpit.db"), "--disable-version-check",
		"--smtp-auth-accept-any", "--smtp-auth-allow-insecure", "--quiet")
	if stop, err = gotool.Serve("mailpit", cmd, smtpAddr, httpAddr); err != nil {
		return nil, nil, err
	}
	return &Server{SMTPHost: "127.0.0.1", SMTPPort: smtpPort, APIURL: "http://" + httpAddr}, stop, nil
}

// Address is a name and address in mailpit's API.
type Address struct {
	Name    string `json:"Name"`
	Address string `json:"Address"`
}

// Summary is one message in the list.
type Summary struct {
	ID      string    `json:"ID"`
	From    Address   `json:"From"`
	To      []Address `json:"To"`
	Subject string    `json:"Subject"`
}

// Message is one message in full.
type Message struct {
	ID      string    `json:"ID"`
	From    Address   `json:"From"`
	To      []Address `json:"To"`
	Subject string    `json:"Subject"`
	Text    string    `json:"Text"`
	HTML    string    `json:"HTML"`
}

// Messages lists what mailpit received, newest first.
func (s *Server) Messages(tb testing.TB) []Summary {
	tb.Helper()
	var out struct {
		Messages []Summary `json:"messages"`
	}
	s.get(tb, "/api/v1/messages?limit=500", &out)
	return out.Messages
}

// Message reads one message.
func (s *Server) Message(tb testing.TB, id string) Message {
	tb.Helper()
	var m Message
	s.get(tb, "/api/v1/message/"+url.PathEscape(id), &m)
	return m
}

// Headers reads one message's headers.
func (s *Server) Headers(tb testing.TB, id string) map[string][]string {
	tb.Helper()
	h := map[string][]string{}
	s.get(tb, "/api/v1/message/"+url.PathEscape(id)+"/headers", &h)
	return h
}

// Clear deletes every message.
func (s *Server) Clear(tb testing.TB) {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodDelete, s.APIURL+"/api/v1/messages", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("mailpit: clear: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("mailpit: clear: %s", resp.Status)
	}
}

func (s *Server) get(tb testing.TB, path string, v any) {
	tb.Helper()
	resp, err := http.Get(s.APIURL + path)
	if err != nil {
		tb.Fatalf("mailpit: GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("mailpit: GET %s: %s: %s", path, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		tb.Fatalf("mailpit: GET %s: %v: %s", path, err, body)
	}
}
