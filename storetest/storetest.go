// Package storetest is the one contract suite every parley.Store must pass.
// sqlstore runs it against SQLite and PostgreSQL; any future backend (or a
// caching wrapper) runs it too. Tests live in files by concept and register
// themselves with register, so that each file stands alone.
package storetest

import (
	"cmp"
	"context"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"parley"
)

// Opener returns a new, empty store that publishes committed events to pub.
// The store is closed when tb ends.
type Opener func(tb testing.TB, pub parley.EventPublisher) parley.Store

type testFunc func(t *testing.T, open Opener)

var registry = map[string]testFunc{}

// register adds a contract test under a name such as "Users/Signup".
func register(name string, fn testFunc) {
	if _, dup := registry[name]; dup {
		panic("storetest: duplicate test " + name)
	}
	registry[name] = fn
}

// Run runs the whole contract suite against stores made by open.
func Run(t *testing.T, open Opener) {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fn := registry[n]
		t.Run(n, func(t *testing.T) { fn(t, open) })
	}
}

// Recorder is an EventPublisher that keeps every published event.
type Recorder struct {
	mu     sync.Mutex
	events []parley.Event // guarded by mu
}

var _ parley.EventPublisher = (*Recorder)(nil)

func (r *Recorder) Publish(events []parley.Event) {
	r.mu.Lock()
	r.events = append(r.events, events...)
	r.mu.Unlock()
}

// Events returns a copy of everything published so far.
func (r *Recorder) Events() []parley.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]parley.Event(nil), r.events...)
}

// OfChannel returns the published events of one channel, in publish order.
func (r *Recorder) OfChannel(channelID string) []parley.Event {
	var out []parley.Event
	for _, e := range r.Events() {
		if e.ChannelID == channelID {
			out = append(out, e)
		}
	}
	return out
}

// LogOf returns a channel's published events as its log: in seq order,
// each seq once. The outbox publishes at least once (its relay publishes
// again what was not acknowledged within the grace period, which a loaded
// machine can pass), so a seq may have been published more than once.
func (r *Recorder) LogOf(channelID string) []parley.Event {
	bySeq := map[int64]parley.Event{}
	for _, e := range r.OfChannel(channelID) {
		if _, ok := bySeq[e.Seq]; !ok {
			bySeq[e.Seq] = e
		}
	}
	out := make([]parley.Event, 0, len(bySeq))
	for _, e := range bySeq {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b parley.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// OfType returns the published events of one type, in publish order.
func (r *Recorder) OfType(typ string) []parley.Event {
	var out []parley.Event
	for _, e := range r.Events() {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func ctx(tb testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	tb.Cleanup(cancel)
	return c
}

// Code asserts that err carries the parley error code want.
func Code(tb testing.TB, err error, want string) {
	tb.Helper()
	if got := parley.ErrorCode(err); got != want {
		tb.Fatalf("error code = %q (%v), want %q", got, err, want)
	}
}

// NoErr fails the test on err.
func NoErr(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatalf("unexpected error: %v", err)
	}
}

// Reset forgets the events published so far.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.events = nil
	r.mu.Unlock()
}
