package gateway

import (
	"context"
	"log/slog"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/internal/edge"
)

// Store is what the gateway reads from storage. *sqlstore.Store (any
// parley.Store) implements it.
type Store interface {
	// SessionByToken returns the live login with that token hash, or an
	// EUNAUTHORIZED error.
	SessionByToken(ctx context.Context, tokenHash string) (*parley.Session, error)
	// GetWorkspace returns the workspace if actor is a member, else
	// ENOTFOUND.
	GetWorkspace(ctx context.Context, actor, workspaceID string) (*parley.Workspace, error)
	SessionChannels(ctx context.Context, userID, workspaceID string) ([]parley.ChannelRef, error)
	ChannelLog(ctx context.Context, channelID string, afterSeq int64, limit int) ([]parley.Event, error)
	ChannelMember(ctx context.Context, userID, channelID string) (bool, error)
	// GetChannel returns the channel if actor may see it (a member, or a
	// public channel of their workspace for a non-guest), else ENOTFOUND.
	GetChannel(ctx context.Context, actor, channelID string) (*parley.Channel, error)
}

var _ Store = (parley.Store)(nil)

// Presence aggregates users' presence across devices and nodes (package
// presence implements it).
type Presence interface {
	Connect(userID, sessionID string)
	Disconnect(userID, sessionID string)
	Activity(userID, sessionID string)
	// Watch calls fn with each change of the users' status ("online",
	// "away", "offline"), starting with their current status, until cancel.
	Watch(userIDs []string, fn func(userID, status string)) (cancel func())
}

// Rate is a token bucket (parley.Rate): the zero Rate is the field's
// default; a negative PerMinute is no limit.
type Rate = parley.Rate

// Defaults for the zero values of Config.
const (
	DefaultSendQueue               = 256
	DefaultReplayMax               = 1000
	DefaultFillConcurrency         = 8
	DefaultReplayTTL               = 2 * time.Minute
	DefaultResumeWindow            = 2 * time.Minute
	DefaultHeartbeatInterval       = 30 * time.Second
	DefaultIdentifyTimeout         = 10 * time.Second
	DefaultMaxFrameBytes           = 16 << 10
	DefaultMaxConcurrentIdentifies = 64
	DefaultIdentifyQueue           = 512
	DefaultIdentifyQueueWait       = time.Second
	DefaultTypingInterval          = 3 * time.Second
	DefaultWriteHighWater          = 256 << 10
	DefaultCloseGrace              = time.Second
	// DefaultDrainHandover covers a drained client's longest wait before
	// it reconnects elsewhere: the go_away's retry_after (below 5 s) plus
	// the clients' jitter on it (Go client: a quarter plus 250 ms; web
	// client: up to half, so at most 7.5 s in all), and a margin for the
	// handshake and the handover request.
	DefaultDrainHandover = 10 * time.Second
)

var defaultIdentifyRate = Rate{PerMinute: 120, Burst: 60}

// defaultInboundRate is far above what a real client sends: the web client
// sends a heartbeat every heartbeat_ms, focus and presence_sub when the
// view changes, and typing at most every 3 s per channel; holding a key
// down in the channel switcher (30 views a second, two frames each) runs
// for seconds before the burst is spent.
var defaultInboundRate = Rate{PerMinute: 1200, Burst: 200}

// Config is what a Gateway needs. Store and Bus are required; every other
// zero value is the documented default.
type Config struct {
	Store Store
	// Bus carries events between nodes. Two optional parts are found on
	// it by type assertion (natsbus has both). A bus that is also a
	// parley.MuxBus carries the node's subscriptions through Partitions
	// TopicMuxes (a topic always through the same one, so its events stay
	// in bus order) instead of one Subscribe each: cheaper when a node
	// holds tens of thousands of topics. A bus that is also a
	// parley.Requester enables session handover, so that a session resumes
	// on another node than its own.
	Bus parley.EventBus
	// Users resolves the authors and @-mentioned users of messages, so
	// that a session gets each such user's object with the first message
	// that references them (just-in-time users, jit.go); the query cache
	// implements it. Nil: messages go out without users.
	//
	// It also decides whose presence a session may watch: presence_sub
	// keeps only the members of the session's workspace (visibility.go).
	// Nil: the store's WorkspaceUsers, when it has one, else nobody.
	Users UserDirectory
	// Presence receives connects, disconnects and activity, and answers
	// presence_sub. Nil: presence is not tracked and presence_sub is
	// accepted but delivers nothing.
	Presence Presence
	// NodeID names this node; session ids start with it. Default: random.
	NodeID string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registerer receives the gateway's metrics (parley_gateway_*). Nil:
	// the metrics are kept but not registered.
	Registerer prometheus.Registerer
	// Partitions is the number of delivery partitions (default GOMAXPROCS).
	Partitions int
	// SendQueue bounds the frames queued for one connected session and not
	// yet written (default 256). A session whose queue is full when a
	// durable event arrives is closed with 4009 (resumable); ephemeral
	// events are dropped once it is half full.
	SendQueue int
	// ReplayMax and ReplayTTL bound a session's replay buffer (defaults
	// 1,000 events and 2 minutes). ReplayMax is raised to SendQueue if
	// lower.
	ReplayMax int
	ReplayTTL time.Duration
	// ResumeWindow is how long a dropped session stays resumable (default
	// 2 minutes).
	ResumeWindow time.Duration
	// HeartbeatInterval is announced in hello (default 30 s); a connection
	// silent for 1.5 intervals is closed with 4009.
	HeartbeatInterval time.Duration
	// IdentifyTimeout closes a connection that has not identified or
	// resumed in time with 4003 (default 10 s).
	IdentifyTimeout time.Duration
	// MaxFrameBytes bounds an inbound message (default 16 KiB); larger ones
	// close the connection with 1009.
	MaxFrameBytes int
	// AllowedOrigins lists the origins (scheme://host[:port]) browsers may
	// connect from. Empty: only the gateway's own host; "*": any. Requests
	// without an Origin header (non-browser clients) are always allowed.
	AllowedOrigins []string
	// IdentifyRatePerIP limits identify and resume attempts per client IP
	// (default 120 a minute, burst 60); above it the socket is closed 4008.
	IdentifyRatePerIP Rate
	// InboundRate limits the frames one connection may send, every op
	// counted (default 1,200 a minute, burst 200), on top of which two
	// heartbeats per HeartbeatInterval are always allowed. A connection
	// over it is sent reconnect{"reason":"rate_limited"} and closed 4008
	// (resumable). A negative PerMinute is no limit.
	InboundRate Rate
	// TrustedProxies are the reverse proxies whose X-Forwarded-For is
	// believed, by the rule the HTTP API uses too (edge.Proxies.ClientIP).
	// Default: none; the client IP is the connection's peer.
	TrustedProxies edge.Proxies
	// MaxConcurrentIdentifies caps identifies and resumes in progress on
	// this node (default 64). Past it they wait in the admission queue;
	// those that find the queue full, or wait longer than IdentifyQueueWait,
	// are told reconnect{retry_after_ms} (with jitter) and closed 4008.
	MaxConcurrentIdentifies int
	// IdentifyQueue bounds the identifies and resumes waiting for a slot
	// (default 512); negative: no queue (fail fast when the slots are
	// taken).
	IdentifyQueue int
	// IdentifyQueueWait is the longest an identify or resume waits for a
	// slot (default 1 s); negative: no queue, as for IdentifyQueue.
	IdentifyQueueWait time.Duration
	// TypingInterval is the least time between two typing events of one
	// user in one channel (default 3 s); more are dropped.
	TypingInterval time.Duration
	// HoldBack is how long the channel sequencer waits for a missing seq
	// before it fills the gap from the store (default: package order's,
	// 50 ms).
	HoldBack time.Duration
	// WriteHighWater is how many bytes may wait in a socket's user-space
	// write buffer before the session stops writing and lets its queue
	// fill (default 256 KiB).
	WriteHighWater int
	// FillConcurrency bounds the catch-up reads of channel logs this node
	// runs at once for sessions that fell behind its stream (default
	// DefaultFillConcurrency). Sessions waiting for a read hold no
	// goroutine, and all sessions behind on one channel share its read.
	FillConcurrency int
	// StreamTail is how many of its newest events per channel the node
	// keeps from its stream (for at most a minute) to answer session
	// catch-ups without the store (tail.go; default DefaultStreamTail;
	// negative: none, every catch-up reads the store).
	StreamTail int
	// CloseGrace is how long a closing socket waits for the client's close
	// frame before it is cut (default 1 s).
	CloseGrace time.Duration
	// DrainHandover is how long Shutdown keeps answering other nodes'
	// handover requests after it has sent every client away, while
	// another node is live (LiveNodes) and this one still holds sessions:
	// the drained clients come back elsewhere after their retry_after, and
	// the node they reach asks this one for their sessions. It is counted
	// again from each session taken (the node they reach may admit them a
	// few at a time), up to MaxLingerFactor times it in all, within
	// Shutdown's context. No socket is accepted meanwhile. Default
	// DefaultDrainHandover; negative: none.
	DrainHandover time.Duration
	// LiveNodes lists the ids of the cluster's live nodes, this one
	// included (package nodes). Shutdown lingers for handovers only while
	// another node is live, and a resume whose session the node named in
	// its id does not have (restarted or gone) asks the others. Nil: no
	// linger, and only the named node is asked.
	LiveNodes func() []string
	// WorkspaceLimits, when set, returns a workspace's limits and feature
	// overrides (the tenant directory's): a bot token identifies or
	// resumes only while its workspace has integrations on, as its API
	// calls are answered (docs/directory.md, "Limits and features"). A
	// lookup that fails lets the bot in, as the API goes on with the
	// global defaults. Nil: no overrides.
	WorkspaceLimits func(ctx context.Context, workspaceID string) (parley.WorkspaceLimits, error)
	// Now defaults to time.Now.
	Now func() time.Time
	// Live gives the live configuration; the gateway reads its
	// compression settings (gateway_compression,
	// gateway_compression_min_bytes) at most once per delivery batch.
	// Nil: parley.DefaultLiveConfig().
	Live parley.LiveConfigSource
	// Hot tells which channels are hot (package hot); the gateway counts
	// every durable event of its channel streams into it, batches the
	// deliveries of hot channels and tells their viewers (channel.hot).
	// Nil: no channel is ever hot; view-aware delivery still makes huge
	// channels passive (docs/hot-channels.md).
	Hot parley.HotChannels
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.NodeID == "" {
		c.NodeID = randomID(6)
	}
	if c.Partitions <= 0 {
		c.Partitions = runtime.GOMAXPROCS(0)
	}
	if c.SendQueue <= 0 {
		c.SendQueue = DefaultSendQueue
	}
	if c.FillConcurrency <= 0 {
		c.FillConcurrency = DefaultFillConcurrency
	}
	if c.StreamTail == 0 {
		c.StreamTail = DefaultStreamTail
	}
	if c.ReplayMax <= 0 {
		c.ReplayMax = DefaultReplayMax
	}
	if c.ReplayMax < c.SendQueue {
		c.ReplayMax = c.SendQueue
	}
	if c.ReplayTTL <= 0 {
		c.ReplayTTL = DefaultReplayTTL
	}
	if c.ResumeWindow <= 0 {
		c.ResumeWindow = DefaultResumeWindow
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.IdentifyTimeout <= 0 {
		c.IdentifyTimeout = DefaultIdentifyTimeout
	}
	if c.MaxFrameBytes <= 0 {
		c.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if c.IdentifyRatePerIP.PerMinute == 0 {
		c.IdentifyRatePerIP = defaultIdentifyRate
	}
	if c.IdentifyRatePerIP.Burst <= 0 {
		c.IdentifyRatePerIP.Burst = 1
	}
	if c.InboundRate.PerMinute == 0 {
		c.InboundRate.PerMinute = defaultInboundRate.PerMinute
	}
	if c.InboundRate.Burst <= 0 {
		c.InboundRate.Burst = defaultInboundRate.Burst
	}
	if c.MaxConcurrentIdentifies <= 0 {
		c.MaxConcurrentIdentifies = DefaultMaxConcurrentIdentifies
	}
	if c.IdentifyQueue == 0 {
		c.IdentifyQueue = DefaultIdentifyQueue
	}
	if c.IdentifyQueueWait == 0 {
		c.IdentifyQueueWait = DefaultIdentifyQueueWait
	}
	if c.TypingInterval <= 0 {
		c.TypingInterval = DefaultTypingInterval
	}
	if c.WriteHighWater <= 0 {
		c.WriteHighWater = DefaultWriteHighWater
	}
	if c.CloseGrace <= 0 {
		c.CloseGrace = DefaultCloseGrace
	}
	if c.DrainHandover == 0 {
		c.DrainHandover = DefaultDrainHandover
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Live == nil {
		c.Live = parley.StaticConfig(parley.DefaultLiveConfig())
	}
}
