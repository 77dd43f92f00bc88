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
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
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
