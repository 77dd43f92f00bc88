package parley

import "context"

// LiveConfig is the cluster-wide configuration that operators change at run
// time without a restart (ARCHITECTURE §7). Every node sees a change within
// about a second.
type LiveConfig struct {
	// CollapsedThreads: replies count and notify in their thread (thread
	// memberships, the threads list). Off: replies show inline and count in
	// the channel, and no thread bookkeeping is written at all.
	CollapsedThreads bool `json:"collapsed_threads"`
	// ChannelMentionMaxMembers: above this many members, @channel, @here
	// and @everyone need a workspace admin (others get 403). 0: no cap.
	ChannelMentionMaxMembers int `json:"channel_mention_max_members"`
	// GatewayCompression: event frames go out compressed
	// (permessage-deflate, compressed once per event) to the connections
	// that negotiated it. Off: new connections do not negotiate it and
	// every session sends uncompressed frames from its next write.
	GatewayCompression bool `json:"gateway_compression"`
	// GatewayCompressionMinBytes: event frames smaller than this go out
	// uncompressed (0: every event frame is compressed).
	GatewayCompressionMinBytes int `json:"gateway_compression_min_bytes"`
	// GatewayFillConcurrency: the catch-up reads of channel logs one node
	// runs at once (sessions behind the same channel share one read).
	// 0: each node's --fill-concurrency.
	GatewayFillConcurrency int `json:"gateway_fill_concurrency"`
	// LiveRates are the API's rate limits (ratelimit.go); each defaults to
	// the node's own setting.
	LiveRates
	HotConfig
	ViewConfig
	RecentConfig
	StoreGuardConfig
	JoinLimitConfig
	SlowModeConfig
	RelayConfig
	FileConfig
}

// DefaultLiveConfig is the configuration of a new installation.
func DefaultLiveConfig() LiveConfig {
	return LiveConfig{CollapsedThreads: true, ChannelMentionMaxMembers: 1000,
		GatewayCompression: true, GatewayCompressionMinBytes: DefaultGatewayCompressionMinBytes,
		HotConfig: DefaultHotConfig(), ViewConfig: DefaultViewConfig(),
		RecentConfig:     DefaultRecentConfig(),
		StoreGuardConfig: DefaultStoreGuardConfig(),
		JoinLimitConfig:  DefaultJoinLimitConfig(), SlowModeConfig: DefaultSlowModeConfig(),
		RelayConfig: DefaultRelayConfig(), FileConfig: DefaultFileConfig()}
}

// DefaultGatewayCompressionMinBytes is the default of
// LiveConfig.GatewayCompressionMinBytes: below it the few bytes deflate
// saves (typing, presence, reactions) are not worth the client's inflate.
const DefaultGatewayCompressionMinBytes = 256

// MaxGatewayFillConcurrency bounds LiveConfig.GatewayFillConcurrency.
const MaxGatewayFillConcurrency = 1024

// MaxGatewayCompressionMinBytes bounds LiveConfig.GatewayCompressionMinBytes
// (above an event frame's largest size it would only mean "off").
const MaxGatewayCompressionMinBytes = 1 << 20

// LiveConfigSource gives the current live configuration; it is called on
// every write that depends on it, so it must be cheap (an atomic load).
type LiveConfigSource interface {
	LiveConfig() LiveConfig
}

// StaticConfig is a LiveConfigSource that never changes (tools, tests).
type StaticConfig LiveConfig

// LiveConfig returns c.
func (c StaticConfig) LiveConfig() LiveConfig { return LiveConfig(c) }

// SettingsService persists the live configuration (the source of truth;
// the bus only carries change notices).
type SettingsService interface {
	// LoadLiveConfig returns the stored configuration, DefaultLiveConfig
	// when none was ever saved.
	LoadLiveConfig(ctx context.Context) (LiveConfig, error)
	SaveLiveConfig(ctx context.Context, c LiveConfig) error
}
