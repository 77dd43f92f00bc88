package parley

// RecentConfig holds the live keys of the recent-events buffer: each node
// keeps the latest events of every hot channel in memory and answers the
// fetch spike a hot channel causes (/events, /sync) from it
// (docs/recent-buffer.md).
type RecentConfig struct {
	// RecentEnabled: hot channels' recent events are buffered and answer
	// reads; identical concurrent event reads of a channel share one store
	// query.
	RecentEnabled bool `json:"recent_enabled"`
	// RecentDryRun: the buffers are kept and the reads they would answer
	// are counted and logged, but every read goes to the store.
	RecentDryRun bool `json:"recent_dry_run"`
	// RecentEvents: the events each hot channel's buffer keeps.
	RecentEvents int `json:"recent_events"`
}

// DefaultRecentConfig is the default of a new installation.
func DefaultRecentConfig() RecentConfig {
	return RecentConfig{RecentEnabled: true, RecentEvents: 1000}
}

// MaxRecentEvents bounds RecentConfig.RecentEvents.
const MaxRecentEvents = 100000
