package sqlstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"parley"
	"parley/internal/testpg"
	"parley/sqlstore"
)

// BenchmarkPostOutbox measures what the outbox costs the post path: two
// stores, one with the outbox (an upsert per channel per committed
// transaction, acknowledgements every 100 ms, the relay's passes) and one
// without (RelayConfig.NoOutbox: the store before the outbox), take the
// same posts in alternating rounds of outboxRound, so that both see the same
// machine. It reports each one's posts per second and their ratio.
// docs/benchmarks.md ("The outbox") has the command and the figures.
func BenchmarkPostOutbox(b *testing.B) {
	dialects := []struct {
		name string
		cfg  func(testing.TB) sqlstore.Config
	}{
		{"sqlite", func(tb testing.TB) sqlstore.Config {
			return sqlstore.Config{Path: filepath.Join(tb.TempDir(), "parley.db")}
		}},
		{"postgres", func(tb testing.TB) sqlstore.Config { return sqlstore.Config{PostgresURL: testpg.New(tb)} }},
	}
	const outboxRound = 100
	for _, d := range dialects {
		b.Run(d.name, func(b *testing.B) {
			teams := map[bool]*benchTeam{}
			for _, on := range []bool{false, true} {
				open := func(tb testing.TB, pub parley.EventPublisher) parley.Store {
					cfg := d.cfg(tb)
					cfg.Publisher = pub
					cfg.Relay.NoOutbox = !on
					return mustOpen(tb, cfg)
				}
				teams[on] = newBenchTeam(b, open, &commitCounter{}, 100)
			}
			var posted atomic.Int64
			for _, nch := range []int{1, 100} {
				b.Run(fmt.Sprintf("%dch", nch), func(b *testing.B) {
					ctx := context.Background()
					elapsed := map[bool]time.Duration{}
					done := map[bool]int{}
					b.ResetTimer()
					for round := 0; done[true] < b.N; round++ {
						on := round%2 == 1
						team := teams[on]
						n := min(outboxRound, b.N-done[on])
						start := time.Now()
						err := runWriters(n, func(i int) error {
							_, _, err := team.st.PostMessage(ctx, team.users[i%benchWriters].ID, team.chans[i%nch].ID, parley.NewMessage{
								Text:        "a benchmark message of an ordinary length, about sixty chars",
								ClientMsgID: fmt.Sprintf("bench-%d", posted.Add(1)),
							})
							return err
						})
						elapsed[on] += time.Since(start)
						done[on] += n
						if err != nil {
							b.Fatalf("post: %v", err)
						}
					}
					b.StopTimer()
					without := float64(done[false]) / elapsed[false].Seconds()
					with := float64(done[true]) / elapsed[true].Seconds()
					b.ReportMetric(without, "msgs/s-without")
					b.ReportMetric(with, "msgs/s-outbox")
					b.ReportMetric(with/without, "ratio")
				})
			}
		})
	}
}
