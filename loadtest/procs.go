package loadtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Several processes: one process holds about 20,000 open files, so large
// runs spread their users over workers. The parent does the setup, writes
// the plan (0600: it holds tokens) and starts Procs copies of itself with
// --worker-plan and --worker-part; worker k runs the users i with
// i mod Procs == k. Workers speak JSON lines on stdout — progress every
// second, barriers, and their Part at the end — and wait on stdin for "go"
// at each barrier, so that phases (all connected, load over) line up
// across processes. Every timeline starts at the plan's Start.

// workerMsg is one line from a worker.
type workerMsg struct {
	Progress *Progress `json:"progress,omitempty"`
	Barrier  string    `json:"barrier,omitempty"`
	Part     *Part     `json:"part,omitempty"`
}

// runWorker is the worker side.
func runWorker(ctx context.Context, cfg *Config) error {
	b, err := os.ReadFile(cfg.WorkerPlan)
	if err != nil {
		return fmt.Errorf("worker: read plan: %w", err)
	}
	var plan Plan
	if err := json.Unmarshal(b, &plan); err != nil {
		return fmt.Errorf("worker: decode plan: %w", err)
	}
	var mu sync.Mutex
	enc := json.NewEncoder(cfg.Stdout)
	send := func(m workerMsg) error {
		mu.Lock()
		defer mu.Unlock()
		return enc.Encode(m)
	}
	in := bufio.NewScanner(os.Stdin)
	bar := func(name string) error {
		if err := send(workerMsg{Barrier: name}); err != nil {
			return err
		}
		if !in.Scan() {
			return fmt.Errorf("worker: parent went away at barrier %q", name)
		}
		return nil
	}
	r := newRunner(cfg, &plan, cfg.WorkerPart, cfg.Procs, bar)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p := r.progress()
				_ = send(workerMsg{Progress: &p})
			}
		}
	})
	part, err := r.run(ctx)
	close(done)
	wg.Wait()
	if err != nil {
		return err
	}
	return send(workerMsg{Part: part})
}

// worker is the parent's view of one worker process.
type worker struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu       sync.Mutex
	progress Progress // guarded by mu
	part     *Part    // guarded by mu
}

// runWorkers starts the workers, relays barriers and progress, and
// collects their parts.
func runWorkers(ctx context.Context, cfg *Config, plan *Plan) ([]*Part, error) {
	if len(cfg.Exec) == 0 {
		return nil, errors.New("--procs needs the command that starts a worker")
	}
	dir := cfg.Out
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "plan-*.json")
	if err != nil {
		return nil, err
	}
	planPath := f.Name()
	defer os.Remove(planPath)
	if err := json.NewEncoder(f).Encode(plan); err != nil {
		f.Close()
		return nil, fmt.Errorf("write plan: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	planPath, _ = filepath.Abs(planPath)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	barriers := make(chan string, cfg.Procs*4)
	exited := make(chan error, cfg.Procs)
	ws := make([]*worker, cfg.Procs)
	for k := range cfg.Procs {
		args := append(append([]string{}, cfg.Exec[1:]...),
			"--users", strconv.Itoa(cfg.Users),
			"--worker-plan", planPath, "--worker-part", strconv.Itoa(k))
		cmd := exec.CommandContext(ctx, cfg.Exec[0], args...)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start worker %d: %w", k, err)
		}
		w := &worker{cmd: cmd, stdin: stdin}
		ws[k] = w
		go func() {
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 1<<20), 256<<20)
			for sc.Scan() {
				var m workerMsg
				if json.Unmarshal(sc.Bytes(), &m) != nil {
					continue
				}
				switch {
				case m.Progress != nil:
					w.mu.Lock()
					w.progress = *m.Progress
					w.mu.Unlock()
				case m.Barrier != "":
					barriers <- m.Barrier
				case m.Part != nil:
					w.mu.Lock()
					w.part = m.Part
					w.mu.Unlock()
				}
			}
			err := cmd.Wait()
			if err != nil {
				err = fmt.Errorf("worker %d: %w", k, err)
			}
			exited <- err
		}()
	}
	stop := startProgress(cfg, plan.Start, func() []Progress {
		out := make([]Progress, len(ws))
		for i, w := range ws {
			w.mu.Lock()
			out[i] = w.progress
			w.mu.Unlock()
		}
		return out
	})
	defer stop()

	reached := map[string]int{}
	running := cfg.Procs
	var firstErr error
	for running > 0 {
		select {
		case name := <-barriers:
			if reached[name]++; reached[name] == cfg.Procs {
				for _, w := range ws {
					_, _ = io.WriteString(w.stdin, "go\n")
				}
			}
		case err := <-exited:
			running--
			if err != nil && firstErr == nil {
				firstErr = err
				cancel() // one failed: stop the others
			}
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	parts := make([]*Part, len(ws))
	for i, w := range ws {
		if parts[i] = w.part; parts[i] == nil {
			return nil, fmt.Errorf("worker %d ended without a result", i)
		}
	}
	return parts, nil
}
