package shardmove

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"parley"
)

// BenchmarkMoveUnderLoad moves a workspace with a history of
// PARLEY_BENCH_MOVE_POSTS posts (default 5,000) back and forth between
// two PostgreSQL shards while writers post about 50 messages a second to
// it through the directory, as routers will. Each iteration is one move.
// Reported: the read-only window (median over the iterations), the
// snapshot copy's rows per second, the catch-up rounds and the writes
// refused while read-only.
//
//	go test -run XXX -bench MoveUnderLoad -benchtime 6x ./shardmove
func BenchmarkMoveUnderLoad(b *testing.B) {
	posts := 5000
	if v, err := strconv.Atoi(os.Getenv("PARLEY_BENCH_MOVE_POSTS")); err == nil && v > 0 {
		posts = v
	}
	for _, drain := range []time.Duration{100 * time.Millisecond, 500 * time.Millisecond} {
		b.Run("drain="+drain.String(), func(b *testing.B) {
			r := newRig(b)
			src := r.stores["eu1"]
			tm := seedTeam(b, src, nil, 30)
			// The bulk of the history, posted in parallel.
			var wg sync.WaitGroup
			for i, ch := range tm.channels {
				for k := range 4 {
					wg.Go(func() {
						for n := k; n < posts/len(tm.channels); n += 4 {
							if _, _, err := src.PostMessage(context.Background(), tm.members[(i+n)%len(tm.members)].ID, ch.ID,
								parley.NewMessage{Text: fmt.Sprintf("history %d of %s: some words to index", n, ch.Name)}); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
			}
			wg.Wait()
			r.place(b, tm.ws.ID, "eu1")
			// 3 channels x 1 writer every 60 ms: 50 posts/s, a fifth with a reaction.
			w := startWriters(b, r, tm, 1, 60*time.Millisecond)
			var windows, rates, finals, verifies []float64
			var rounds, refusedBefore int64
			mv := r.mover(b, Config{Drain: drain, PurgeDelay: 200 * time.Millisecond})
			to := "eu2"
			b.ResetTimer()
			for range b.N {
				refusedBefore = w.refused.Load()
				sum, err := mv.Run(context.Background(), tm.ws.ID, to)
				if err != nil {
					b.Fatal(err)
				}
				if err := <-sum.Purged; err != nil {
					b.Fatal(err)
				}
				windows = append(windows, float64(sum.ReadOnly.Microseconds())/1000)
				rates = append(rates, float64(sum.RowsCopied)/sum.Copy.Seconds())
				finals = append(finals, float64(sum.Final.Microseconds())/1000)
				verifies = append(verifies, float64(sum.Verify.Microseconds())/1000)
				rounds += int64(sum.Rounds + sum.FinalRounds)
				b.Logf("move to %s: %d rows copied in %v, %d caught up in %d+%d rounds, read-only %v (drain %v, final %v, verify %v), %d writes refused",
					to, sum.RowsCopied, sum.Copy.Round(time.Millisecond), sum.RowsCaughtUp, sum.Rounds, sum.FinalRounds,
					sum.ReadOnly.Round(time.Millisecond), sum.Drain.Round(time.Millisecond), sum.Final.Round(time.Millisecond),
					sum.Verify.Round(time.Millisecond), w.refused.Load()-refusedBefore)
				to = map[string]string{"eu1": "eu2", "eu2": "eu1"}[to]
			}
			b.StopTimer()
			acks := w.finish(b)
			b.ReportMetric(median(windows), "read-only-ms")
			b.ReportMetric(median(rates), "copy-rows/s")
			b.ReportMetric(median(finals), "final-ms")
			b.ReportMetric(median(verifies), "verify-ms")
			b.ReportMetric(float64(rounds)/float64(b.N), "rounds/move")
			b.ReportMetric(float64(len(acks))/float64(b.N), "posts/move")
		})
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// BenchmarkFenceWriteCost measures what the source's fence (fence.go)
// costs the write path: posts (each writes a message, an event, the
// channel's counters and the poster's read marker: a trigger call in at
// least four fenced tables), from 8 writers through a real sqlstore.Store
// on one shard, alternately as the mover leaves the shard after a move
// (moved=after: a real move off the shard and its purge ran first, and
// the rows after it use the mover's own unregistration) and while a move
// has the shard as its source (moved=during: registered, triggers
// installed, that workspace fenced), in one run; first, before any move
// (moved=never).
//
//	go test -run XXX -bench FenceWriteCost -benchtime 3000x ./shardmove
func BenchmarkFenceWriteCost(b *testing.B) {
	r := newRig(b)
	ctx := context.Background()
	st, db := r.stores["eu1"], r.dbs["eu1"]
	tm := seedTeam(b, st, nil, 30)
	gone := seedTeam(b, st, nil, 30)
	r.place(b, gone.ws.ID, "eu1")
	moveAway := func() {
		b.Helper()
		sum, err := r.mover(b, Config{Drain: -1, PurgeDelay: time.Millisecond}).Run(ctx, gone.ws.ID, "eu2")
		if err != nil {
			b.Fatal(err)
		}
		if err := <-sum.Purged; err != nil {
			b.Fatal(err)
		}
		if trg := fenceTriggers(b, db); len(trg) > 0 {
			b.Fatalf("the fence's triggers after a move and its purge: %v", trg)
		}
	}
	const moving = "W-moving-away"
	during := func(on bool) {
		b.Helper()
		if on {
			if err := registerMove(ctx, db, moving, roleSource, nil); err != nil {
				b.Fatal(err)
			}
			if err := setFence(ctx, db, moving, true); err != nil {
				b.Fatal(err)
			}
		} else if err := unregisterMove(ctx, db, moving, roleSource, true, nil); err != nil {
			b.Fatal(err)
		}
		if trg := fenceTriggers(b, db); (len(trg) > 0) != on {
			b.Fatalf("during a move %v: triggers %v", on, trg)
		}
	}
	var n atomic.Int64
	// Before any move (never), then after, during, during, after (and
	// again): the store's tables grow as the run posts, which slows the
	// later rows; the ABBA order cancels that drift between after and
	// during (never, first, is favoured by it).
	for round, state := range []string{"never", "after", "during", "during", "after", "after", "during", "during", "after"} {
		name := "moved=" + state + "/round=" + fmt.Sprint(round+1)
		if round == 1 {
			moveAway()
		}
		on := state == "during"
		b.Run(name, func(b *testing.B) {
			during(on)
			b.SetParallelism(4) // 8 writers on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(n.Add(1))
				u := tm.members[i%len(tm.members)]
				ch := tm.channels[i%len(tm.channels)]
				for k := 0; pb.Next(); k++ {
					if _, _, err := st.PostMessage(ctx, u.ID, ch.ID, parley.NewMessage{Text: fmt.Sprintf("bench %d", k)}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "posts/s")
		})
	}
}
