// Package bustest gives the test suites of bus users (presence, the query
// cache) the kinds of bus they run over: the embedded NATS that a node runs
// by default, and the machine's external NATS (PARLEY_TEST_NATS, default
// nats://127.0.0.1:4222), reached as a deployment with --nats reaches it.
// Both are natsbus, seen by the packages under test only through the
// interfaces of the root's bus.go.
//
// Every bus it starts has a subject prefix of its own, so that tests running
// at once on the shared external server (in parallel, or from other
// checkouts) never hear each other. Without a reachable external server its
// kind is skipped, except under CI=true, where it fails: CI must not pass by
// skipping half of the suite.
//
// It is for tests only; no package of the module may import it.
package bustest

import (
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"testing"
	"time"

	"parley"
	"parley/natsbus"
)

// DefaultURL is the external server used when PARLEY_TEST_NATS is not set.
const DefaultURL = "nats://127.0.0.1:4222"

// ExternalURL returns the URL of the external test server.
func ExternalURL() string {
	if u := os.Getenv("PARLEY_TEST_NATS"); u != "" {
		return u
	}
	return DefaultURL
}

// Kind is one way of running the bus.
type Kind struct {
	Name string
	// Require skips tb (fails it under CI=true) when this kind cannot run
	// here.
	Require func(tb testing.TB)
	// Start returns a bus of this kind, closed when tb ends.
	Start func(tb testing.TB) *natsbus.Bus
	// Pair returns two buses that hear each other, as two nodes of one
	// deployment do: two clustered embedded servers, or two connections to
	// the external server under one prefix. It returns once an event
	// published on either reaches a subscriber on the other.
	Pair func(tb testing.TB) (*natsbus.Bus, *natsbus.Bus)
}

// Kinds returns the embedded and the external kind, in that order.
func Kinds() []Kind {
	return []Kind{
		{
			Name:    "embedded",
			Require: func(testing.TB) {},
			Start:   func(tb testing.TB) *natsbus.Bus { return start(tb, natsbus.Config{}) },
			Pair: func(tb testing.TB) (*natsbus.Bus, *natsbus.Bus) {
				prefix := uniquePrefix()
				b1 := start(tb, natsbus.Config{ClusterListen: "127.0.0.1:0", SubjectPrefix: prefix})
				b2 := start(tb, natsbus.Config{ClusterListen: "127.0.0.1:0", SubjectPrefix: prefix,
					Routes: []string{"nats://" + b1.ClusterAddr()}})
				waitHear(tb, b1, b2)
				return b1, b2
			},
		},
		{
			Name:    "external",
			Require: requireExternal,
			Start: func(tb testing.TB) *natsbus.Bus {
				requireExternal(tb)
				return start(tb, natsbus.Config{URL: ExternalURL(), SubjectPrefix: uniquePrefix()})
			},
			Pair: func(tb testing.TB) (*natsbus.Bus, *natsbus.Bus) {
				requireExternal(tb)
				prefix := uniquePrefix()
				b1 := start(tb, natsbus.Config{URL: ExternalURL(), SubjectPrefix: prefix})
				b2 := start(tb, natsbus.Config{URL: ExternalURL(), SubjectPrefix: prefix})
				waitHear(tb, b1, b2)
				return b1, b2
			},
		},
	}
}

// uniquePrefix is a subject prefix no other test uses: "t<random id>.".
func uniquePrefix() string { return "t" + parley.NewID("") + "." }

func start(tb testing.TB, cfg natsbus.Config) *natsbus.Bus {
	tb.Helper()
	if cfg.SubjectPrefix == "" {
		cfg.SubjectPrefix = uniquePrefix()
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := natsbus.Start(cfg)
	if err != nil {
		tb.Fatalf("start bus: %v", err)
	}
	tb.Cleanup(func() { b.Close() })
	return b
}

func requireExternal(tb testing.TB) {
	tb.Helper()
	raw := ExternalURL()
	u, err := url.Parse(raw)
	if err != nil {
		tb.Fatalf("PARLEY_TEST_NATS %q: %v", raw, err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("NATS at %s is unreachable under CI: %v", u.Host, err)
		}
		tb.Skipf("NATS at %s is unreachable: %v", u.Host, err)
	}
	conn.Close()
}

// waitHear returns once each bus hears a probe published on the other: a
// route between clustered servers, or an interest, takes a moment to
// spread.
func waitHear(tb testing.TB, a, b *natsbus.Bus) {
	tb.Helper()
	for _, p := range [][2]*natsbus.Bus{{a, b}, {b, a}} {
		from, to := p[0], p[1]
		topic := "probe." + parley.NewID("P")
		heard := make(chan struct{}, 1)
		unsub, err := to.Subscribe(topic, func(parley.Event) {
			select {
			case heard <- struct{}{}:
			default:
			}
		})
		if err != nil {
			tb.Fatalf("subscribe probe: %v", err)
		}
		if err := to.Flush(); err != nil {
			tb.Fatalf("flush: %v", err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for done := false; !done; {
			from.Publish([]parley.Event{{Type: "probe", Topics: []string{topic}}})
			select {
			case <-heard:
				done = true
			case <-time.After(20 * time.Millisecond):
				if time.Now().After(deadline) {
					tb.Fatal("two buses of a pair do not hear each other after 10s")
				}
			}
		}
		_ = unsub()
	}
}
