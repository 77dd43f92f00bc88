package shardmove

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
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
