// Package benchkit holds what the end-to-end benchmarks (bench/gatewaybench,
// bench/peer) share: running a server as a separate process and reading its
// CPU time and memory from /proc, `parley seed` and `parley serve`, a lean
// WebSocket reader for Parley's gateway, payload stamps and percentiles.
package benchkit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"parley/internal/cpustat"
)

// serverCPUs is the CPU list (taskset -c syntax) every server started
// from now on is pinned to; "" or nil: not pinned.
var serverCPUs atomic.Pointer[string]

// PinServers pins every server StartProc starts from now on to cpus (a
// taskset -c list such as "1" or "2-3"; "" unpins). Pin the generator to
// other CPUs with `taskset -c 0 <command>`: a child's affinity is set
// afresh, so the two never share a core.
func PinServers(cpus string) { serverCPUs.Store(&cpus) }

// Proc is a server running as a child process.
type Proc struct {
	Cmd    *exec.Cmd
	Stderr *TailBuffer // the last 64 KB of its standard error (its log)
	exited chan struct{}
}

// StartProc starts cmd and, when ready is not nil, scans its standard
// output line by line until ready returns true; it fails if the process
// exits first or after timeout. With a nil ready it returns once the
// process has started (the caller polls for readiness). cmd's Stdout and
// Stderr must be unset: standard error goes to p.Stderr.
func StartProc(ctx context.Context, cmd *exec.Cmd, timeout time.Duration, ready func(line string) bool) (*Proc, error) {
	if cpus := serverCPUs.Load(); cpus != nil && *cpus != "" {
		// taskset execs the server: the pid stays the server's.
		ts, err := exec.LookPath("taskset")
		if err != nil {
			return nil, fmt.Errorf("pin the server to CPUs %s: %w", *cpus, err)
		}
		cmd.Args = append([]string{"taskset", "-c", *cpus, cmd.Path}, cmd.Args[1:]...)
		cmd.Path = ts
	}
	p := &Proc{Cmd: cmd, Stderr: &TailBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	found := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		seen := ready == nil
		if seen {
			close(found)
		}
		for sc.Scan() {
			if !seen && ready(sc.Text()) {
				seen = true
				close(found)
			}
		}
		io.Copy(io.Discard, stdout) // read to EOF before Wait, as exec requires
		cmd.Wait()
		close(p.exited)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-found:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("%s exited before it was ready:\n%s", cmd.Path, p.Stderr)
	case <-t.C:
		p.Kill()
		return nil, fmt.Errorf("%s was not ready within %s:\n%s", cmd.Path, timeout, p.Stderr)
	case <-ctx.Done():
		p.Kill()
		return nil, ctx.Err()
	}
}

// PID is the process id.
func (p *Proc) PID() int { return p.Cmd.Process.Pid }

// Exited is closed once the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Stop sends SIGTERM and waits (up to 30 s, then kills) for the exit.
func (p *Proc) Stop() {
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.Kill()
	}
}

// Kill kills the process and waits for it.
func (p *Proc) Kill() {
	p.Cmd.Process.Kill()
	<-p.exited
}

// CPUTime is the process's user+system CPU time so far.
func (p *Proc) CPUTime() (time.Duration, error) { return CPUTime(p.PID()) }

// RSS is the process's resident set size.
func (p *Proc) RSS() (int64, error) { return RSSBytes(p.PID()) }

// CleanEnv is the environment without the variables that start with any of
// prefixes (a developer's PARLEY_* settings must not change what is
// measured).
func CleanEnv(prefixes ...string) []string {
	var env []string
outer:
	for _, kv := range os.Environ() {
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				continue outer
			}
		}
		env = append(env, kv)
	}
	return env
}

// TailBuffer keeps the last bytes written to it.
type TailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailMax = 64 << 10

func (b *TailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > tailMax {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-tailMax:]...)
	}
	return len(p), nil
}

func (b *TailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// FreePort returns a loopback address nothing listens on right now.
func FreePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// CPUTime returns a process's user+system CPU time so far, from
// /proc/<pid>/stat.
func CPUTime(pid int) (time.Duration, error) { return cpustat.Process(pid) }

// RSSBytes returns a process's resident set size (VmRSS).
func RSSBytes(pid int) (int64, error) {
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

// RaiseFileLimit lifts RLIMIT_NOFILE to its hard limit (every connection
// is a socket) and returns it.
func RaiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	return lim.Cur, nil
}

// IO is a process's write activity so far, from /proc/<pid>/io.
type IO struct {
	WriteCalls int64 // syscw: write-like system calls (write, writev, sendmsg…)
	WriteBytes int64 // wchar: bytes handed to them (sockets, files, pipes)
}

// ProcIO reads a process's IO counters.
func ProcIO(pid int) (IO, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return IO{}, err
	}
	var io IO
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch k {
		case "syscw":
			io.WriteCalls = n
		case "wchar":
			io.WriteBytes = n
		}
	}
	return io, nil
}

// IO returns the process's write counters (ProcIO).
func (p *Proc) IO() (IO, error) { return ProcIO(p.PID()) }

// LoadAvg is the 1-minute load average (0 if unreadable).
func LoadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// SleepCtx sleeps for d or until ctx ends.
func SleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
