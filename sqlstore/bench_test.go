package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"parley"
	"parley/internal/testpg"
	"parley/sqlstore"
	"parley/storetest"
)

// Store benchmarks; docs/benchmarks.md ("Store") has the command, the
// machine and the results.

// benchWriters is how many goroutines write at once, whatever GOMAXPROCS.
const benchWriters = 8

var benchDialects = []struct {
	name string
	open func(testing.TB, parley.EventPublisher) parley.Store
}{
	{"sqlite", openSQLite},
	{"postgres", openPostgres},
	{"postgres-nolanes", openPostgresNoLanes},
}

// commitCounter is a publisher that counts Publish calls and events. On
// SQLite the group committer publishes once per committed batch, so events
// per call is the average batch size.
type commitCounter struct {
	calls, events atomic.Int64
}

func (c *commitCounter) Publish(evs []parley.Event) {
	c.calls.Add(1)
	c.events.Add(int64(len(evs)))
}

func (c *commitCounter) reset() { c.calls.Store(0); c.events.Store(0) }

// runWriters runs op(i) for i in [0, n) on benchWriters goroutines and
// returns the first error.
func runWriters(n int, op func(i int) error) error {
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	for range benchWriters {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := op(i); err != nil {
					errOnce.Do(func() { first = err })
					next.Store(int64(n)) // stop the others
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// benchTeam is a workspace whose benchWriters users have all joined nch
// public channels.
type benchTeam struct {
	st    parley.Store
	users []*parley.User
	chans []*parley.Channel
}

func newBenchTeam(b *testing.B, open func(testing.TB, parley.EventPublisher) parley.Store, pub parley.EventPublisher, nch int) *benchTeam {
	b.Helper()
	st := open(b, pub)
	t := &benchTeam{st: st}
	owner := storetest.MustUser(b, st, "bench")
	ws := storetest.MustWorkspace(b, st, owner)
	t.users = append(t.users, owner)
	for range benchWriters - 1 {
		u := storetest.MustUser(b, st, "bench")
		storetest.MustJoinWorkspace(b, st, ws, owner, u)
		t.users = append(t.users, u)
	}
	for i := range nch {
		t.chans = append(t.chans, storetest.MustChannel(b, st, ws, owner, fmt.Sprintf("bench-%d", i), parley.KindPublic))
	}
	ctx := context.Background()
	err := runWriters(nch*(benchWriters-1), func(i int) error {
		_, err := st.JoinChannel(ctx, t.users[1+i%(benchWriters-1)].ID, t.chans[i/(benchWriters-1)].ID)
		return err
	})
	if err != nil {
		b.Fatalf("join channels: %v", err)
	}
	return t
}

// BenchmarkPost measures posting throughput with benchWriters concurrent
// writers, into one channel or spread over 100.
func BenchmarkPost(b *testing.B) {
	for _, d := range benchDialects {
		b.Run(d.name, func(b *testing.B) {
			counter := &commitCounter{}
			team := newBenchTeam(b, d.open, counter, 100)
			var posted atomic.Int64 // unique client_msg_ids across runs
			for _, nch := range []int{1, 100} {
				b.Run(fmt.Sprintf("%dch", nch), func(b *testing.B) {
					ctx := context.Background()
					counter.reset()
					b.ResetTimer()
					start := time.Now()
					err := runWriters(b.N, func(i int) error {
						u := team.users[i%benchWriters]
						ch := team.chans[i%nch]
						_, _, err := team.st.PostMessage(ctx, u.ID, ch.ID, parley.NewMessage{
							Text:        "a benchmark message of an ordinary length, about sixty chars",
							ClientMsgID: fmt.Sprintf("bench-%d", posted.Add(1)),
						})
						return err
					})
					elapsed := time.Since(start)
					b.StopTimer()
					if err != nil {
						b.Fatalf("post: %v", err)
					}
					b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
					if counter.calls.Load() > 0 {
						b.ReportMetric(float64(counter.events.Load())/float64(counter.calls.Load()), "posts/commit")
					}
				})
			}
		})
	}
}

// historyMessages is the size of the channel BenchmarkHistoryPage reads.
const historyMessages = 10_000

// BenchmarkHistoryPage measures reading one 50-message page (with reactions
// and pins decorated) from a 10,000-message channel, at depths spread over
// the whole history. On PostgreSQL the tables are analyzed after seeding, as
// autovacuum would soon do, so that plans are those of a live server.
func BenchmarkHistoryPage(b *testing.B) {
	for _, d := range benchDialects {
		b.Run(d.name, func(b *testing.B) {
			open := d.open
			var pgURL string
			if d.name == "postgres" {
				pgURL = testpg.New(b)
				open = func(tb testing.TB, pub parley.EventPublisher) parley.Store {
					return mustOpen(tb, sqlstore.Config{PostgresURL: pgURL, Publisher: pub})
				}
			}
			team := newBenchTeam(b, open, nil, 1)
			ch := team.chans[0]
			seqs := seedHistory(b, team, ch)
			if pgURL != "" {
				analyze(b, pgURL)
			}
			reader := team.users[0]
			ctx := context.Background()
			for i := 0; b.Loop(); i++ {
				// Every 8th page is the latest; the others are before_seq
				// pages at depths walking through the whole channel.
				q := parley.HistoryQuery{Limit: 50}
				if i%8 != 0 {
					q.BeforeSeq = seqs[50+(i*7919)%(len(seqs)-50)]
				}
				page, err := team.st.ListMessages(ctx, reader.ID, ch.ID, q)
				if err != nil {
					b.Fatalf("list messages: %v", err)
				}
				if len(page.Messages) != 50 {
					b.Fatalf("page of %d messages before %d, want 50", len(page.Messages), q.BeforeSeq)
				}
			}
		})
	}
}

// seedHistory posts historyMessages messages into ch, a tenth of them with
// a reaction and a hundredth pinned, and returns their seqs in order.
func seedHistory(b *testing.B, team *benchTeam, ch *parley.Channel) []int64 {
	b.Helper()
	ctx := context.Background()
	seqs := make([]int64, historyMessages)
	err := runWriters(historyMessages, func(i int) error {
		u := team.users[i%benchWriters]
		m, _, err := team.st.PostMessage(ctx, u.ID, ch.ID, parley.NewMessage{Text: fmt.Sprintf("history message %d", i)})
		if err != nil {
			return err
		}
		seqs[i] = m.Seq
		if i%10 == 0 {
			if _, err := team.st.AddReaction(ctx, team.users[(i+1)%benchWriters].ID, m.ID, "thumbsup"); err != nil {
				return err
			}
		}
		if i%100 == 0 {
			_, err = team.st.Pin(ctx, u.ID, m.ID)
		}
		return err
	})
	if err != nil {
		b.Fatalf("seed history: %v", err)
	}
	slices.Sort(seqs)
	return seqs
}

func analyze(b *testing.B, url string) {
	b.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		b.Fatalf("analyze: %v", err)
	}
	defer db.Close()
	if _, err := db.Exec("ANALYZE"); err != nil {
		b.Fatalf("analyze: %v", err)
	}
}
