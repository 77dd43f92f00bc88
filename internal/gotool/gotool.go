// Package gotool builds a Go command of another module, at a pinned
// version, from the module proxy into the user cache directory
// (<cache>/parley/<name>-<version>/<name>), once: later runs and other test
// binaries reuse it, and concurrent builders take a file lock around the
// build. The tests' real servers (versitygw for S3, mailpit for SMTP) come
// this way; an environment variable may name a binary to use instead.
//
// Only tests, their build commands and benchmarks import it.
package gotool

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Tool is one command to build.
type Tool struct {
	Name    string // the binary's name, e.g. "mailpit"
	Package string // the command's import path, e.g. "github.com/axllent/mailpit"
	Version string // the module version, e.g. "v1.27.11"
	Env     string // a variable that names a prebuilt binary instead ("" for none)
}

// Path is where the binary is (or would be) built, or the binary the
// tool's variable names.
func (t Tool) Path() (string, error) {
	if p := t.override(); p != "" {
		return p, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("%s: no cache directory: %w", t.Name, err)
	}
	return filepath.Join(dir, "parley", t.Name+"-"+t.Version, t.Name), nil
}

func (t Tool) override() string {
	if t.Env == "" {
		return ""
	}
	return os.Getenv(t.Env)
}

type result struct {
	once sync.Once
	path string
	err  error
}

var (
	mu    sync.Mutex
	built = map[Tool]*result{}
)

// Build builds the binary unless it is there already and returns its
// path; within a process each tool is built (or found) once.
func (t Tool) Build() (string, error) {
	mu.Lock()
	r := built[t]
	if r == nil {
		r = &result{}
		built[t] = r
	}
	mu.Unlock()
	r.once.Do(func() { r.path, r.err = t.build() })
	return r.path, r.err
}

func (t Tool) build() (string, error) {
	p, err := t.Path()
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	if t.override() != "" {
		return "", fmt.Errorf("%s: %s=%s: no such file", t.Name, t.Env, p)
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("%s: %w", t.Name, err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("%s: %w", t.Name, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("%s: lock: %w", t.Name, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(p); err == nil { // another process built it meanwhile
		return p, nil
	}
	goBin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "install", t.Package+"@"+t.Version)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-buildvcs=false", "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: go install %s@%s: %w\n%s", t.Name, t.Package, t.Version, err, out.Bytes())
	}
	return p, nil
}

// FreePort is a TCP port on 127.0.0.1 the kernel had free a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Serve starts cmd, the server named name, and waits up to 20 s until it
// listens on every one of addrs; stop kills it and waits for it. Its
// output is kept and shown when it exits early or never listens.
func Serve(name string, cmd *exec.Cmd, addrs ...string) (stop func(), err error) {
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop = func() {
		cmd.Process.Kill()
		<-exited
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, addr := range addrs {
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case err := <-exited:
				return nil, fmt.Errorf("%s exited: %v\n%s", name, err, logs.String())
			default:
			}
			if time.Now().After(deadline) {
				stop()
				return nil, fmt.Errorf("%s did not listen on %s within 20 s\n%s", name, addr, logs.String())
			}
			time.Sleep(20 * time.Millisecond) // polling a port, not synchronising goroutines
		}
	}
	return stop, nil
}
