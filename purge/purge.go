// Package purge removes what a deleted workspace leaves behind, in the
// background: first its stored files (through parley.WorkspaceFileRemover,
// the one hook the files feature plugs into), then its rows, a batch per
// transaction (parley.LifecycleService.PurgeWorkspace), so that deleting a
// big workspace never holds the database's writer for long.
//
// The store has already made the workspace invisible (DeleteWorkspace)
// before a purge starts; a purge is only cleanup, may run on any node, may
// run twice at once (both delete the same rows; each batch is idempotent)
// and is resumed after a restart (Resume). It must not decide who may
// delete a workspace: that is the store's.
package purge

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/internal/promutil"
)

// Config is what a Purger needs; zero fields are documented defaults.
type Config struct {
	// Store deletes the rows; required.
	Store parley.LifecycleService
	// Files deletes the stored files of a workspace before its rows go.
	// Nil: the server stores no files.
	Files parley.WorkspaceFileRemover
	// Batch is the most rows one transaction deletes (default 1000).
	Batch int
	// Pause is how long to wait between batches, giving other writers the
	// database (default 0: none; SQLite's group commit interleaves them).
	Pause time.Duration
	// RetryAfter is how long a failed purge waits before it tries again
	// (default 30 s).
	RetryAfter time.Duration
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Purger runs purges. Start it with New; Close stops it and waits.
type Purger struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	running  map[string]bool // guarded by mu: the workspaces being purged
	resuming bool            // guarded by mu: resumeLater is running

	rows   prometheus.Counter
	done   prometheus.Counter
	panics prometheus.Counter
}

// New returns a Purger for cfg.
func New(cfg Config) *Purger {
	if cfg.Batch <= 0 {
		cfg.Batch = 1000
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Purger{cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel, running: map[string]bool{}}
	p.rows = promutil.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "parley_workspace_purge_batches_total",
		Help: "Batches of rows of deleted workspaces removed.",
	}))
	p.done = promutil.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "parley_workspace_purges_total",
		Help: "Deleted workspaces whose files and rows are all gone.",
	}))
	p.panics = promutil.Panics(cfg.Registerer).WithLabelValues("purge")
	return p
}

// Start purges workspaceID in the background (nothing if it is being
// purged already by this Purger).
func (p *Purger) Start(workspaceID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running[workspaceID] || p.ctx.Err() != nil {
		return
	}
	p.running[workspaceID] = true
	p.wg.Add(1)
	go p.run(workspaceID)
}

// Resume starts the purge of every deleted workspace the store still has
// rows of (after a restart). A store that could list only part of them
// (EUNAVAILABLE with the ids it did list: a shard down, behind the
// router) gets those started and the listing tried again every
// RetryAfter in the background until it is whole, so a workspace deleted
// on a shard that was down at start-up is purged once the shard answers;
// the error is returned all the same, for the caller to log.
func (p *Purger) Resume(ctx context.Context) error {
	ids, err := p.cfg.Store.DeletedWorkspaces(ctx)
	for _, id := range ids {
		p.Start(id)
	}
	if err == nil {
		return nil
	}
	if parley.ErrorCode(err) == parley.EUNAVAILABLE {
		p.resumeLater()
	}
	return fmt.Errorf("resume purges: %w", err)
}

// resumeLater lists the deleted workspaces again every RetryAfter until
// the store answers whole (or the Purger closes), starting each purge not
// yet running.
func (p *Purger) resumeLater() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resuming || p.ctx.Err() != nil {
		return
	}
	p.resuming = true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer func() {
			p.mu.Lock()
			p.resuming = false
			p.mu.Unlock()
		}()
		for {
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(p.cfg.RetryAfter):
			}
			ids, err := p.cfg.Store.DeletedWorkspaces(p.ctx)
			for _, id := range ids {
				p.Start(id)
			}
			if err == nil {
				p.log.Info("workspace purges resumed in full")
				return
			}
			p.log.Warn("deleted workspaces not all listed; retrying", "err", err, "after", p.cfg.RetryAfter)
		}
	}()
}

// Close stops the purges (they resume on the next Resume) and waits.
func (p *Purger) Close() {
	p.cancel()
	p.wg.Wait()
}

// Wait blocks until no purge runs (tests).
func (p *Purger) Wait() { p.wg.Wait() }

func (p *Purger) run(workspaceID string) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.running, workspaceID)
		p.mu.Unlock()
	}()
	for p.ctx.Err() == nil {
		err := p.purgeGuarded(workspaceID)
		if err == nil {
			return
		}
		if p.ctx.Err() != nil {
			return
		}
		p.log.Warn("workspace purge failed; retrying", "workspace_id", workspaceID, "err", err, "after", p.cfg.RetryAfter)
		select {
		case <-p.ctx.Done():
		case <-time.After(p.cfg.RetryAfter):
		}
	}
}

// purgeGuarded is purge with a panic turned into an error: a bug in a
// file store must not take the node down.
func (p *Purger) purgeGuarded(workspaceID string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			p.panics.Inc()
			p.log.Error("panic in workspace purge", "workspace_id", workspaceID, "panic", v, "stack", string(debug.Stack()))
			err = fmt.Errorf("purge %s: panic: %v", workspaceID, v)
		}
	}()
	return p.purge(workspaceID)
}

func (p *Purger) purge(workspaceID string) error {
	if p.cfg.Files != nil {
		if err := p.cfg.Files.RemoveWorkspaceFiles(p.ctx, workspaceID); err != nil {
			return fmt.Errorf("remove files of %s: %w", workspaceID, err)
		}
	}
	for {
		done, err := p.cfg.Store.PurgeWorkspace(p.ctx, workspaceID, p.cfg.Batch)
		if err != nil {
			return err
		}
		if done {
			p.done.Inc()
			p.log.Info("workspace purged", "workspace_id", workspaceID)
			return nil
		}
		p.rows.Inc()
		if p.cfg.Pause > 0 {
			select {
			case <-p.ctx.Done():
				return p.ctx.Err()
			case <-time.After(p.cfg.Pause):
			}
		}
	}
}
