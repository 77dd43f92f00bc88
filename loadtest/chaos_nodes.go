package loadtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx" driver
)

// The processes of a chaos run: a fresh PostgreSQL database, a fault proxy
// in front of it, and N `parley serve` nodes of the same binary whose
// embedded NATS servers form one cluster (or which share an external NATS).
// Every node keeps its ports across restarts, so that clients that know
// the cluster's URLs find a restarted node where it was.

// chaosNode is one `parley serve` process slot.
type chaosNode struct {
	idx     int
	args    []string
	exec    []string
	logPath string
	api     string // base URL, http://127.0.0.1:port
	admin   string // admin base URL

	mu      sync.Mutex
	cmd     *exec.Cmd     // guarded by mu; nil while down
	exited  chan struct{} // closed when cmd ends; guarded by mu
	stopped bool          // SIGSTOPped; guarded by mu
	starts  int           // guarded by mu
}

// freePorts returns n distinct free loopback ports.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var out []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// newChaosNodes lays out n nodes: their ports, their flags, their logs.
func newChaosNodes(execCmd []string, n int, dbURL, natsURL, dir string) ([]*chaosNode, error) {
	ports, err := freePorts(3 * n)
	if err != nil {
		return nil, err
	}
	nodes := make([]*chaosNode, n)
	for i := range n {
		api, admin, cluster := ports[3*i], ports[3*i+1], ports[3*i+2]
		args := []string{"serve", "--log-format", "json", "--log-level", "info",
			"--listen", "127.0.0.1:" + strconv.Itoa(api), "--admin", "127.0.0.1:" + strconv.Itoa(admin),
			"--db", dbURL, "--node-id", fmt.Sprintf("chaos%d", i),
			// Every client comes from 127.0.0.1: per-IP limits would throttle
			// the run, not the people it stands for.
			"--identify-rate", "1000000", "--rate-message-ip", "off", "--rate-message-user", "off"}
		if natsURL != "" {
			args = append(args, "--nats", natsURL)
		} else {
			args = append(args, "--nats-cluster", "127.0.0.1:"+strconv.Itoa(cluster))
			var routes []string
			for j := range n {
				if j != i {
					routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(ports[3*j+2]))
				}
			}
			if len(routes) > 0 {
				args = append(args, "--nats-routes", strings.Join(routes, ","))
			}
		}
		nodes[i] = &chaosNode{idx: i, args: args, exec: execCmd,
			logPath: filepath.Join(dir, fmt.Sprintf("node-%d.log", i)),
			api:     "http://127.0.0.1:" + strconv.Itoa(api),
			admin:   "http://127.0.0.1:" + strconv.Itoa(admin)}
	}
	return nodes, nil
}

// startNodes starts every node with a fresh log and waits until each is
// ready; stop terminates them all. On an error the nodes already started
// are terminated before it returns.
func startNodes(ctx context.Context, nodes []*chaosNode) (stop func(), err error) {
	stop = func() {
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Go(func() { n.terminate(15 * time.Second) })
		}
		wg.Wait()
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	for _, n := range nodes {
		_ = os.Remove(n.logPath)
		if err := n.start(); err != nil {
			return nil, err
		}
	}
	for _, n := range nodes {
		if err := n.waitReady(ctx, 60*time.Second); err != nil {
			return nil, err
		}
	}
	return stop, nil
}

// start runs the node's process (its output appended to its log).
func (n *chaosNode) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("node %d is already running", n.idx)
	}
	f, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	args := append(append([]string{}, n.exec[1:]...), n.args...)
	cmd := exec.Command(n.exec[0], args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = chaosEnv()
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start node %d: %w", n.idx, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(exited)
	}()
	n.cmd, n.exited, n.stopped = cmd, exited, false
	n.starts++
	return nil
}

// chaosEnv is the environment without PARLEY_* variables: a developer's
// settings must not change what the nodes do.
func chaosEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PARLEY_") {
			env = append(env, kv)
		}
	}
	return env
}

// waitReady polls the node's /readyz until it answers 200.
func (n *chaosNode) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	for {
		n.mu.Lock()
		exited := n.exited
		n.mu.Unlock()
		if exited != nil {
			select {
			case <-exited:
				return fmt.Errorf("node %d exited while starting (see %s): %s", n.idx, n.logPath, lastLogLine(n.logPath))
			default:
			}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.admin+"/readyz", nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %d not ready within %s (see %s)", n.idx, timeout, n.logPath)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// lastLogLine is the last line of a node's log: what a failed start said
// (its "parley: …" error line), for a failure message that outlives the
// log (a test's temporary directory).
func lastLogLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	const tail = 4 << 10
	var b []byte
	if fi, err := f.Stat(); err == nil && fi.Size() > tail {
		b = make([]byte, tail)
		n, _ := f.ReadAt(b, fi.Size()-tail)
		b = b[:n]
	} else {
		b, _ = io.ReadAll(f)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	last := lines[len(lines)-1]
	if len(last) > 1000 {
		last = last[:1000] + "…"
	}
	return last
}

// running reports whether the process is up and not stopped.
func (n *chaosNode) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil && !n.stopped
}

// kill sends SIGKILL (continuing a stopped process first is not needed:
// SIGKILL ends it either way) and waits for the exit.
func (n *chaosNode) kill() error {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill node %d: %w", n.idx, err)
	}
	<-exited
	n.mu.Lock()
	n.cmd, n.exited, n.stopped = nil, nil, false
	n.mu.Unlock()
	return nil
}

// signal sends SIGSTOP or SIGCONT.
func (n *chaosNode) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("node %d is down", n.idx)
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal node %d: %w", n.idx, err)
	}
	n.stopped = sig == syscall.SIGSTOP
	return nil
}

// terminate ends the node gracefully (SIGCONT, SIGTERM, then SIGKILL after
// grace).
func (n *chaosNode) terminate(grace time.Duration) {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-exited
	}
	n.mu.Lock()
	n.cmd, n.exited = nil, nil
	n.mu.Unlock()
}

// chaosDB is the run's database on the PostgreSQL server.
type chaosDB struct {
	admin  *sql.DB
	name   string
	direct string // URL of the database, straight to the server
	host   string // the server's host:port
}

// createChaosDB creates a fresh database on the server at adminURL.
func createChaosDB(ctx context.Context, adminURL string) (*chaosDB, error) {
	db, err := sql.Open("pgx", adminURL)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", adminURL, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("PostgreSQL at %s: %w", adminURL, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "parley_chaos_" + hex.EncodeToString(b[:])
	if _, err := db.ExecContext(pctx, "CREATE DATABASE "+name); err != nil {
		db.Close()
		return nil, fmt.Errorf("create database: %w", err)
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		db.Close()
		return nil, err
	}
	u.Path = "/" + name
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "5432")
	}
	return &chaosDB{admin: db, name: name, direct: u.String(), host: host}, nil
}

// via returns the database's URL through another host:port (the proxy).
func (d *chaosDB) via(hostport string) string {
	u, _ := url.Parse(d.direct)
	u.Host = hostport
	return u.String()
}

// terminateBackends ends every server process of the run's database (the
// nodes' pooled connections) and returns how many.
func (d *chaosDB) terminateBackends(ctx context.Context) (int, error) {
	var n int
	err := d.admin.QueryRowContext(ctx,
		`SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		 WHERE datname = $1 AND pid <> pg_backend_pid()) t`, d.name).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("pg_terminate_backend: %w", err)
	}
	return n, nil
}

// drop removes the database.
func (d *chaosDB) drop() error {
	defer d.admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := d.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+d.name+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", d.name, err)
	}
	return nil
}
