package recent

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"parley"
)

// TestFetchSpike measures store queries per delivered event in LINE's fetch
// spike: every time the hot channel takes a message, each of its members'
// clients fetches /events after the last seq it has. The same run measures
// three modes: the buffer off (recent_enabled false: a query per fetch),
// coalescing alone (the channel not hot: identical concurrent reads share a
// query) and the buffer on. The test's small size checks the ordering; `make
// bench-fetchspike` runs it at size on PostgreSQL and prints the table for
// docs/benchmarks.md.
//
//	PARLEY_FETCHSPIKE_CLIENTS   fetching clients per event (default 40)
//	PARLEY_FETCHSPIKE_USERS     distinct members they log in as (default 8)
//	PARLEY_FETCHSPIKE_MESSAGES  messages per mode (default 10)
//	PARLEY_FETCHSPIKE_PG=1      PostgreSQL instead of SQLite
func TestFetchSpike(t *testing.T) {
	clients, users, messages := envInt("PARLEY_FETCHSPIKE_CLIENTS", 40), envInt("PARLEY_FETCHSPIKE_USERS", 8),
		envInt("PARLEY_FETCHSPIKE_MESSAGES", 10)
	w := setupOn(t, os.Getenv("PARLEY_FETCHSPIKE_PG") == "1")
	ctx := context.Background()
	actors := []string{w.alice, w.bob, w.carol}
	for i := len(actors); i < users; i++ {
		h := "fan" + strconv.Itoa(i)
		u, err := w.st.Store.CreateUser(ctx, parley.NewUser{Email: h + "@x.test", Name: h, Handle: h, PasswordHash: "x"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.st.Store.AcceptInvite(ctx, u.ID, w.invite); err != nil {
			t.Fatal(err)
		}
		actors = append(actors, u.ID)
	}

	type result struct {
		mode             string
		fetches, queries int64
		delivered        int64
		elapsed          time.Duration
	}
	run := func(mode string, ch string) result {
		t.Helper()
		last := make([]int64, clients)
		start := w.lastSeq(t, ch)
		for i := range last {
			last[i] = start
		}
		q0, t0 := w.st.reads(), time.Now()
		var delivered, fetches int64
		var mu sync.Mutex
		fetchAll := func() {
			var wg sync.WaitGroup
			for i := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p, err := w.wrapped.ListEvents(ctx, actors[i%len(actors)], ch, last[i], 100)
					if err != nil {
						t.Error(err)
						return
					}
					if n := len(p.Events); n > 0 {
						last[i] = p.Events[n-1].Seq
					}
					mu.Lock()
					delivered += int64(len(p.Events))
					fetches++
					mu.Unlock()
				}()
			}
			wg.Wait()
		}
		var seq int64
		for range messages {
			seq = w.post(t, ch, 1)
			if mode == "buffer" {
				w.det.Observe(ch, seq)
				// A client fetches once the push reached it; the push and
				// the buffer come off the same bus.
				waitFor(t, "buffer has the event", func() bool {
					_, hi, _, ok := w.b.window(ch, seq-1, 1)
					return ok && hi >= seq
				})
			}
			fetchAll()
		}
		for i := range last {
			if last[i] != seq {
				t.Fatalf("%s: client %d ends at seq %d, want %d", mode, i, last[i], seq)
			}
		}
		return result{mode, fetches, w.st.reads() - q0, delivered, time.Since(t0)}
	}

	var results []result
	w.live.set(func(c *parley.LiveConfig) { c.RecentEnabled = false })
	results = append(results, run("off", w.pub))
	w.live.set(func(c *parley.LiveConfig) { c.RecentEnabled = true })
	results = append(results, run("coalesce", w.pub))
	w.post(t, w.priv, 1)
	w.makeHot(t, w.priv) // the private channel's members: alice and bob
	for i := range actors {
		if i > 1 {
			if _, err := w.st.Store.AddMembers(ctx, w.alice, w.priv, []string{actors[i]}); err != nil && parley.ErrorCode(err) != parley.ECONFLICT {
				t.Fatal(err)
			}
		}
	}
	results = append(results, run("buffer", w.priv))

	t.Logf("fetch spike: %d clients (%d members) fetch /events after each of %d messages", clients, users, messages)
	t.Logf("%-9s %9s %9s %10s %18s %9s", "mode", "fetches", "queries", "delivered", "queries/delivered", "wall")
	for _, r := range results {
		t.Logf("%-9s %9d %9d %10d %18.4f %9s", r.mode, r.fetches, r.queries, r.delivered,
			float64(r.queries)/float64(r.delivered), r.elapsed.Round(10*time.Millisecond))
		if r.delivered != int64(clients*messages) {
			t.Errorf("%s delivered %d events, want %d", r.mode, r.delivered, clients*messages)
		}
	}
	off, buf := results[0], results[2]
	if off.queries != off.fetches {
		t.Errorf("off: %d store queries for %d fetches", off.queries, off.fetches)
	}
	if buf.queries*10 > off.queries {
		t.Errorf("buffer: %d store queries, not a tenth of the %d without it", buf.queries, off.queries)
	}
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil && v > 0 {
		return v
	}
	return def
}
