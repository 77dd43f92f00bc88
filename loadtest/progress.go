package loadtest

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// Progress is a process's running totals, sent to the parent every second.
type Progress struct {
	Conns      int64    `json:"conns"`
	Dials      int64    `json:"dials"`
	Deliveries int64    `json:"deliveries"`
	Posts      int64    `json:"posts"`
	Errors     int64    `json:"errors"`
	Latency    HistData `json:"latency"`
}

func (r *runner) progress() Progress {
	lat := r.deliveryHist.Sparse()
	if len(lat) == 0 {
		lat = r.joinHist.Sparse() // join-spike measures joins
	}
	return Progress{Conns: r.rec.Conns.Load(), Dials: r.rec.Dials.Load(), Deliveries: r.rec.Deliveries.Load(),
		Posts: r.rec.Posts.Load(), Errors: r.rec.Errors.Load(), Latency: lat}
}

// isTerminal reports whether w is a character device (a TTY).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// startProgress prints a progress line every second until stop: one line
// rewritten in place on a terminal, a plain line a second otherwise.
func startProgress(cfg *Config, start time.Time, fetch func() []Progress) (stop func()) {
	tty := isTerminal(cfg.Progress)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var prev Progress
		prevT := time.Now()
		for {
			select {
			case <-done:
				if tty {
					fmt.Fprintln(cfg.Progress)
				}
				return
			case now := <-t.C:
				var sum Progress
				sum.Latency = HistData{}
				for _, p := range fetch() {
					sum.Conns += p.Conns
					sum.Dials += p.Dials
					sum.Deliveries += p.Deliveries
					sum.Posts += p.Posts
					sum.Errors += p.Errors
					sum.Latency.Merge(p.Latency)
				}
				dt := now.Sub(prevT).Seconds()
				line := fmt.Sprintf("%s t=%4.0fs conns=%d/%d deliveries/s=%.0f posts/s=%.0f errors=%d p99=%.1fms",
					cfg.Scenario, now.Sub(start).Seconds(), sum.Conns, cfg.Users,
					float64(sum.Deliveries-prev.Deliveries)/dt, float64(sum.Posts-prev.Posts)/dt, sum.Errors,
					sum.Latency.Quantile(0.99))
				if tty {
					fmt.Fprintf(cfg.Progress, "\r\033[K%s", line)
				} else {
					fmt.Fprintln(cfg.Progress, line)
				}
				prev, prevT = sum, now
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
