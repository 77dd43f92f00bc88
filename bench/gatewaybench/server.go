package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// server is a running `parley serve` process.
type server struct {
	cmd    *exec.Cmd
	url    string // http://127.0.0.1:port, no trailing slash
	admin  string // http://127.0.0.1:port of the admin listener
	stderr *tailBuffer
	exited chan struct{}
}

// tailBuffer keeps the last bytes written to it (the server's log).
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailMax = 64 << 10

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > tailMax {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-tailMax:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// seedWorkspace runs `parley seed` and reads the JSON it prints.
func seedWorkspace(ctx context.Context, bin, dataDir, db string, users int) (*seedFile, error) {
	cmd := exec.CommandContext(ctx, bin, "seed", "--data", dataDir, "--slug", "bench",
		"--users", strconv.Itoa(users), "--out", "-", "--log-level", "warn")
	if db != "" {
		cmd.Args = append(cmd.Args, "--db", db)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("parley seed: %w: %s", err, stderr.Bytes())
	}
	var sf seedFile
	if err := json.Unmarshal(out, &sf); err != nil {
		return nil, fmt.Errorf("parley seed output: %w", err)
	}
	if len(sf.Users) != users || len(sf.Channels) == 0 {
		return nil, fmt.Errorf("parley seed made %d users and %d channels", len(sf.Users), len(sf.Channels))
	}
	return &sf, nil
}

// seedFile is the part of `parley seed`'s JSON the benchmark reads.
type seedFile struct {
	WorkspaceID string `json:"workspace_id"`
	Owner       struct {
		Token string `json:"token"`
	} `json:"owner"`
	Channels []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"channels"`
	Users []struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	} `json:"users"`
}

// freePort returns a loopback address nothing listens on right now.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startServer runs `parley serve` on dataDir and waits for its banner.
func startServer(ctx context.Context, bin, dataDir, db string) (*server, error) {
	admin, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--data", dataDir, "--listen", "127.0.0.1:0", "--admin", admin,
		// every session connects from 127.0.0.1: lift the per-IP limit
		"--identify-rate", "100000000", "--log-level", "warn", "--log-format", "json")
	if db != "" {
		cmd.Args = append(cmd.Args, "--db", db)
	}
	// A developer's PARLEY_* settings must not change what is measured.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PARLEY_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, admin: "http://" + admin, stderr: &tailBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start parley: %w", err)
	}
	banner := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "Parley is running at "); ok {
				select {
				case banner <- strings.TrimSuffix(u, "/"):
				default:
				}
			}
		}
		cmd.Wait()
		close(s.exited)
	}()
	select {
	case s.url = <-banner:
	case <-s.exited:
		return nil, fmt.Errorf("parley serve exited before its banner:\n%s", s.stderr)
	case <-time.After(60 * time.Second):
		s.kill()
		return nil, errors.New("parley serve printed no banner within 60 s")
	case <-ctx.Done():
		s.kill()
		return nil, ctx.Err()
	}
	return s, nil
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// stop sends SIGTERM and waits (up to 30 s) for the exit.
func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.kill()
	}
}

func (s *server) kill() {
	s.cmd.Process.Kill()
	<-s.exited
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// cpuTime returns the process's user+system CPU time so far.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: count from after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc/<pid>/stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("short /proc/<pid>/stat")
	}
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// rssBytes returns the process's resident set size (VmRSS).
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc/<pid>/status")
}

// metrics reads some gauges from the server's /metrics.
func (s *server) metrics(ctx context.Context, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.admin+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		for _, n := range names {
			if name == n {
				out[n], _ = strconv.ParseFloat(strings.Fields(val)[0], 64)
			}
		}
	}
	return out, sc.Err()
}

// gc makes the server collect garbage (the heap profile's gc=1), so that
// memory readings before and after do not depend on when it last ran.
func (s *server) gc(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.admin+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, err = io.Copy(io.Discard, res.Body)
	return err
}

// profile fetches a snapshot profile (heap, goroutine…) from the admin
// listener into path.
func (s *server) profile(ctx context.Context, name, path string) error {
	return s.fetch(ctx, s.admin+"/debug/pprof/"+name, path)
}

// cpuProfile fetches a CPU profile of the next d from the admin listener.
func (s *server) cpuProfile(ctx context.Context, d time.Duration, path string) error {
	secs := max(1, int(d.Round(time.Second)/time.Second))
	return s.fetch(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", s.admin, secs), path)
}

// fetch saves the body of a GET to path.
func (s *server) fetch(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, res.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
