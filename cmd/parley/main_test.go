package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"parley/internal/testpg"
	"parley/webui"
)

// These tests build the real binary and run it as a user would: flags, the
// printed banner, the HTTP API, the admin listener, and SIGTERM.

const testVersion = "v0.0.0-test"

var binPath string // built once by TestMain

func TestMain(m *testing.M) {
	if conf := os.Getenv(natsHelperEnv); conf != "" {
		// Re-executed by the region test as a NATS server (netns_test.go).
		os.Exit(runNATSServer(conf))
	}
	dir, err := os.MkdirTemp("", "parley-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "parley")
	build := exec.Command("go", "build", "-o", binPath, "-ldflags", "-X parley.Version="+testVersion, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build parley:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running `parley serve`.
type proc struct {
	cmd      *exec.Cmd
	url      string   // from the banner, with trailing slash
	admin    string   // from the "admin listening" log line; "" when off
	banner   []string // the stdout lines up to the demo logins
	stderr   *syncBuffer
	exited   chan struct{}
	exitErr  error
	waitOnce sync.Once
}

// syncBuffer is a bytes.Buffer safe for the copying goroutine and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// cleanEnv is the test's environment without PARLEY_* variables, so that a
// developer's settings cannot change what the binary under test does.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PARLEY_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

var adminRe = regexp.MustCompile(`"msg":"admin listening".*"url":"([^"]+)"`)

// startParley runs `parley serve args…` and waits for its banner: the
// "Parley is running at" line, plus the two demo lines when --demo is given.
func startParley(t *testing.T, args ...string) *proc {
	t.Helper()
	return startParleyIn(t, "", args...)
}

// startParleyIn is startParley in the network namespace netns ("" for
// this process's own), where the node listens on the namespace's address
// rather than loopback.
func startParleyIn(t *testing.T, netns string, args ...string) *proc {
	t.Helper()
	args = append([]string{"serve", "--log-format", "json", "--log-level", "debug"}, args...)
	cmd := exec.Command(binPath, args...)
	if netns != "" {
		// ip netns exec execs the binary in the namespace: the process is
		// the node itself, so signals reach it.
		cmd = exec.Command("ip", append([]string{"netns", "exec", netns, binPath}, args...)...)
	}
	cmd.Env = cleanEnv()
	// An io.Pipe rather than StdoutPipe: Wait may then run while stdout is
	// still being read.
	stdout, stdoutW := io.Pipe()
	p := &proc{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = stdoutW, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start parley: %v", err)
	}
	go func() {
		p.exitErr = cmd.Wait()
		stdoutW.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("parley stderr:\n%s", p.stderr.String())
		}
	})

	wantLines := 1
	for _, a := range args {
		if a == "--demo" {
			wantLines = 3
		}
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(60 * time.Second)
	for len(p.banner) < wantLines {
		select {
		case line, ok := <-lines:
			if !ok {
				<-p.exited
				t.Fatalf("parley exited before its banner (%v); stdout %q; stderr:\n%s", p.exitErr, p.banner, p.stderr)
			}
			p.banner = append(p.banner, line)
		case <-deadline:
			t.Fatalf("no banner within 60 s; stdout so far %q", p.banner)
		}
	}
	go func() { // keep draining stdout
		for range lines {
		}
	}()
	const prefix = "Parley is running at "
	if !strings.HasPrefix(p.banner[0], prefix) {
		t.Fatalf("first stdout line %q, want %q…", p.banner[0], prefix)
	}
	p.url = strings.TrimPrefix(p.banner[0], prefix)
	urlRe := `^http://127\.0\.0\.1:[1-9][0-9]*/$`
	if netns != "" {
		urlRe = `^http://[0-9.]+:[1-9][0-9]*/$`
	}
	if !regexp.MustCompile(urlRe).MatchString(p.url) {
		t.Fatalf("banner URL %q is not the bound address", p.url)
	}
	adminOn := true
	for i, a := range args {
		if a == "--admin" && i+1 < len(args) && (args[i+1] == "off" || args[i+1] == "") {
			adminOn = false
		}
	}
	if adminOn {
		// stderr is copied by its own goroutine: the line may trail stdout.
		p.waitLog(t, `"msg":"admin listening"`)
		p.admin = adminRe.FindStringSubmatch(p.stderr.String())[1]
	}
	return p
}

// waitLog waits until the process's stderr contains s. Lines logged before
// the banner can arrive after it, since stdout and stderr are separate pipes.
func (p *proc) waitLog(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.stderr.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("parley never logged %q; stderr:\n%s", s, p.stderr)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stop sends SIGTERM and checks for a clean exit within 10 s.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("parley did not exit within 10 s of SIGTERM")
	}
	if p.exitErr != nil {
		t.Fatalf("parley exited with %v; stderr:\n%s", p.exitErr, p.stderr)
	}
	if strings.Contains(p.stderr.String(), `"level":"ERROR"`) {
		t.Fatalf("parley logged errors:\n%s", p.stderr)
	}
}

// client talks to a running node's API.
type client struct {
	t     *testing.T
	base  string // http://host:port/api/v1
	token string
}

func (c *client) do(method, path string, body any, want int, out any) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
}

type apiUser struct {
	ID     string `json:"id"`
	Handle string `json:"handle"`
}

type apiMessage struct {
	ID     string `json:"id"`
	Text   string `json:"text"`
	UserID string `json:"user_id"`
	Seq    int64  `json:"seq"`
}

// login logs in as a demo user and returns a client with the token.
func login(t *testing.T, p *proc, email string) *client {
	t.Helper()
	c := &client{t: t, base: strings.TrimSuffix(p.url, "/") + "/api/v1"}
	var resp struct {
		User  apiUser `json:"user"`
		Token string  `json:"token"`
	}
	c.do("POST", "/auth/login", map[string]string{"email": email, "password": demoPassword}, 200, &resp)
	if resp.Token == "" {
		t.Fatal("login returned no token")
	}
	c.token = resp.Token
	return c
}

// demoState is what the tests read back of the demo through the API.
type demoState struct {
	workspaceID string
	users       map[string]string // handle → id
	dmMessages  []apiMessage
}

func readDemo(t *testing.T, p *proc) (*client, demoState) {
	t.Helper()
	if len(p.banner) < 3 || !strings.Contains(p.banner[1], "log in as alice@demo.parley.dev / parley-demo") {
		t.Fatalf("banner does not give the demo login: %q", p.banner)
	}
	alice := login(t, p, "alice@demo.parley.dev")
	var wss struct {
		Workspaces []struct {
			ID, Slug, Role string
		} `json:"workspaces"`
	}
	alice.do("GET", "/workspaces", nil, 200, &wss)
	var st demoState
	for _, w := range wss.Workspaces {
		if w.Slug == "demo" {
			st.workspaceID = w.ID
		}
	}
	if st.workspaceID == "" || len(wss.Workspaces) != 1 {
		t.Fatalf("alice's workspaces: %+v", wss)
	}
	if !strings.Contains(p.banner[1], st.workspaceID) {
		t.Fatalf("banner %q does not name the workspace %s", p.banner[1], st.workspaceID)
	}
	var dir struct {
		Users []apiUser `json:"users"`
	}
	alice.do("GET", "/workspaces/"+st.workspaceID+"/users?limit=200", nil, 200, &dir)
	st.users = map[string]string{}
	for _, u := range dir.Users {
		st.users[u.Handle] = u.ID
	}
	for _, h := range []string{"alice", "bob", "carol", "dave", "erin"} {
		if st.users[h] == "" {
			t.Fatalf("demo user %s missing from the directory: %+v", h, dir.Users)
		}
	}
	if len(dir.Users) != 5 {
		t.Fatalf("directory has %d users, want 5", len(dir.Users))
	}
	// POST /dms is idempotent: it finds the demo's alice-bob DM.
	var dm struct {
		ID   string `json:"id"`
		Kind string `json:"kind"`
	}
	alice.do("POST", "/dms", map[string]any{"workspace_id": st.workspaceID, "user_ids": []string{st.users["bob"]}}, 200, &dm)
	if dm.Kind != "dm" {
		t.Fatalf("DM kind %q", dm.Kind)
	}
	var hist struct {
		Messages []apiMessage `json:"messages"`
	}
	alice.do("GET", "/channels/"+dm.ID+"/messages", nil, 200, &hist)
	st.dmMessages = hist.Messages
	if len(hist.Messages) != 3 || !strings.Contains(hist.Messages[0].Text, "on-call rotation") {
		t.Fatalf("demo DM history: %+v", hist.Messages)
	}
	return alice, st
}

func adminGet(t *testing.T, p *proc, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(p.admin, "/") + path)
	if err != nil {
		t.Fatalf("admin GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestVersion(t *testing.T) {
	out, err := exec.Command(binPath, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(out)) != testVersion {
		t.Fatalf("version printed %q, want %q (from -ldflags)", out, testVersion)
	}
}

func TestServeRejectsBadFlags(t *testing.T) {
	cmd := exec.Command(binPath, "serve", "--log-format", "xml", "--listen", "127.0.0.1:0", "--admin", "off")
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(string(out), "--log-format") {
		t.Fatalf("bad --log-format: err %v, output %s", err, out)
	}
}

// TestServeDemo is the end-to-end check of a fresh SQLite node with the
// demo, run twice on one data directory to show that seeding is idempotent.
func TestServeDemo(t *testing.T) {
	data := t.TempDir()
	args := []string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--data", data, "--demo"}

	p := startParley(t, args...)
	alice, first := readDemo(t, p)
	if _, err := os.Stat(filepath.Join(data, "parley.db")); err != nil {
		t.Fatalf("no SQLite file in the data dir: %v", err)
	}

	// A channel of the test's own, a post, and history.
	var ch struct {
		ID string `json:"id"`
	}
	alice.do("POST", "/workspaces/"+first.workspaceID+"/channels", map[string]string{"name": "e2e", "kind": "public"}, 201, &ch)
	var msg apiMessage
	alice.do("POST", "/channels/"+ch.ID+"/messages", map[string]string{"text": "hello from the e2e test", "client_msg_id": "e2e-1"}, 201, &msg)
	var hist struct {
		Messages []apiMessage `json:"messages"`
	}
	alice.do("GET", "/channels/"+ch.ID+"/messages", nil, 200, &hist)
	if len(hist.Messages) != 1 || hist.Messages[0].ID != msg.ID {
		t.Fatalf("history of the new channel: %+v", hist.Messages)
	}
	anon := &client{t: t, base: alice.base}
	anon.do("GET", "/workspaces", nil, 401, nil)

	// The landing page and the JSON 404 on the public listener.
	resp, err := http.Get(p.url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The web client when this binary embeds a build, else the not-built page.
	if webui.Built(webui.Dist()) {
		if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") ||
			!strings.Contains(string(body), "<script") {
			t.Fatalf("web client: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Security-Policy"), body)
		}
	} else if resp.StatusCode != 200 || !strings.Contains(string(body), "web client is not built") ||
		!strings.HasPrefix(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("not-built page: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Security-Policy"), body)
	}
	resp, err = http.Get(p.url + "no/such/file.txt")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("unknown path: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var openapi map[string]any
	(&client{t: t, base: alice.base}).do("GET", "/openapi.json", nil, 200, &openapi)

	// The admin listener.
	if code, body := adminGet(t, p, "/healthz"); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	if code, body := adminGet(t, p, "/readyz"); code != 200 {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	code, metrics := adminGet(t, p, "/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{"go_goroutines", "process_cpu_seconds_total", "parley_bus_published_total",
		"parley_bus_publish_errors_total 0", `parley_build_info{version="` + testVersion + `"} 1`, "parley_http_requests_total"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, _ := adminGet(t, p, "/debug/pprof/"); code != 200 {
		t.Fatalf("/debug/pprof/: %d", code)
	}
	p.stop(t)

	// Second run on the same data: nothing is seeded twice, and what the
	// first run wrote is still there.
	p2 := startParley(t, args...)
	p2.waitLog(t, "demo already seeded")
	if strings.Contains(p2.stderr.String(), `"msg":"demo seeded"`) {
		t.Fatalf("second run seeded again:\n%s", p2.stderr)
	}
	alice2, second := readDemo(t, p2)
	if second.workspaceID != first.workspaceID || second.users["bob"] != first.users["bob"] {
		t.Fatalf("second run has another demo: %+v vs %+v", second, first)
	}
	if len(second.dmMessages) != len(first.dmMessages) || second.dmMessages[0].ID != first.dmMessages[0].ID {
		t.Fatalf("DM history changed across restarts: %+v vs %+v", second.dmMessages, first.dmMessages)
	}
	alice2.do("GET", "/channels/"+ch.ID+"/messages", nil, 200, &hist)
	if len(hist.Messages) != 1 || hist.Messages[0].ID != msg.ID {
		t.Fatalf("the first run's post is gone: %+v", hist.Messages)
	}
	p2.stop(t)
}

// TestServePostgres boots on PostgreSQL, with the demo and with the admin
// listener off.
func TestServePostgres(t *testing.T) {
	db := testpg.New(t)
	unused := filepath.Join(t.TempDir(), "unused")
	p := startParley(t, "--listen", "127.0.0.1:0", "--admin", "off", "--db", db, "--demo", "--data", unused)
	p.waitLog(t, "admin listener off")
	p.waitLog(t, `"dialect":"postgres"`)
	readDemo(t, p)
	if _, err := os.Stat(unused); err == nil {
		t.Fatal("a SQLite data dir was made on PostgreSQL")
	}
	p.stop(t)
}

// TestServeExternalNATS runs on the machine's NATS server instead of the
// embedded one.
func TestServeExternalNATS(t *testing.T) {
	const natsURL = "nats://127.0.0.1:4222"
	conn, err := net.DialTimeout("tcp", "127.0.0.1:4222", 2*time.Second)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("NATS at %s is unreachable under CI: %v", natsURL, err)
		}
		t.Skipf("NATS at %s is unreachable: %v", natsURL, err)
	}
	conn.Close()
	p := startParley(t, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--data", t.TempDir(), "--nats", natsURL)
	p.waitLog(t, `"mode":"external"`)
	if code, body := adminGet(t, p, "/readyz"); code != 200 {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	p.stop(t)
}
