package parley

// StoreGuardConfig holds the live keys of the store guard (package
// storeguard, docs/store-guard.md): a bulkhead per purpose of store call
// and a circuit breaker per database, both failing fast with EUNAVAILABLE
// (503 and Retry-After) instead of letting requests pile up behind a
// stalled database.
type StoreGuardConfig struct {
	// StoreGuardEnabled: store calls go through the bulkheads and the
	// breaker. Off: they go straight to the store.
	StoreGuardEnabled bool `json:"store_guard_enabled"`
	// StoreGuardDryRun: nothing is rejected; the calls that would have
	// been (a full bulkhead, an open breaker) are counted and logged.
	StoreGuardDryRun bool `json:"store_guard_dry_run"`
	// Bulkhead sizes: the store calls of each purpose one node runs at
	// once. A call finding its purpose full waits at most StoreGuardWaitMs
	// for a slot, then fails.
	StoreGuardWrites  int `json:"store_guard_writes"`
	StoreGuardHistory int `json:"store_guard_history"`
	StoreGuardSearch  int `json:"store_guard_search"`
	StoreGuardBoot    int `json:"store_guard_boot"`
	StoreGuardReads   int `json:"store_guard_reads"`
	// StoreGuardWaitMs: the longest a call waits for a slot of a full
	// bulkhead (0: it fails at once).
	StoreGuardWaitMs int `json:"store_guard_wait_ms"`
	// StoreGuardErrorRatePct: the breaker opens when this percentage of
	// the calls that ended in the window failed or were slow...
	StoreGuardErrorRatePct int `json:"store_guard_error_rate_pct"`
	// StoreGuardMinCalls: ...and at least this many ended in it.
	StoreGuardMinCalls int `json:"store_guard_min_calls"`
	// StoreGuardConsecutiveFailures: the breaker also opens after this
	// many failed or slow calls in a row, whatever the window's rate (a
	// stall makes every call slow long before it moves a rate diluted by
	// the healthy seconds before it).
	StoreGuardConsecutiveFailures int `json:"store_guard_consecutive_failures"`
	// StoreGuardSlowCallMs: a call still running after this long counts as
	// a failure (at that moment, not when it ends).
	StoreGuardSlowCallMs int `json:"store_guard_slow_call_ms"`
	// StoreGuardWindowSeconds: the rolling window the rates are measured
	// over.
	StoreGuardWindowSeconds int `json:"store_guard_window_seconds"`
	// StoreGuardOpenSeconds: how long an open breaker fails every call
	// before it lets a few probes through (half-open).
	StoreGuardOpenSeconds int `json:"store_guard_open_seconds"`
}

// DefaultStoreGuardConfig is the default of a new installation.
func DefaultStoreGuardConfig() StoreGuardConfig {
	return StoreGuardConfig{StoreGuardEnabled: true,
		StoreGuardWrites: 128, StoreGuardHistory: 64, StoreGuardSearch: 16, StoreGuardBoot: 64, StoreGuardReads: 256,
		StoreGuardWaitMs: 20, StoreGuardErrorRatePct: 50, StoreGuardMinCalls: 20, StoreGuardConsecutiveFailures: 20,
		StoreGuardSlowCallMs: 500, StoreGuardWindowSeconds: 10, StoreGuardOpenSeconds: 2}
}

// Bounds of the store guard keys.
const (
	MaxStoreGuardBulkhead      = 100000
	MaxStoreGuardWaitMs        = 1000
	MaxStoreGuardMinCalls      = 100000
	MaxStoreGuardSlowCallMs    = 120000
	MaxStoreGuardWindowSeconds = 600
	MaxStoreGuardOpenSeconds   = 600
)
