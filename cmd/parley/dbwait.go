package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"parley/storeguard"
)

// A node that starts while PostgreSQL is briefly unavailable (restarting,
// failing over, stalled behind the network, or ending connections with
// pg_terminate_backend) waits for it, up to --db-wait, rather than exiting:
// the start-up steps that talk to the database (opening and migrating the
// store, loading the live configuration) are tried again with backoff as
// long as what failed is the connection (storeguard.Lost), and the node
// gives up with the last error once the wait is over. An error the
// database answered with (a bad password, a missing database, a migration
// that does not apply) fails at once: waiting would not change it. SQLite
// is a local file: its steps run once.

// Backoff between start-up attempts: from dbRetryMin, doubling, at most
// dbRetryMax.
const (
	dbRetryMin = 100 * time.Millisecond
	dbRetryMax = 2 * time.Second
)

// dbStartup runs the database steps of one start against one deadline.
type dbStartup struct {
	log      *slog.Logger
	retry    bool      // PostgreSQL with --db-wait > 0
	deadline time.Time // when retry: the end of the wait
}

func newDBStartup(o serveOptions, log *slog.Logger) *dbStartup {
	d := &dbStartup{log: log, retry: o.DB != "" && o.DBWait > 0}
	if d.retry {
		d.deadline = time.Now().Add(o.DBWait)
	}
	return d
}

// do runs step until it succeeds, fails with an error that is not a lost
// connection, or the wait is over; the step's context ends with the wait
// (a step stuck on a stalled database gives up with it). It returns the
// step's last error, which says after how long and how many attempts when
// the wait ran out.
func (d *dbStartup) do(ctx context.Context, step string, fn func(ctx context.Context) error) error {
	if !d.retry {
		return fn(ctx)
	}
	ctx, cancel := context.WithDeadline(ctx, d.deadline)
	defer cancel()
	start := time.Now()
	backoff := dbRetryMin
	var lost error // the last attempt's error: what the give-up says
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		ended := ctx.Err() != nil || d.over()
		if err != nil && ended && lost != nil {
			// Cut short by the end of the wait: the attempt before says
			// more ("connection refused") than "deadline exceeded" or a
			// dial's "i/o timeout".
			err = lost
		}
		switch {
		case err == nil:
			if attempt > 1 {
				d.log.Info("database answered; start-up goes on", "step", step, "attempts", attempt,
					"waited", time.Since(start).Round(time.Millisecond).String())
			}
			return nil
		case ended:
			return d.gaveUp(err, attempt)
		case !storeguard.Lost(err):
			return err
		}
		lost = err
		wait := min(backoff, time.Until(d.deadline))
		d.log.Warn("database unavailable at start-up; trying again", "step", step, "attempt", attempt,
			"retry_in", wait.Round(time.Millisecond).String(), "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return d.gaveUp(err, attempt)
		}
		backoff = min(2*backoff, dbRetryMax)
	}
}

// over reports whether the wait has run out. It reads the clock rather
// than the step's context, whose timer may fire a moment after a dial cut
// short by the same deadline returned.
func (d *dbStartup) over() bool { return !time.Now().Before(d.deadline) }

// gaveUp is the error of a step whose context ended: the wait ran out (it
// says so), or the node was told to stop (the step's own error).
func (d *dbStartup) gaveUp(err error, attempts int) error {
	if d.over() {
		return fmt.Errorf("%w (the database did not answer within --db-wait; %d attempts)", err, attempts)
	}
	return err
}
