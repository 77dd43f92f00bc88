package parley

import (
	"errors"
	"time"
)

// JoinLimitConfig holds the live keys of the join limiter: a token bucket
// per channel on each node, so that a spike of joins into one channel
// (LINE's 2,000 joins a second) is shed with 429 before it reaches the
// store (docs/join-limits.md).
type JoinLimitConfig struct {
	// JoinLimitEnabled: joins over a channel's rate are refused (429).
	JoinLimitEnabled bool `json:"join_limit_enabled"`
	// JoinLimitDryRun: every join goes through; the ones that would have
	// been refused are counted and logged.
	JoinLimitDryRun bool `json:"join_limit_dry_run"`
	// JoinRateChannelNode: joins a second one node accepts into one
	// channel (0: no per-node limit).
	JoinRateChannelNode int `json:"join_rate_channel_node"`
	// JoinRateChannelCluster: joins a second the whole cluster accepts into
	// one channel; each node enforces its share, this divided by the live
	// nodes, with no network call per join (0: no cluster limit).
	JoinRateChannelCluster int `json:"join_rate_channel_cluster"`
	// JoinBurst: joins a channel's bucket holds at once, on each node (at
	// least 1).
	JoinBurst int `json:"join_burst"`
}

// SlowModeConfig holds the live switches of per-channel slow mode and post
// limits, whose values are the channel's own (Channel.SlowModeSeconds,
// Channel.PostLimitPerMinute).
type SlowModeConfig struct {
	// SlowModeEnabled: channels' slow_mode_seconds and
	// post_limit_per_minute are enforced (429).
	SlowModeEnabled bool `json:"slow_mode_enabled"`
	// SlowModeDryRun: posts over a channel's limits go through; they are
	// counted and logged.
	SlowModeDryRun bool `json:"slow_mode_dry_run"`
}

// DefaultJoinLimitConfig and DefaultSlowModeConfig are the defaults of a new
// installation. The join rates are what kept the other channels' p99 within
// 2x of their baseline during a 2,000 joins/s spike on a 2-core node
// (docs/benchmarks.md, "Join spike with the join limiter"): a join costs
// little in the store but its member.joined goes to every member, so the
// spike's cost grows with the channel. Bigger nodes raise them live.
func DefaultJoinLimitConfig() JoinLimitConfig {
	return JoinLimitConfig{JoinLimitEnabled: true, JoinRateChannelNode: 20,
		JoinRateChannelCluster: 100, JoinBurst: 20}
}

func DefaultSlowModeConfig() SlowModeConfig { return SlowModeConfig{SlowModeEnabled: true} }

// Bounds of the join and slow-mode settings.
const (
	MaxJoinRate           = 1_000_000 // joins a second
	MaxJoinBurst          = 1_000_000
	MaxSlowModeSeconds    = 6 * 3600 // Discord's longest slow mode
	MaxPostLimitPerMinute = 100_000
)

// RetryAfterError is a refusal that says how long to wait: httpapi answers
// it with its code's status and a Retry-After header.
type RetryAfterError struct {
	Err   *Error
	Delay time.Duration
}

// RateLimited returns an ERATELIMITED error that tells the client to retry
// after delay.
func RateLimited(delay time.Duration, format string, args ...any) error {
	return &RetryAfterError{Err: Errorf(ERATELIMITED, format, args...), Delay: delay}
}

func (e *RetryAfterError) Error() string             { return e.Err.Error() }
func (e *RetryAfterError) Unwrap() error             { return e.Err }
func (e *RetryAfterError) RetryAfter() time.Duration { return e.Delay }

// RetryAfterOf returns the delay err asks for, and whether it asks.
func RetryAfterOf(err error) (time.Duration, bool) {
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		return ra.RetryAfter(), true
	}
	return 0, false
}
