package main

import (
	"fmt"
	"io"
)

// Ratio is Parley's figure over Centrifugo's at one size.
type Ratio struct {
	Subscribers      int     `json:"subscribers"`
	DeliveriesPerCPU float64 `json:"deliveries_per_cpu_second"` // > 1: Parley does more per CPU-second
	P50              float64 `json:"p50"`                       // < 1: Parley is faster
	P99              float64 `json:"p99"`
	RSSPerConn       float64 `json:"rss_per_connection"` // < 1: Parley uses less memory
}

// Ratios pairs each size's Parley and Centrifugo results (sizes where one
// of them is missing have no ratio). A ratio whose denominator is zero is
// reported as 0.
func Ratios(results []Result) []Ratio {
	type pair struct{ p, c *Result }
	bySize := map[int]*pair{}
	var sizes []int
	for i := range results {
		r := &results[i]
		pr := bySize[r.Subscribers]
		if pr == nil {
			pr = &pair{}
			bySize[r.Subscribers] = pr
			sizes = append(sizes, r.Subscribers)
		}
		switch r.Server {
		case "parley":
			pr.p = r
		case "centrifugo":
			pr.c = r
		}
	}
	var out []Ratio
	for _, n := range sizes {
		pr := bySize[n]
		if pr.p == nil || pr.c == nil {
			continue
		}
		out = append(out, Ratio{
			Subscribers:      n,
			DeliveriesPerCPU: ratio(pr.p.DeliveriesPerCPU, pr.c.DeliveriesPerCPU),
			P50:              ratio(pr.p.P50ms, pr.c.P50ms),
			P99:              ratio(pr.p.P99ms, pr.c.P99ms),
			RSSPerConn:       ratio(pr.p.RSSPerConn, pr.c.RSSPerConn),
		})
	}
	return out
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Print writes the results and the ratios as Markdown tables.
func Print(w io.Writer, cfg Config, results []Result) {
	fmt.Fprintf(w, "fan-out to one channel: %.4g messages/s of %d bytes, published over each server's HTTP API, %d round(s) of %s; medians over the rounds\n\n",
		cfg.Rate, cfg.TextBytes, max(cfg.Rounds, 1), cfg.Duration)
	fmt.Fprintln(w, "| subscribers | server | delivered | lost / dup / drops | server CPU-s | deliveries / CPU-s | p50 | p99 | max | RSS / connection | connect | load avg |")
	fmt.Fprintln(w, "|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range results {
		fmt.Fprintf(w, "| %d | %s | %d / %d | %d / %d / %d | %.2f | %.0f | %.1f ms | %.1f ms | %.1f ms | %.1f KB | %.1f s | %.2f → %.2f |\n",
			r.Subscribers, r.Server, r.Delivered, r.Expected, r.Lost, r.Duplicates, r.Drops, r.ServerCPUSeconds,
			r.DeliveriesPerCPU, r.P50ms, r.P99ms, r.Maxms, r.RSSPerConn/1024, r.ConnectSeconds, r.LoadAvg[0], r.LoadAvg[1])
	}
	ratios := Ratios(results)
	if len(ratios) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| subscribers | Parley / Centrifugo: deliveries per CPU-s | p50 | p99 | RSS per connection |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|")
	for _, q := range ratios {
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s |\n", q.Subscribers, x(q.DeliveriesPerCPU), x(q.P50), x(q.P99), x(q.RSSPerConn))
	}
}

// x formats a ratio ("—" when it could not be computed).
func x(v float64) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", v)
}
