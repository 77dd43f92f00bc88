package tenantdir

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ProjectionConfig configures a Projection.
type ProjectionConfig struct {
	NATS     NATS
	Audience Audience
	// Chaos, when set, can delay ingestion (ChaosState.IngestDelayMS).
	Chaos  *Chaos
	Logger *slog.Logger
}

// Projection is an audience's read model: the newest state of every
// workspace and shard, rebuilt by replaying the audience's stream from
// its start and then following it. It holds only what its audience may
// see, because its stream never carried more.
type Projection struct {
	n     NATS
	aud   Audience
	chaos *Chaos
	log   *slog.Logger

	mu         sync.RWMutex
	workspaces map[string]Record // guarded by mu
	shards     map[string]Shard  // guarded by mu
	applied    uint64            // stream sequence of the last message applied; guarded by mu

	readyAt uint64        // the stream's last sequence at start
	ready   chan struct{} // closed once readyAt is applied
	once    sync.Once
	stop    chan struct{}
	cc      jetstream.ConsumeContext
}

// StartProjection replays aud's stream from the start and follows it.
// Ready says when the replay has reached the stream's end as it was at
// start.
func StartProjection(ctx context.Context, cfg ProjectionConfig) (*Projection, error) {
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
	p := &Projection{n: n, aud: cfg.Audience, chaos: cfg.Chaos, log: cfg.Logger,
		workspaces: map[string]Record{}, shards: map[string]Shard{},
		ready: make(chan struct{}), stop: make(chan struct{})}
	if p.log == nil {
		p.log = slog.Default()
	}
	p.log = p.log.With("component", "tenantdir-projection", "audience", string(cfg.Audience))
	stream, err := js.Stream(ctx, n.StreamName(cfg.Audience))
	if err != nil {
		return nil, fmt.Errorf("tenantdir: stream %s: %w", n.StreamName(cfg.Audience), err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("tenantdir: stream %s: %w", n.StreamName(cfg.Audience), err)
	}
	p.readyAt = info.State.LastSeq
	if p.readyAt == 0 {
		p.once.Do(func() { close(p.ready) })
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, fmt.Errorf("tenantdir: consumer of %s: %w", n.StreamName(cfg.Audience), err)
	}
	if p.cc, err = cons.Consume(p.handle); err != nil {
		return nil, fmt.Errorf("tenantdir: consume %s: %w", n.StreamName(cfg.Audience), err)
	}
	return p, nil
}

// Stop stops following the stream; the projection keeps its state.
func (p *Projection) Stop() {
	close(p.stop)
	p.cc.Stop()
	<-p.cc.Closed()
}

// Ready is closed once the projection has replayed the stream as it was
// at start.
func (p *Projection) Ready() <-chan struct{} { return p.ready }

// Audience is the projection's audience.
func (p *Projection) Audience() Audience { return p.aud }

// handle applies one message of the stream (the consumer's goroutine).
func (p *Projection) handle(m jetstream.Msg) {
	defer func() {
		if v := recover(); v != nil {
			p.log.Error("tenant directory projection: panic applying a change", "panic", v)
		}
	}()
	meta, err := m.Metadata()
	if err != nil {
		p.log.Warn("tenant directory projection: message without metadata", "err", err)
		return
	}
	if d := p.chaos.IngestDelay(); d > 0 {
		if wait := time.Until(meta.Timestamp.Add(d)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-p.stop:
				t.Stop()
				return
			}
		}
	}
	var ch Change
	if err := json.Unmarshal(m.Data(), &ch); err != nil {
		p.log.Warn("tenant directory projection: undecodable change", "subject", m.Subject(), "err", err)
	} else {
		p.apply(ch, meta.Sequence.Stream)
	}
	if meta.Sequence.Stream >= p.readyAt {
		p.once.Do(func() { close(p.ready) })
	}
}

// apply keeps the change when it is newer than what the projection holds.
// A tombstone (a removed placement) is kept too, so that an older record
// delivered after it changes nothing; lookups do not see it.
func (p *Projection) apply(ch Change, streamSeq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.applied = streamSeq
	switch {
	case ch.Workspace != nil:
		if old, ok := p.workspaces[ch.Workspace.WorkspaceID]; !ok || old.Version < ch.Workspace.Version {
			p.workspaces[ch.Workspace.WorkspaceID] = *ch.Workspace
		}
	case ch.Shard != nil:
		if old, ok := p.shards[ch.Shard.ID]; !ok || old.Version < ch.Shard.Version {
			p.shards[ch.Shard.ID] = *ch.Shard
		}
	}
}

// Workspace returns a workspace's record.
func (p *Projection) Workspace(id string) (Record, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	r, ok := p.workspaces[id]
	if r.Removed {
		return Record{}, false
	}
	return r, ok
}

// Workspaces returns every record (tombstones left out), by id.
func (p *Projection) Workspaces() []Record {
	p.mu.RLock()
	out := make([]Record, 0, len(p.workspaces))
	for _, r := range p.workspaces {
		if !r.Removed {
			out = append(out, r)
		}
	}
	p.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].WorkspaceID < out[j].WorkspaceID })
	return out
}

// Shards returns every shard, by region and id.
func (p *Projection) Shards() []Shard {
	p.mu.RLock()
	out := make([]Shard, 0, len(p.shards))
	for _, s := range p.shards {
		out = append(out, s)
	}
	p.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Region != out[j].Region {
			return out[i].Region < out[j].Region
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Applied is the stream sequence of the last change applied.
func (p *Projection) Applied() uint64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.applied
}
