// Package natsbus is Parley's event bus on NATS. It carries committed events
// from the node that wrote them to every node that delivers them: an event is
// published once on each of its topics, as subject "parley." + topic (the
// prefix is Config.SubjectPrefix), with the event JSON-encoded (without its
// topic list) as the payload. Node-to-node messages (raw payloads and
// request/reply, request.go) are addressed by topic the same way. The bus
// implements the seam of the root package (parley.EventBus, parley.MuxBus,
// parley.RawBus, parley.Requester, parley.BusLink); only cmd/parley and tests
// import this package, and it is the one place where subjects are built.
//
// By default the bus runs an embedded NATS server inside the process that
// listens on no port at all: the node talks to it through an in-process
// connection. With Config.URL set it joins an external NATS server or cluster
// instead.
//
// The bus is lossy by design: a publish that fails is logged and counted,
// never retried and never allowed to hold up the writer. Durable events are
// in the store's per-channel log, from which gateways fill any gap. This
// package must not know about storage, HTTP or sessions.
package natsbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"parley"
)

// DefaultSubjectPrefix is put before every topic to make its NATS subject
// when Config.SubjectPrefix is empty.
const DefaultSubjectPrefix = "parley."

// Defaults for the zero values of Config.
const (
	DefaultName             = "parley"
	DefaultConnectTimeout   = 5 * time.Second
	DefaultReconnectWait    = time.Second
	DefaultReconnectBufSize = 8 << 20 // bytes kept while disconnected
	DefaultMaxPayload       = 8 << 20 // embedded server only
	DefaultWriteTimeout     = 5 * time.Second
)

// Config says which NATS to use. The zero value runs an embedded server.
type Config struct {
	// URL of an external NATS server or cluster (comma-separated URLs are
	// accepted). Empty: start an embedded server in this process, one that
	// opens no listener.
	URL string
	// Name is the connection name shown by the NATS server (default
	// "parley").
	Name string
	// SubjectPrefix is put before every topic to make its NATS subject
	// (default DefaultSubjectPrefix); a dot is added when it lacks one.
	// Buses with different prefixes do not hear each other on one server:
	// tests on a shared NATS give each test its own.
	SubjectPrefix string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registerer receives the bus's metrics. Nil: the metrics are kept but
	// not registered (tests, tools).
	Registerer prometheus.Registerer
	// ConnectTimeout bounds the first connection (default 5 s). After that
	// the connection is retried forever.
	ConnectTimeout time.Duration
	// ReconnectWait is the pause between reconnect attempts (default 1 s).
	ReconnectWait time.Duration
	// ReconnectBufSize is how many bytes of publishes are kept while the
	// connection is down (default 8 MiB); beyond that publishes fail and are
	// counted as errors.
	ReconnectBufSize int
	// MaxPayload is the largest message the embedded server accepts
	// (default 8 MiB). An external server sets its own.
	MaxPayload int32
	// WriteTimeout bounds a write to a stalled server (default 5 s): a
	// publisher is held up at most that long before the connection is
	// dropped, reconnected, and publishes buffered meanwhile.
	WriteTimeout time.Duration

	// Embedded clustering (see cluster.go). ClusterListen is the host:port
	// on which the embedded server accepts routes from the other nodes'
	// embedded servers (port 0 picks a free one); empty means no
	// clustering. The embedded server opens no client port either way.
	ClusterListen string
	// ClusterName must be the same on every node of one bus (default
	// "parley").
	ClusterName string
	// Routes are route URLs of other nodes, nats://host:port; one live
	// seed is enough, the servers tell each other of the rest.
	Routes []string
	// ServerName names the embedded server; it must differ between the
	// nodes of a cluster (default: Name + "-embedded", or Name and a random
	// suffix when clustered).
	ServerName string

	// JetStreamDir turns JetStream on in the embedded server, with its file
	// store in this directory and every write synced (jetstream.go). Empty:
	// no JetStream. An external server (URL) brings its own.
	JetStreamDir string
}

// Bus publishes events to NATS and subscribes to topics. It is safe for
// concurrent use.
type Bus struct {
	nc      *nats.Conn
	srv     *server.Server // nil when connected to an external NATS
	log     *slog.Logger
	metrics *metrics
	closed  chan struct{} // closed by the connection's ClosedHandler
	prefix  string        // Config.SubjectPrefix, ending in "."
}

// The seam the rest of Parley sees (bus.go at the root).
var (
	_ parley.EventBus  = (*Bus)(nil)
	_ parley.MuxBus    = (*Bus)(nil)
	_ parley.BusLink   = (*Bus)(nil)
	_ parley.RawBus    = (*Bus)(nil)
	_ parley.Requester = (*Bus)(nil)
)

// Start starts the embedded server (unless cfg.URL is set) and connects.
func Start(cfg Config) (*Bus, error) {
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.ReconnectWait <= 0 {
		cfg.ReconnectWait = DefaultReconnectWait
	}
	if cfg.ReconnectBufSize <= 0 {
		cfg.ReconnectBufSize = DefaultReconnectBufSize
	}
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = DefaultMaxPayload
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.SubjectPrefix == "" {
		cfg.SubjectPrefix = DefaultSubjectPrefix
	}
	if !strings.HasSuffix(cfg.SubjectPrefix, ".") {
		cfg.SubjectPrefix += "."
	}
	if err := checkTopic(strings.TrimSuffix(cfg.SubjectPrefix, "."), false); err != nil {
		return nil, fmt.Errorf("nats subject prefix: %w", err)
	}
	if err := checkCluster(cfg); err != nil {
		return nil, err
	}
	b := &Bus{
		log:     cfg.Logger.With("component", "bus"),
		metrics: newMetrics(cfg.Registerer),
		closed:  make(chan struct{}),
		prefix:  cfg.SubjectPrefix,
	}
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.Timeout(cfg.ConnectTimeout),
		nats.MaxReconnects(-1), // forever
		nats.ReconnectWait(cfg.ReconnectWait),
		nats.ReconnectBufSize(cfg.ReconnectBufSize),
		nats.FlusherTimeout(cfg.WriteTimeout),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				b.log.Warn("bus disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			b.log.Info("bus reconnected", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrSlowConsumer) {
				b.metrics.dropped.Inc()
			}
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			b.log.Warn("bus error", "subject", subject, "err", err)
		}),
		nats.ClosedHandler(func(*nats.Conn) { close(b.closed) }),
	}
	url := cfg.URL
	if url == "" {
		srv, err := startEmbedded(cfg, b.log)
		if err != nil {
			return nil, err
		}
		b.srv = srv
		opts = append(opts, nats.InProcessServer(srv))
	}
	dial := url
	if dial == "" {
		// nats.go wants a URL to parse even for an in-process connection;
		// it is never dialed.
		dial = "nats://in-process.invalid"
	}
	nc, err := nats.Connect(dial, opts...)
	if err != nil {
		if b.srv != nil {
			b.srv.Shutdown()
			b.srv.WaitForShutdown()
		}
		if url == "" {
			return nil, fmt.Errorf("connect to embedded nats: %w", err)
		}
		return nil, fmt.Errorf("connect to nats %s: %w", redact(url), err)
	}
	b.nc = nc
	if b.srv != nil && cfg.clustered() {
		b.log.Info("bus started", "mode", "embedded", "client_listener", "none",
			"cluster", b.ClusterAddr(), "routes", len(cfg.Routes), "server_name", b.srv.Name())
	} else if b.srv != nil {
		b.log.Info("bus started", "mode", "embedded", "listener", "none")
	} else {
		b.log.Info("bus started", "mode", "external", "url", nc.ConnectedUrlRedacted())
	}
	return b, nil
}

// startEmbedded runs a NATS server inside this process. DontListen keeps it
// off the network entirely: no client port, no monitoring port, nothing for
// another process to reach (or to collide with a real NATS on 4222). With
// Config.ClusterListen it also accepts and dials routes to other nodes'
// embedded servers, still without a client port (cluster.go).
func startEmbedded(cfg Config, log *slog.Logger) (*server.Server, error) {
	name := cfg.ServerName
	if name == "" && cfg.clustered() {
		name = uniqueServerName(cfg.Name)
	} else if name == "" {
		name = cfg.Name + "-embedded"
	}
	opts := &server.Options{
		ServerName: name,
		DontListen: true,
		// Never used while DontListen holds; set so that a future change of
		// that flag can not silently take the well-known port.
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		NoSigs:     true,
		MaxPayload: cfg.MaxPayload,
	}
	if cfg.clustered() {
		if err := applyCluster(cfg, opts); err != nil {
			return nil, err
		}
	}
	applyJetStream(cfg, opts)
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	if cfg.clustered() {
		clog := newClusterLogger(log.With("nats", "embedded"))
		srv.SetLoggerV2(clog, false, false, false)
		srv.Start()
		if err := waitClustered(srv, clog.fatal); err != nil {
			srv.Shutdown()
			srv.WaitForShutdown()
			return nil, err
		}
		return srv, nil
	}
	srv.SetLoggerV2(&serverLogger{log: log.With("nats", "embedded")}, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, errors.New("embedded nats: not ready after 10s")
	}
	return srv, nil
}

// Publish sends each event on each of its topics. It returns once the
// messages are in the connection's buffer; failures are logged and counted,
// and the event is then lost to the bus (the store's log still has it).
func (b *Bus) Publish(events []parley.Event) { b.PublishChecked(events) }

// PublishChecked is Publish that also says whether anything failed: the
// first error, nil when every message is in the connection's buffer (the
// store's outbox acknowledges only then; Flush says when the server has
// them).
func (b *Bus) PublishChecked(events []parley.Event) error {
	var first error
	failed := func(ev parley.Event, topic string, err error) {
		b.publishFailed(ev, topic, err)
		if first == nil {
			first = fmt.Errorf("publish %s to %q: %w", ev.Type, topic, err)
		}
	}
	for i := range events {
		ev := events[i]
		topics := ev.Topics
		if len(topics) == 0 {
			continue
		}
		ev.Topics = nil // the subject says it; keep it off the wire
		data, err := json.Marshal(ev)
		if err != nil {
			failed(ev, "", err)
			continue
		}
		for _, topic := range topics {
			if err := checkTopic(topic, false); err != nil {
				failed(ev, topic, err)
				continue
			}
			if err := b.nc.Publish(b.subject(topic), data); err != nil {
				failed(ev, topic, err)
				continue
			}
			b.metrics.published.Inc()
		}
	}
	return first
}

func (b *Bus) publishFailed(ev parley.Event, topic string, err error) {
	b.metrics.publishErrors.Inc()
	b.log.Error("bus publish failed", "topic", topic, "type", ev.Type,
		"channel_id", ev.ChannelID, "seq", ev.Seq, "err", err)
}

// Subscribe calls fn with every event published on topic, one at a time and
// in the order the bus delivered them. topic may use NATS wildcards ("*" for
// one token, ">" for the rest). The returned function ends the subscription.
func (b *Bus) Subscribe(topic string, fn func(parley.Event)) (unsubscribe func() error, err error) {
	if err := checkTopic(topic, true); err != nil {
		return nil, err
	}
	sub, err := b.nc.Subscribe(b.subject(topic), func(m *nats.Msg) {
		var ev parley.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			b.metrics.decodeErrors.Inc()
			b.log.Error("bus decode failed", "subject", m.Subject, "err", err)
			return
		}
		ev.Topics = []string{b.topic(m.Subject)}
		b.metrics.receive(&ev, time.Now())
		fn(ev)
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", topic, err)
	}
	return sub.Unsubscribe, nil
}

// Connected reports whether the bus is connected right now (readiness).
func (b *Bus) Connected() bool { return b.nc.IsConnected() }

// Embedded reports whether the bus runs its own in-process server.
func (b *Bus) Embedded() bool { return b.srv != nil }

// Flush waits until the server has processed everything published so far
// (tests, and shutdown of tools that publish then exit).
func (b *Bus) Flush() error { return b.nc.Flush() }

// FlushContext is Flush bounded by ctx (which must have a deadline or be
// cancelled; the NATS client refuses one that has neither): the store's
// outbox relay waits with row locks held and must not wait long on a down
// bus.
func (b *Bus) FlushContext(ctx context.Context) error { return b.nc.FlushWithContext(ctx) }

// Close drains the connection (pending subscriptions are delivered and
// published messages flushed), then shuts the embedded server down.
func (b *Bus) Close() error {
	var err error
	if b.nc != nil {
		if derr := b.nc.Drain(); derr != nil && !errors.Is(derr, nats.ErrConnectionClosed) {
			err = fmt.Errorf("drain bus: %w", derr)
			b.nc.Close()
		}
		select {
		case <-b.closed:
		case <-time.After(30 * time.Second):
			b.nc.Close()
		}
	}
	if b.srv != nil {
		b.srv.Shutdown()
		b.srv.WaitForShutdown()
	}
	return err
}

// subject is the NATS subject of topic: the one place subjects are made.
func (b *Bus) subject(topic string) string { return b.prefix + topic }

// topic is the topic of a subject this bus made.
func (b *Bus) topic(subject string) string { return strings.TrimPrefix(subject, b.prefix) }

// checkTopic rejects topics that would make a broken or unintended subject:
// empty tokens, whitespace, and (when publishing) wildcards.
func checkTopic(topic string, wildcards bool) error {
	if topic == "" {
		return errors.New("empty topic")
	}
	if strings.ContainsAny(topic, " \t\r\n") {
		return fmt.Errorf("topic %q contains whitespace", topic)
	}
	for _, tok := range strings.Split(topic, ".") {
		switch {
		case tok == "":
			return fmt.Errorf("topic %q has an empty token", topic)
		case !wildcards && (tok == "*" || tok == ">"):
			return fmt.Errorf("topic %q: wildcards cannot be published to", topic)
		}
	}
	return nil
}

// redact hides a password in a NATS URL before it is logged or returned.
func redact(url string) string {
	at := strings.LastIndex(url, "@")
	scheme := strings.Index(url, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return url
	}
	return url[:scheme+3] + "***" + url[at:]
}
