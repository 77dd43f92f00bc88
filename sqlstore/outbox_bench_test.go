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

// BenchmarkPostOutbox measures what the outbox costs the post path: the
// same posts with the outbox (one upsert per channel per committed
// transaction, acknowledgements every 100 ms, the relay's passes) and
// without it (RelayConfig.NoOutbox, the store before the outbox), the two
// run alternately in one process. docs/benchmarks.md ("The outbox") has the
// command and the figures.
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
	for _, d := range dialects {
		for _, mode := range []string{"none", "outbox"} {
			b.Run(d.name+"/"+mode, func(b *testing.B) {
				open := func(tb testing.TB, pub parley.EventPublisher) parley.Store {
					cfg := d.cfg(tb)
					cfg.Publisher = pub
					cfg.Relay.NoOutbox = mode == "none"
					return mustOpen(tb, cfg)
				}
				team := newBenchTeam(b, open, &commitCounter{}, 100)
				var posted atomic.Int64
				for _, nch := range []int{1, 100} {
					b.Run(fmt.Sprintf("%dch", nch), func(b *testing.B) {
						ctx := context.Background()
						b.ResetTimer()
						start := time.Now()
						err := runWriters(b.N, func(i int) error {
							_, _, err := team.st.PostMessage(ctx, team.users[i%benchWriters].ID, team.chans[i%nch].ID, parley.NewMessage{
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
					})
				}
			})
		}
	}
}
