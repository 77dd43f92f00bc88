package benchkit

import (
	"math/bits"
	"sync/atomic"
	"time"

	"parley/internal/cpustat"
)

// Hist is a latency histogram in microseconds with log-linear buckets (32
// per power of two: a quantile is within about 3 % of the true value).
// Recording is lock-free, so every poller goroutine records into one Hist
// without storing each sample: a capacity ramp sends too many messages to
// too many subscribers to keep one int64 per delivery.
type Hist struct {
	counts [histBuckets]atomic.Int64
}

const (
	histSub     = 32 // buckets per power of two
	histBuckets = histSub * 40
)

func histBucket(us uint64) int {
	if us < 2*histSub {
		return int(us)
	}
	e := bits.Len64(us) - 6 // keep the top 6 bits
	return min(histSub*e+int(us>>e), histBuckets-1)
}

// histLow is the smallest value of bucket i, in microseconds.
func histLow(i int) uint64 {
	if i < 2*histSub {
		return uint64(i)
	}
	e := i/histSub - 1
	return uint64(histSub+i%histSub) << e
}

// Record adds one latency (negative ones count as 0).
func (h *Hist) Record(d time.Duration) {
	h.counts[histBucket(uint64(max(d.Microseconds(), 0)))].Add(1)
}

// Count is the number of latencies recorded.
func (h *Hist) Count() int64 {
	var n int64
	for i := range h.counts {
		n += h.counts[i].Load()
	}
	return n
}

// Quantile is the p-th percentile (0–100) in milliseconds: the low edge of
// the bucket that holds it; 0 when empty.
func (h *Hist) Quantile(p float64) float64 {
	n := h.Count()
	if n == 0 {
		return 0
	}
	rank := int64(float64(n-1)*p/100) + 1
	var seen int64
	for i := range h.counts {
		if seen += h.counts[i].Load(); seen >= rank {
			return float64(histLow(i)) / 1e3
		}
	}
	return float64(histLow(histBuckets-1)) / 1e3
}

// SelfCPUTime is this process's user+system CPU time so far: the load
// generator's own cost, reported beside the server's.
func SelfCPUTime() time.Duration { return cpustat.Self() }
