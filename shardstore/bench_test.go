package shardstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"parley"
	"parley/storetest"
)

// benchWorkspaces and benchWriters shape BenchmarkPostShards: posts by
// benchWriters goroutines spread over one channel in each of
// benchWorkspaces workspaces, placed by the catalogue over the shards.
const (
	benchWorkspaces = 6
	benchWriters    = 24
)

// BenchmarkPostShards measures posts/s through the router with every
// workspace on one shard, and with the same workspaces spread over three
// shards (three databases of the one local PostgreSQL server: each shard
// has its own pools, write lanes and outbox relay).
func BenchmarkPostShards(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("%dshard", n), func(b *testing.B) {
			c := newClusterN(b, &storetest.Recorder{}, n)
			type target struct {
				user string
				ch   string
			}
			var targets []target
			shards := map[string]int{}
			for i := range benchWorkspaces {
				u := storetest.MustUser(b, c.r, fmt.Sprintf("owner%d", i))
				ws := storetest.MustWorkspace(b, c.r, u)
				ch := storetest.MustChannel(b, c.r, ws, u, "bench", parley.KindPublic)
				targets = append(targets, target{u.ID, ch.ID})
				shards[c.shardOf(b, ws.ID)]++
			}
			if len(shards) != n {
				b.Fatalf("workspaces on %d shards, want %d: %v", len(shards), n, shards)
			}
			ctx := context.Background()
			var next, seq atomic.Int64
			var mu sync.Mutex
			var failed error
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range benchWriters {
				wg.Go(func() {
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						t := targets[i%int64(len(targets))]
						_, _, err := c.r.PostMessage(ctx, t.user, t.ch, parley.NewMessage{
							Text:        "a benchmark message of an ordinary length, about sixty chars",
							ClientMsgID: fmt.Sprintf("bench-%d", seq.Add(1)),
						})
						if err != nil {
							mu.Lock()
							failed = err
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if failed != nil {
				b.Fatalf("post: %v", failed)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "posts/s")
		})
	}
}
