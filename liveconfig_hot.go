package parley

// HotConfig holds the live keys of hot-channel detection and hot delivery
// (ARCHITECTURE §8, docs/hot-channels.md).
type HotConfig struct {
	// HotEnabled: channels whose rate of durable events passes HotOnRate
	// are marked hot (shared across nodes) and delivered in batches.
	HotEnabled bool `json:"hot_enabled"`
	// HotDryRun: detection runs, counts and logs its transitions, but no
	// channel is treated as hot.
	HotDryRun bool `json:"hot_dry_run"`
	// HotOnRate: durable events per second, averaged over HotWindowSeconds,
	// at which a channel becomes hot.
	HotOnRate int `json:"hot_on_rate"`
	// HotOffRate: the rate below which a hot channel cools (hysteresis:
	// below HotOnRate).
	HotOffRate int `json:"hot_off_rate"`
	// HotWindowSeconds: the sliding window the rate is measured over.
	HotWindowSeconds int `json:"hot_window_seconds"`
	// HotTTLSeconds: a hot mark heard from another node lapses this long
	// after its last renewal (a node that died does not keep it hot).
	HotTTLSeconds int `json:"hot_ttl_seconds"`
	// HotBatchMs: a hot channel's viewers get its events written together
	// once per window of this many milliseconds (0: as they come).
	HotBatchMs int `json:"hot_batch_ms"`
	// HotTypingIntervalMs: in a hot channel, at most one typing event per
	// this many milliseconds reaches its viewers (0: all of them).
	HotTypingIntervalMs int `json:"hot_typing_interval_ms"`
}

// ViewConfig holds the live keys of view-aware delivery: sessions get the
// events of huge and hot channels they do not have in focus as coalesced
// channel.summary frames (docs/hot-channels.md).
type ViewConfig struct {
	// ViewEnabled: view-aware delivery is on.
	ViewEnabled bool `json:"view_enabled"`
	// ViewDryRun: every event is still delivered; the summaries that would
	// replace them are counted and logged.
	ViewDryRun bool `json:"view_dry_run"`
	// ViewMinMembers: channels with more members than this are passive for
	// the sessions that do not have them in focus (hot channels are
	// passive whatever their size). 0: every channel.
	ViewMinMembers int `json:"view_min_members"`
	// ViewSummarySeconds: at most one channel.summary per passive channel
	// per session per this many seconds.
	ViewSummarySeconds int `json:"view_summary_seconds"`
	// ViewReplayMax: on focus, a session missing at most this many events
	// of the channel gets them replayed; missing more, it gets a summary
	// and reads the channel's history itself.
	ViewReplayMax int `json:"view_replay_max"`
}

// DefaultHotConfig and DefaultViewConfig are the defaults of a new
// installation.
func DefaultHotConfig() HotConfig {
	return HotConfig{HotEnabled: true, HotOnRate: 20, HotOffRate: 10, HotWindowSeconds: 10,
		HotTTLSeconds: 30, HotBatchMs: 100, HotTypingIntervalMs: 1000}
}

func DefaultViewConfig() ViewConfig {
	return ViewConfig{ViewEnabled: true, ViewMinMembers: 1000, ViewSummarySeconds: 3, ViewReplayMax: 200}
}

// Bounds of the hot and view keys.
const (
	MaxHotRate             = 100000
	MaxHotWindowSeconds    = 300
	MaxHotTTLSeconds       = 3600
	MaxHotBatchMs          = 1000
	MaxHotTypingIntervalMs = 60000
	MaxViewSummarySeconds  = 60
	MaxViewReplayMax       = 10000
)

// HotChannels tells which channels are hot (ARCHITECTURE §8). Every node
// has one: it measures the rate of the durable events it sees per channel,
// shares its hot marks over the bus with a TTL, and takes the marks of the
// other nodes. Hot is cheap enough to call per event.
type HotChannels interface {
	// Observe counts one durable event of the channel, in the order the
	// node's stream gives them (a seq already counted is ignored).
	Observe(channelID string, seq int64)
	// Hot reports whether the channel is hot now (false in dry run).
	Hot(channelID string) bool
	// Watch calls fn on every change of a channel's mark, from this node or
	// another (not in dry run), until cancel is called. fn must not block.
	Watch(fn func(channelID string, on bool)) (cancel func())
}
