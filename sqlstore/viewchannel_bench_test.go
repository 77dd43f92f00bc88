package sqlstore

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"parley"
	"parley/internal/testpg"
	"parley/storetest"
)

// View-channel benchmark; docs/benchmarks.md ("Viewing a channel with
// 1,000 followed threads") has the command and results. A user follows
// viewThreads threads in one channel, all read; before each view another
// user replies to viewFresh of them (not timed). A view is what a client
// does on opening the channel: a history page, then marking the channel
// read. "incremental" is the store's own MarkRead (it writes only the
// memberships with something unread); "naive" is the same read-marker move
// followed by the Mattermost-v5.37 bookkeeping, "mark every thread of the
// channel read", written here only, in the same transaction.

const (
	viewThreads = 1000
	viewFresh   = 3
)

// eventCounter counts published thread.read events: the store's MarkRead
// publishes exactly one per thread membership it writes.
type eventCounter struct{ threadReads atomic.Int64 }

func (c *eventCounter) Publish(evs []parley.Event) {
	for _, e := range evs {
		if e.Type == parley.EventThreadRead {
			c.threadReads.Add(1)
		}
	}
}

type viewBench struct {
	st           *Store
	pub          *eventCounter
	ws           *parley.Workspace
	alice, bob   *parley.User
	ch           *parley.Channel
	roots        []*parley.Message
	next, lastSq int64
}

func newViewBench(b *testing.B, d Dialect) *viewBench {
	b.Helper()
	ctx := context.Background()
	v := &viewBench{pub: &eventCounter{}}
	cfg := Config{Publisher: v.pub, LiveConfig: parley.StaticConfig(parley.DefaultLiveConfig())}
	if d == Postgres {
		cfg.PostgresURL = testpg.New(b)
	} else {
		cfg.Path = filepath.Join(b.TempDir(), "parley.db")
	}
	st, err := Open(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	v.st = st
	v.alice = storetest.MustUser(b, st, "alice")
	v.bob = storetest.MustUser(b, st, "bob")
	v.ws = storetest.MustWorkspace(b, st, v.alice)
	storetest.MustJoinWorkspace(b, st, v.ws, v.alice, v.bob)
	v.ch = storetest.MustChannel(b, st, v.ws, v.alice, "busy", parley.KindPublic)
	if _, err := st.JoinChannel(ctx, v.bob.ID, v.ch.ID); err != nil {
		b.Fatal(err)
	}
	v.roots = make([]*parley.Message, viewThreads)
	par(b, viewThreads, func(i int) error {
		m, _, err := st.PostMessage(ctx, v.alice.ID, v.ch.ID, parley.NewMessage{Text: fmt.Sprintf("root %d", i)})
		v.roots[i] = m
		return err
	})
	par(b, viewThreads, func(i int) error { // alice follows every thread
		_, _, err := st.PostMessage(ctx, v.bob.ID, v.ch.ID, parley.NewMessage{Text: "re", ThreadRootID: v.roots[i].ID})
		return err
	})
	if _, err := st.MarkRead(ctx, v.alice.ID, v.ch.ID, 1<<40); err != nil {
		b.Fatal(err)
	}
	page, err := st.ListThreads(ctx, v.alice.ID, v.ws.ID, parley.ThreadQuery{Unread: true})
	if err != nil || len(page.Threads) != 0 {
		b.Fatalf("unread threads after setup: %v %v", page, err)
	}
	return v
}

// par runs fn(0..n-1) on 16 goroutines, so that group commit batches them.
func par(b *testing.B, n int, fn func(i int) error) {
	var wg sync.WaitGroup
	var next atomic.Int64
	var failed atomic.Value
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := fn(i); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
}

// freshReplies has bob reply to viewFresh threads, a different few each
// time.
func (v *viewBench) freshReplies(b *testing.B) {
	for range viewFresh {
		root := v.roots[v.next%viewThreads]
		v.next += 97 // coprime with 1,000: every thread in turn
		m, _, err := v.st.PostMessage(context.Background(), v.bob.ID, v.ch.ID, parley.NewMessage{Text: "news", ThreadRootID: root.ID})
		if err != nil {
			b.Fatal(err)
		}
		v.lastSq = m.Seq
	}
}

// viewIncremental is the store as it is.
func (v *viewBench) viewIncremental(ctx context.Context) (int64, error) {
	if _, err := v.st.ListMessages(ctx, v.alice.ID, v.ch.ID, parley.HistoryQuery{Limit: 50}); err != nil {
		return 0, err
	}
	before := v.pub.threadReads.Load()
	if _, err := v.st.MarkRead(ctx, v.alice.ID, v.ch.ID, v.lastSq); err != nil {
		return 0, err
	}
	return v.pub.threadReads.Load() - before, nil
}

// viewNaive moves the read marker the same way, then marks every thread
// membership of the user in the channel read, whether or not it had
// anything unread.
func (v *viewBench) viewNaive(ctx context.Context) (int64, error) {
	if _, err := v.st.ListMessages(ctx, v.alice.ID, v.ch.ID, parley.HistoryQuery{Limit: 50}); err != nil {
		return 0, err
	}
	var rows int64
	err := v.st.write(ctx, "naive view", func(ctx context.Context, tx *Tx) error {
		var rs *readState
		if err := v.st.markRead(ctx, tx, v.alice.ID, v.ch.ID, v.lastSq, &rs); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx,
			`UPDATE thread_memberships SET unread_replies = 0, unread_mentions = 0, last_viewed_at = $1
			 WHERE user_id = $2 AND channel_id = $3 AND workspace_id = $4`,
			micros(tx.now), v.alice.ID, v.ch.ID, v.ws.ID)
		if err != nil {
			return err
		}
		rows, err = res.RowsAffected()
		return err
	})
	return rows, err
}

// BenchmarkViewChannel reports p50/p99 of one view and the thread
// membership rows it wrote, per store and variant.
func BenchmarkViewChannel(b *testing.B) {
	for _, d := range []Dialect{SQLite, Postgres} {
		b.Run(string(d), func(b *testing.B) {
			v := newViewBench(b, d)
			for _, variant := range []struct {
				name string
				view func(context.Context) (int64, error)
			}{{"incremental", v.viewIncremental}, {"naive", v.viewNaive}} {
				b.Run(variant.name, func(b *testing.B) {
					ctx := context.Background()
					var lat []time.Duration
					var rows int64
					for i := 0; i < b.N; i++ {
						b.StopTimer()
						v.freshReplies(b)
						b.StartTimer()
						start := time.Now()
						n, err := variant.view(ctx)
						lat = append(lat, time.Since(start))
						if err != nil {
							b.Fatal(err)
						}
						rows += n
					}
					slices.Sort(lat)
					pct := func(p float64) float64 {
						return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
					}
					b.ReportMetric(pct(0.50), "p50-ms")
					b.ReportMetric(pct(0.99), "p99-ms")
					b.ReportMetric(float64(rows)/float64(b.N), "rows/view")
				})
			}
		})
	}
}
