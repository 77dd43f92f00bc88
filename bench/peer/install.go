package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// centrifugoModule is the module Centrifugo v5 is built from.
const centrifugoModule = "github.com/centrifugal/centrifugo/v5"

// defaultCacheDir is where the built peer binaries are kept between runs.
func defaultCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "parley-bench")
	}
	return filepath.Join(os.TempDir(), "parley-bench")
}

// installCentrifugo returns the path of Centrifugo version (e.g. v5.4.9)
// built from the Go module proxy into cacheDir, building it first if it is
// not there. `go install …@version` is not used: this machine's proxy
// refuses it; `go mod download` of the exact version, then `go build` in
// the downloaded module's directory, works.
func installCentrifugo(ctx context.Context, goBin, version, cacheDir string, log *slog.Logger) (string, error) {
	if !strings.HasPrefix(version, "v5.") {
		return "", fmt.Errorf("centrifugo version %q: want a v5 release (the module path is %s)", version, centrifugoModule)
	}
	out := filepath.Join(cacheDir, "centrifugo-"+version)
	if fi, err := os.Stat(out); err == nil && fi.Mode().IsRegular() {
		return out, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", err
	}
	log.Info("downloading centrifugo", "module", centrifugoModule, "version", version)
	dl := exec.CommandContext(ctx, goBin, "mod", "download", "-json", centrifugoModule+"@"+version)
	dl.Dir = cacheDir // outside any module of ours
	dl.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	dl.Stderr = &stderr
	js, err := dl.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w: %s%s", centrifugoModule, version, err, stderr.Bytes(), js)
	}
	var mod struct {
		Dir   string
		Error string
	}
	if err := json.Unmarshal(js, &mod); err != nil {
		return "", fmt.Errorf("go mod download output: %w", err)
	}
	if mod.Error != "" || mod.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", centrifugoModule, version, mod.Error)
	}
	log.Info("building centrifugo (a few minutes the first time)", "dir", mod.Dir)
	tmp := out + ".tmp"
	build := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-o", tmp,
		"-ldflags", "-X "+centrifugoModule+"/internal/build.Version="+strings.TrimPrefix(version, "v"), ".")
	build.Dir = mod.Dir
	// GOWORK=off: no workspace of the caller's applies; -mod=mod: the
	// module is built as downloaded, resolving its requirements itself.
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	stderr.Reset()
	build.Stdout, build.Stderr = &stderr, &stderr
	if err := build.Run(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build centrifugo: %w: %s", err, stderr.Bytes())
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	return out, nil
}
