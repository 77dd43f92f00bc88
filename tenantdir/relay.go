package tenantdir

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"parley/internal/promutil"
)

// DefaultRelayInterval is how often a relay looks for changes nobody
// kicked it about (a change made by another process: the CLI, another
// node).
const DefaultRelayInterval = 250 * time.Millisecond

// DefaultRelayPublishTimeout bounds one publish of one change to one
// stream. JetStream's own default (5 s) made every failed attempt while
// a stream elects a leader or waits for its server cost 5 s, so pending
// changes reached the streams only in steps of 5 s once the bus was back.
const DefaultRelayPublishTimeout = time.Second

// RelayConfig configures a Relay.
type RelayConfig struct {
	Catalogue *Catalogue
	NATS      NATS
	// Interval between looks at the change log (default
	// DefaultRelayInterval); a Kick looks at once.
	Interval time.Duration
	// PublishTimeout bounds each publish (default
	// DefaultRelayPublishTimeout): a stream that does not acknowledge
	// within it leaves the change pending for the next pass.
	PublishTimeout time.Duration
	Logger         *slog.Logger
	Registerer     prometheus.Registerer
}

// Relay publishes the catalogue's change log to the audiences' streams
// (the outbox's relay). Each change goes to every audience's stream, as
// that audience may see it, with the change's sequence as its message id
// so that JetStream drops a duplicate; only when every stream has
// acknowledged it is it marked published. Several relays (one per node)
// may run at once: their duplicates are dropped, and a projection applies
// a record only when it is newer than what it holds.
type Relay struct {
	cat      *Catalogue
	n        NATS
	js       jetstream.JetStream
	interval time.Duration
	timeout  time.Duration
	log      *slog.Logger
	kick     chan struct{}

	published prometheus.Counter
	errors    prometheus.Counter
}

// NewRelay checks the config and makes the streams.
func NewRelay(ctx context.Context, cfg RelayConfig) (*Relay, error) {
	n, err := cfg.NATS.check()
	if err != nil {
		return nil, err
	}
	if err := EnsureStreams(ctx, n); err != nil {
		return nil, err
	}
	js, err := jetstream.New(n.Conn)
	if err != nil {
		return nil, fmt.Errorf("tenantdir: jetstream: %w", err)
	}
	r := &Relay{cat: cfg.Catalogue, n: n, js: js, interval: cfg.Interval, timeout: cfg.PublishTimeout,
		log: cfg.Logger, kick: make(chan struct{}, 1)}
	if r.interval <= 0 {
		r.interval = DefaultRelayInterval
	}
	if r.timeout <= 0 {
		r.timeout = DefaultRelayPublishTimeout
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	r.log = r.log.With("component", "tenantdir-relay")
	r.published = promutil.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "parley_tenantdir_relay_published_total",
		Help: "Catalogue changes the relay published to every audience's stream.",
	}))
	if err := r.resyncIfEmpty(ctx); err != nil {
		return nil, err
	}
	r.errors = promutil.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "parley_tenantdir_relay_errors_total",
		Help: "Relay passes that failed (the changes stay pending and are retried).",
	}))
	return r, nil
}

// Kick makes the relay look at the change log now (the catalogue's
// OnChange).
func (r *Relay) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run publishes pending changes on every kick and every interval until
// ctx ends.
func (r *Relay) Run(ctx context.Context) {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		if _, err := r.Flush(ctx); err != nil && ctx.Err() == nil {
			if duplicateInFlight(err) {
				// Another node's relay is publishing the same change:
				// the next pass finds it stored (or publishes it).
				r.log.Debug("tenant directory relay: another relay is publishing the same change; will retry", "err", err)
			} else {
				r.errors.Inc()
				r.log.Warn("tenant directory relay: publish failed; will retry", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-t.C:
		}
	}
}

// Flush publishes every pending change now and returns how many it
// published.
func (r *Relay) Flush(ctx context.Context) (int, error) {
	total := 0
	for {
		pending, err := r.cat.Pending(ctx, 256)
		if err != nil || len(pending) == 0 {
			return total, err
		}
		done := make([]int64, 0, len(pending))
		for _, ch := range pending {
			if err := r.publish(ctx, ch); err != nil {
				if merr := r.cat.MarkPublished(ctx, done); merr != nil && ctx.Err() == nil {
					r.log.Warn("tenant directory relay: mark published", "err", merr)
				}
				return total, err
			}
			done = append(done, ch.Seq)
			total++
			r.published.Inc()
		}
		if err := r.cat.MarkPublished(ctx, done); err != nil {
			return total, err
		}
	}
}

// publish puts one change into every audience's stream, stripped for it.
func (r *Relay) publish(ctx context.Context, ch Change) error {
	key := ""
	switch {
	case ch.Workspace != nil:
		key = ch.Workspace.WorkspaceID
	case ch.Shard != nil:
		key = ch.Shard.ID
	default:
		return fmt.Errorf("change %d is empty", ch.Seq)
	}
	for _, aud := range Audiences {
		data, err := json.Marshal(ch.ForAudience(aud))
		if err != nil {
			return fmt.Errorf("change %d: %w", ch.Seq, err)
		}
		pctx, cancel := context.WithTimeout(ctx, r.timeout)
		_, err = r.js.Publish(pctx, r.n.changeSubject(aud, ch.Kind, key), data,
			jetstream.WithMsgID(strconv.FormatInt(ch.Seq, 10)))
		cancel()
		if err != nil {
			return fmt.Errorf("publish change %d to %s: %w", ch.Seq, r.n.StreamName(aud), err)
		}
	}
	return nil
}

// resyncIfEmpty republishes the catalogue's current state when the
// streams are empty but the catalogue is not (a new NATS, a lost
// JetStream directory): the catalogue is the truth, and the streams and
// every projection are rebuilt from it.
func (r *Relay) resyncIfEmpty(ctx context.Context) error {
	for _, aud := range Audiences {
		s, err := r.js.Stream(ctx, r.n.StreamName(aud))
		if err != nil {
			return fmt.Errorf("tenantdir: stream %s: %w", r.n.StreamName(aud), err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			return fmt.Errorf("tenantdir: stream %s: %w", r.n.StreamName(aud), err)
		}
		if info.State.LastSeq > 0 {
			return nil
		}
	}
	n, err := r.cat.Resync(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		r.log.Info("tenant directory: streams empty; republishing the catalogue", "changes", n)
	}
	return nil
}

// jsDuplicateInFlight is JetStream's JSStreamDuplicateMessageConflict:
// a message with this id is being stored by another publish right now.
const jsDuplicateInFlight jetstream.ErrorCode = 10158

// duplicateInFlight reports whether err is JetStream saying that another
// publish of the same change (its message id) is still in flight: what
// every relay but one hears when several nodes, in one region or many,
// publish a change at once. It is not a failure.
func duplicateInFlight(err error) bool {
	var je jetstream.JetStreamError
	return errors.As(err, &je) && je.APIError() != nil && je.APIError().ErrorCode == jsDuplicateInFlight
}
