package sqlstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
)

// postLimits counts the posts slow mode and post caps refused or, in dry
// run, would have refused (exposed with Collectors).
var postLimits = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "parley_post_limited_total",
	Help: "Posts refused with 429 by a channel's slow mode or post cap, by limit (slow_mode, post_limit) and mode (enforced, dry_run: let through).",
}, []string{"limit", "mode"})

// lastDryRunLog is when a dry-run refusal was last logged (unix nanos):
// at most one line a second.
var lastDryRunLog atomic.Int64

// Slow mode and per-channel post limits (docs/join-limits.md). Both are
// checked inside the post's own write, against state in the store, so they
// hold across nodes and across the sessions of one user:
//
//   - slow_mode_seconds: channel_members.last_post_at moves forward only
//     when the previous post is at least that old (a conditional UPDATE;
//     two concurrent posts of one member cannot both pass: PostgreSQL
//     re-checks the condition on the row the first one wrote, SQLite
//     writes one at a time).
//   - post_limit_per_minute: a window on the channel row that opens with
//     the first post after the previous one closed and counts its posts.
//     The channel row is the one appendEvent locks for every post anyway,
//     so the cap adds no lock, only a column update.
//
// Workspace admins and the channel's creator are exempt from both.

// patchPostLimits applies the slow-mode and post-limit fields of p to a's
// channel: EINVALID out of range or on a DM, EFORBIDDEN for a member who
// may not manage the channel. It reports whether anything changed.
func patchPostLimits(a *channelAccess, actor string, p parley.ChannelPatch) (bool, error) {
	ch := a.ch
	changed := false
	for _, f := range []struct {
		key string
		v   *int
		to  *int
		max int
	}{
		{"slow_mode_seconds", p.SlowModeSeconds, &ch.SlowModeSeconds, parley.MaxSlowModeSeconds},
		{"post_limit_per_minute", p.PostLimitPerMinute, &ch.PostLimitPerMinute, parley.MaxPostLimitPerMinute},
	} {
		if f.v == nil || *f.v == *f.to {
			continue
		}
		if *f.v < 0 || *f.v > f.max {
			return false, parley.Errorf(parley.EINVALID, "%s must be 0 (off) to %d", f.key, f.max)
		}
		if ch.Kind.IsDM() {
			return false, parley.Errorf(parley.EINVALID, "direct messages have no %s", f.key)
		}
		if !a.canManage(actor) {
			return false, parley.Errorf(parley.EFORBIDDEN, "only workspace admins and the channel's creator may set %s", f.key)
		}
		*f.to, changed = *f.v, true
	}
	return changed, nil
}

// checkPostLimits enforces the channel's slow mode and post cap on actor's
// post at tx.now, in that order (a member's own limit is the more precise
// answer). It returns nil, or a rate-limit error with Retry-After; with
// cfg.SlowModeDryRun the post goes on and the refusal is only counted and
// logged. Call it before appendEvent: it locks the member's row, then the
// channel's, the order the rest of the store takes them in.
func (s *Store) checkPostLimits(ctx context.Context, tx *Tx, a *channelAccess, actor string, cfg parley.LiveConfig) error {
	ch := a.ch
	if !cfg.SlowModeEnabled || (ch.SlowModeSeconds == 0 && ch.PostLimitPerMinute == 0) || a.canManage(actor) {
		return nil
	}
	now := micros(tx.now)
	if n := ch.SlowModeSeconds; n > 0 {
		wait, err := tx.takeSlowMode(ctx, ch, actor, now, n)
		if err != nil {
			return err
		}
		if wait > 0 {
			if err := s.postLimited(ctx, cfg, "slow_mode", ch, actor, wait); err != nil {
				return err
			}
			// Dry run: the post goes on, and the member's clock restarts
			// as it would have had there been no slow mode.
			if _, err := tx.ExecContext(ctx, `UPDATE channel_members SET last_post_at = $1
				WHERE workspace_id = $2 AND channel_id = $3 AND user_id = $4`, now, ch.WorkspaceID, ch.ID, actor); err != nil {
				return fmt.Errorf("slow mode: %w", err)
			}
		}
	}
	if n := ch.PostLimitPerMinute; n > 0 {
		wait, err := tx.takeChannelPost(ctx, ch, now, n)
		if err != nil {
			return err
		}
		if wait > 0 {
			return s.postLimited(ctx, cfg, "post_limit", ch, actor, wait)
		}
	}
	return nil
}

// takeSlowMode records actor's post at now unless their last one in the
// channel is less than n seconds old; then it returns how long is left.
func (tx *Tx) takeSlowMode(ctx context.Context, ch *parley.Channel, actor string, now int64, n int) (time.Duration, error) {
	period := int64(n) * 1e6
	res, err := tx.ExecContext(ctx, `UPDATE channel_members SET last_post_at = $1
		WHERE workspace_id = $2 AND channel_id = $3 AND user_id = $4
		  AND (last_post_at IS NULL OR last_post_at <= $5)`,
		now, ch.WorkspaceID, ch.ID, actor, now-period)
	if err != nil {
		return 0, fmt.Errorf("slow mode: %w", err)
	}
	if k, err := res.RowsAffected(); err != nil || k > 0 {
		return 0, err
	}
	var last int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(last_post_at, 0) FROM channel_members
		WHERE workspace_id = $1 AND channel_id = $2 AND user_id = $3`, ch.WorkspaceID, ch.ID, actor).Scan(&last); err != nil {
		return 0, fmt.Errorf("slow mode: %w", err)
	}
	return time.Duration(max(last+period-now, 1)) * time.Microsecond, nil
}

// takeChannelPost counts a post at now in the channel's window (opening a
// new one when the last is a minute old) unless the window already holds n;
// then it returns how long until it closes.
func (tx *Tx) takeChannelPost(ctx context.Context, ch *parley.Channel, now int64, n int) (time.Duration, error) {
	const window = int64(60 * 1e6)
	res, err := tx.ExecContext(ctx, `UPDATE channels SET
		  post_window_count = CASE WHEN post_window_start <= $1 THEN 1 ELSE post_window_count + 1 END,
		  post_window_start = CASE WHEN post_window_start <= $1 THEN $2 ELSE post_window_start END
		WHERE workspace_id = $3 AND id = $4 AND (post_window_start <= $1 OR post_window_count < $5)`,
		now-window, now, ch.WorkspaceID, ch.ID, n)
	if err != nil {
		return 0, fmt.Errorf("post limit: %w", err)
	}
	if k, err := res.RowsAffected(); err != nil || k > 0 {
		return 0, err
	}
	var start int64
	if err := tx.QueryRowContext(ctx, `SELECT post_window_start FROM channels WHERE workspace_id = $1 AND id = $2`,
		ch.WorkspaceID, ch.ID).Scan(&start); err != nil {
		return 0, fmt.Errorf("post limit: %w", err)
	}
	return time.Duration(max(start+window-now, 1)) * time.Microsecond, nil
}

// postLimited counts a refusal of kind ("slow_mode", "post_limit") and
// returns the error to answer, or nil in dry run (logged instead).
func (s *Store) postLimited(ctx context.Context, cfg parley.LiveConfig, kind string, ch *parley.Channel, actor string, wait time.Duration) error {
	if cfg.SlowModeDryRun {
		postLimits.WithLabelValues(kind, "dry_run").Inc()
		now := time.Now().UnixNano()
		if last := lastDryRunLog.Load(); now-last >= int64(time.Second) && lastDryRunLog.CompareAndSwap(last, now) {
			s.log.InfoContext(ctx, "post limit (dry run) would refuse a post", "limit", kind,
				"channel", ch.ID, "user", actor, "retry_after", wait)
		}
		return nil
	}
	postLimits.WithLabelValues(kind, "enforced").Inc()
	secs := int(max(1, (wait+time.Second-1)/time.Second))
	if kind == "slow_mode" {
		return parley.RateLimited(wait, "slow mode is on in this channel: one message every %d seconds; you can post again in %d seconds",
			ch.SlowModeSeconds, secs)
	}
	return parley.RateLimited(wait, "this channel takes at most %d messages a minute; retry in %d seconds",
		ch.PostLimitPerMinute, secs)
}
