package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"parley"
	"parley/bench/internal/benchkit"
	"parley/internal/openloop"
)

// Round is one publishing round on the same connections.
type Round struct {
	Rate       float64 `json:"rate"`     // asked, messages per second
	Achieved   float64 `json:"achieved"` // started over the schedule's window
	Late       int64   `json:"late_starts"`
	AtCap      int64   `json:"at_cap"`     // due while -max-in-flight publishes were running
	Comparable bool    `json:"comparable"` // achieved ≥ 95 % of rate
	Messages   int     `json:"messages"`
	Errors     int64   `json:"publish_errors"`
	Expected   int64   `json:"expected_deliveries"`
	Delivered  int64   `json:"delivered"`
	Lost       int64   `json:"lost"`
	Duplicates int64   `json:"duplicates"`

	// The publish window is the schedule's ideal length (messages over
	// rate) from the first due time; the drain runs from its end until
	// the last delivery (or Config.Drain). Cores are CPU-seconds per wall
	// second over each.
	PublishSeconds   float64 `json:"publish_seconds"`
	DrainSeconds     float64 `json:"drain_seconds"`
	ServerCores      float64 `json:"server_cores"`
	ServerDrainCores float64 `json:"server_drain_cores"`
	GenCores         float64 `json:"generator_cores"`
	GenDrainCores    float64 `json:"generator_drain_cores"`
	ServerCPUSeconds float64 `json:"server_cpu_seconds"` // both windows
	DeliveriesPerCPU float64 `json:"deliveries_per_cpu_second"`

	P50ms float64 `json:"p50_ms"` // from each message's due time to its receipt
	P99ms float64 `json:"p99_ms"`
	Maxms float64 `json:"max_ms"`
	// Pass: comparable, nothing lost, no publish error and p99 within the
	// limit (the capacity criteria).
	Pass bool `json:"pass"`
}

// publication is one benchmark message: Parley posts its text; the others
// carry Parley's message object for that text, so that every server
// delivers the same payload.
type publication struct {
	idx    int
	due    time.Time
	text   string
	object []byte
}

func newPublication(idx int, due time.Time, size int) publication {
	text := benchkit.StampAt(stampPrefix, idx, due, size)
	obj, _ := json.Marshal(parley.Message{
		ID: fmt.Sprintf("01JBENCH%018d", idx), WorkspaceID: "01JBENCHWORKSPACE000000000", ChannelID: "01JBENCHCHANNEL00000000000",
		Seq: int64(idx + 1), UserID: "01JBENCHUSER00000000000000", Text: text, CreatedAt: due.UTC(), Reactions: []parley.Reaction{},
	})
	return publication{idx: idx, due: due, text: text, object: obj}
}

// cpuMark is a reading of both processes' CPU time.
type cpuMark struct {
	at          time.Time
	server, gen time.Duration
}

func markCPU(p *benchkit.Proc) (cpuMark, error) {
	s, err := p.CPUTime()
	return cpuMark{at: time.Now(), server: s, gen: benchkit.SelfCPUTime()}, err
}

// cores is CPU-seconds per wall second between a and b.
func cores(a, b cpuMark) (server, gen float64) {
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 {
		return 0, 0
	}
	return (b.server - a.server).Seconds() / wall, (b.gen - a.gen).Seconds() / wall
}

// round publishes messages first.. at rate, open-loop, and waits for their
// deliveries.
func round(ctx context.Context, cfg Config, t target, rec *recorder, r, first int, rate float64, n int) (Round, []int64, error) {
	messages := roundMessages(cfg, rate)
	rr := Round{Rate: rate, Messages: messages, Expected: int64(messages) * int64(n)}
	window := time.Duration(float64(messages) / rate * float64(time.Second))
	m0, err := markCPU(t.proc())
	if err != nil {
		return rr, nil, err
	}
	// The publish window's end is read on time, whatever the publishes do.
	midc := make(chan cpuMark, 1)
	wake := time.AfterFunc(window, func() {
		m, _ := markCPU(t.proc())
		midc <- m
	})
	defer wake.Stop()
	var (
		mu      sync.Mutex
		pubLat  []int64
		errs    atomic.Int64
		lastErr atomic.Value
	)
	st := openloop.Run(ctx, openloop.Schedule{Rate: rate, N: messages, MaxInFlight: cfg.MaxInFlight, Late: cfg.Late},
		func(a openloop.Action) {
			pub := newPublication(first+a.I, a.Due, cfg.TextBytes)
			if err := t.publish(context.WithoutCancel(ctx), pub); err != nil {
				errs.Add(1)
				lastErr.Store(err)
				return
			}
			mu.Lock()
			pubLat = append(pubLat, int64(time.Since(a.Start)))
			mu.Unlock()
		})
	if ctx.Err() != nil {
		return rr, nil, ctx.Err()
	}
	rr.Achieved, rr.Late, rr.AtCap, rr.Comparable, rr.Errors = st.Achieved, st.Late, st.AtCap, st.Comparable(), errs.Load()
	if e, _ := lastErr.Load().(error); e != nil {
		cfg.Log.Warn("publish failed", "round", r+1, "errors", rr.Errors, "last", e)
	}
	var m1 cpuMark
	select {
	case m1 = <-midc:
	case <-ctx.Done():
		return rr, nil, ctx.Err()
	}
	deadline := time.Now().Add(cfg.Drain)
	for rec.rounds[r].distinct.Load() < rr.Expected && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(2 * time.Millisecond)
	}
	m2, err := markCPU(t.proc())
	if err != nil {
		return rr, nil, err
	}
	rr.PublishSeconds, rr.DrainSeconds = m1.at.Sub(m0.at).Seconds(), m2.at.Sub(m1.at).Seconds()
	rr.ServerCores, rr.GenCores = cores(m0, m1)
	rr.ServerDrainCores, rr.GenDrainCores = cores(m1, m2)
	rr.ServerCPUSeconds = (m2.server - m0.server).Seconds()
	rs := rec.rounds[r]
	rr.Delivered, rr.Duplicates = rs.distinct.Load(), rs.dups.Load()
	rr.Lost = rr.Expected - rr.Delivered
	if rr.ServerCPUSeconds > 0 {
		rr.DeliveriesPerCPU = float64(rr.Delivered) / rr.ServerCPUSeconds
	}
	rr.P50ms, rr.P99ms, rr.Maxms = rs.lat.Quantile(50), rs.lat.Quantile(99), rs.lat.Quantile(100)
	limit := cfg.P99Limit
	if limit <= 0 {
		limit = 500 * time.Millisecond
	}
	rr.Pass = rr.Comparable && rr.Lost == 0 && rr.Errors == 0 && rr.P99ms <= float64(limit)/1e6
	return rr, pubLat, nil
}

// recorder collects every subscriber's receipts.
type recorder struct {
	prefix    []byte
	roundOf   []int32 // message index → its round
	rounds    []*roundRec
	delivered atomic.Int64 // every stamped receipt, duplicates included
}

// roundRec is one round's receipts.
type roundRec struct {
	distinct, dups atomic.Int64
	lat            benchkit.Hist // due time → receipt, first receipts only
}

// newRecorder plans rounds of sizes[i] messages, numbered on from 0.
func newRecorder(sizes []int) *recorder {
	r := &recorder{prefix: []byte(stampPrefix)}
	for i, n := range sizes {
		r.rounds = append(r.rounds, &roundRec{})
		for range n {
			r.roundOf = append(r.roundOf, int32(i))
		}
	}
	return r
}

// counts is which messages one subscriber received: one bit each.
type counts struct {
	mu  sync.Mutex
	got []uint64
}

func (r *recorder) newCounts() *counts { return &counts{got: make([]uint64, (len(r.roundOf)+63)/64)} }

// receive records one delivery's frame for c; frames without a stamp are
// not the benchmark's and are ignored.
func (r *recorder) receive(c *counts, frame []byte) {
	now := time.Now().UnixNano()
	idx, sent, ok := benchkit.ParseStamp(r.prefix, frame)
	if !ok || idx < 0 || idx >= len(r.roundOf) {
		return
	}
	rs := r.rounds[r.roundOf[idx]]
	r.delivered.Add(1)
	bit := uint64(1) << (idx % 64)
	c.mu.Lock()
	dup := c.got[idx/64]&bit != 0
	c.got[idx/64] |= bit
	c.mu.Unlock()
	if dup {
		rs.dups.Add(1)
		return
	}
	rs.distinct.Add(1)
	rs.lat.Record(time.Duration(now - sent))
}

// missing counts the messages 0..messages-1 c never received.
func (c *counts) missing(messages int) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for i := range messages {
		if c.got[i/64]&(1<<(i%64)) == 0 {
			n++
		}
	}
	return n
}
