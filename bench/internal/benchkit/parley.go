package benchkit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Parley is a running `parley serve` process.
type Parley struct {
	*Proc
	URL   string // http://127.0.0.1:port, no trailing slash
	Admin string // http://127.0.0.1:port of the admin listener
}

// SeedFile is the part of `parley seed`'s JSON the benchmarks read.
type SeedFile struct {
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

// Seed runs `parley seed` (a workspace "bench" with users members of
// #general) on dataDir, or on the PostgreSQL database db, and reads the
// JSON it prints.
func Seed(ctx context.Context, bin, dataDir, db string, users int) (*SeedFile, error) {
	cmd := exec.CommandContext(ctx, bin, "seed", "--data", dataDir, "--slug", "bench",
		"--users", strconv.Itoa(users), "--out", "-", "--log-level", "warn")
	if db != "" {
		cmd.Args = append(cmd.Args, "--db", db)
	}
	cmd.Env = CleanEnv("PARLEY_")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("parley seed: %w: %s", err, stderr.Bytes())
	}
	var sf SeedFile
	if err := json.Unmarshal(out, &sf); err != nil {
		return nil, fmt.Errorf("parley seed output: %w", err)
	}
	if len(sf.Users) != users || len(sf.Channels) == 0 {
		return nil, fmt.Errorf("parley seed made %d users and %d channels", len(sf.Users), len(sf.Channels))
	}
	return &sf, nil
}

// StartParley runs `parley serve` on dataDir (or db) with an admin listener
// and waits for its banner. Every benchmark session connects from loopback,
// so the per-IP identify limit is lifted; and one publisher posts every
// message of a run (hundreds a second), so the per-user and per-address
// message limits, which are for people, are off.
func StartParley(ctx context.Context, bin, dataDir, db string) (*Parley, error) {
	admin, err := FreePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--data", dataDir, "--listen", "127.0.0.1:0", "--admin", admin,
		"--identify-rate", "100000000", "--rate-message-user", "off", "--rate-message-ip", "off", "--log-level", "warn", "--log-format", "json")
	if db != "" {
		cmd.Args = append(cmd.Args, "--db", db)
	}
	cmd.Env = CleanEnv("PARLEY_")
	var url string
	p, err := StartProc(ctx, cmd, 60*time.Second, func(line string) bool {
		u, ok := strings.CutPrefix(line, "Parley is running at ")
		if ok {
			url = strings.TrimSuffix(u, "/")
		}
		return ok
	})
	if err != nil {
		return nil, fmt.Errorf("parley serve: %w", err)
	}
	return &Parley{Proc: p, URL: url, Admin: "http://" + admin}, nil
}

// Metrics reads some unlabelled series from the server's /metrics.
func (s *Parley) Metrics(ctx context.Context, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Admin+"/metrics", nil)
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

// GC makes the server collect garbage (the heap profile's gc=1), so that
// memory readings before and after do not depend on when it last ran.
func (s *Parley) GC(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Admin+"/debug/pprof/heap?gc=1", nil)
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

// Profile fetches a snapshot profile (heap, goroutine…) from the admin
// listener into path.
func (s *Parley) Profile(ctx context.Context, name, path string) error {
	return fetch(ctx, s.Admin+"/debug/pprof/"+name, path)
}

// CPUProfile fetches a CPU profile of the next d from the admin listener.
func (s *Parley) CPUProfile(ctx context.Context, d time.Duration, path string) error {
	secs := max(1, int(d.Round(time.Second)/time.Second))
	return fetch(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", s.Admin, secs), path)
}

// fetch saves the body of a GET to path.
func fetch(ctx context.Context, url, path string) error {
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

// SetLive changes the server's live configuration (PUT /config on the
// admin listener) with patch, a JSON object such as {"hot_batch_ms":0}.
func (s *Parley) SetLive(ctx context.Context, patch string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.Admin+"/config", strings.NewReader(patch))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("live config: %w", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("live config %s: %s: %s", patch, res.Status, body)
	}
	return nil
}
