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
	// A ramp's: capacities, and deliveries per CPU-second at the highest
	// rate both passed (equal offered load).
	Capacity        float64 `json:"capacity,omitempty"`
	EqualRate       float64 `json:"equal_rate,omitempty"`
	EqualPerCPU     float64 `json:"deliveries_per_cpu_second_at_equal_rate,omitempty"`
	EqualComparable bool    `json:"comparable"` // every round behind the ratio reached 95 % of its rate
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
		q := Ratio{
			Subscribers:      n,
			DeliveriesPerCPU: ratio(pr.p.DeliveriesPerCPU, pr.c.DeliveriesPerCPU),
			P50:              ratio(pr.p.P50ms, pr.c.P50ms),
			P99:              ratio(pr.p.P99ms, pr.c.P99ms),
			RSSPerConn:       ratio(pr.p.RSSPerConn, pr.c.RSSPerConn),
			Capacity:         ratio(pr.p.Capacity, pr.c.Capacity),
			EqualComparable:  pr.p.Comparable && pr.c.Comparable,
		}
		if rp, rc, ok := equalRound(pr.p, pr.c); ok {
			q.EqualRate, q.EqualPerCPU = rp.Rate, ratio(rp.DeliveriesPerCPU, rc.DeliveriesPerCPU)
			q.EqualComparable = rp.Comparable && rc.Comparable
		}
		out = append(out, q)
	}
	return out
}

// equalRound finds the rounds of a ramp at the highest rate both servers
// passed.
func equalRound(a, b *Result) (ra, rb Round, ok bool) {
	for _, x := range a.PerRound {
		for _, y := range b.PerRound {
			if x.Pass && y.Pass && x.Rate == y.Rate && x.Rate >= ra.Rate {
				ra, rb, ok = x, y, true
			}
		}
	}
	return ra, rb, ok && a.Capacity > 0 && b.Capacity > 0
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// comparable marks a figure whose offered load fell short of the asked.
func comparable(ok bool) string {
	if ok {
		return ""
	}
	return " (not comparable)"
}

// Print writes the results and the ratios as Markdown tables.
func Print(w io.Writer, cfg Config, results []Result) {
	if len(cfg.Ramp) > 0 {
		printCapacity(w, cfg, results)
	} else {
		fmt.Fprintf(w, "fan-out to one channel, open-loop: %.4g messages/s asked, of %d bytes, published over each server's HTTP API (at most %d in flight), %d round(s) of %s; medians over the rounds; latency from each message's scheduled time\n\n",
			cfg.Rate, cfg.TextBytes, cfg.MaxInFlight, max(cfg.Rounds, 1), cfg.Duration)
		fmt.Fprintln(w, "| subscribers | server | asked → achieved msg/s | late | delivered | lost / dup / drops | server cores publish / drain | generator cores publish / drain | deliveries / CPU-s | p50 | p99 | max | RSS / connection | connect | load avg |")
		fmt.Fprintln(w, "|---:|---|---|---:|---:|---|---|---|---:|---:|---:|---:|---:|---:|---|")
		for _, r := range results {
			fmt.Fprintf(w, "| %d | %s | %.4g → %.4g%s | %d | %d / %d | %d / %d / %d | %.2f / %.2f | %.2f / %.2f | %.0f | %.1f ms | %.1f ms | %.1f ms | %.1f KB | %.1f s | %.2f → %.2f |\n",
				r.Subscribers, r.Server, cfg.Rate, r.Achieved, comparable(r.Comparable), r.Late, r.Delivered, r.Expected,
				r.Lost, r.Duplicates, r.Drops, r.ServerCores, r.ServerDrainCores, r.GenCores, r.GenDrainCores,
				r.DeliveriesPerCPU, r.P50ms, r.P99ms, r.Maxms, r.RSSPerConn/1024, r.ConnectSeconds, r.LoadAvg[0], r.LoadAvg[1])
		}
	}
	ratios := Ratios(results)
	if len(ratios) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| subscribers | Parley / Centrifugo: deliveries per CPU-s | p50 | p99 | RSS per connection | capacity | deliveries per CPU-s at equal offered load |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|")
	for _, q := range ratios {
		eq := "—"
		if q.EqualRate > 0 {
			eq = fmt.Sprintf("%s at %.4g msg/s", x(q.EqualPerCPU), q.EqualRate)
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s%s |\n", q.Subscribers, x(q.DeliveriesPerCPU), x(q.P50), x(q.P99),
			x(q.RSSPerConn), x(q.Capacity), eq, comparable(q.EqualComparable))
	}
}

// printCapacity writes a ramp's headline and every round.
func printCapacity(w io.Writer, cfg Config, results []Result) {
	limit := cfg.P99Limit.Milliseconds()
	if limit <= 0 {
		limit = 500
	}
	fmt.Fprintf(w, "capacity: the highest rate of the ramp each server sustains (p99 ≤ %d ms from the scheduled time, nothing lost, ≥ 95 %% of the rate achieved); rounds of %s, %d-byte messages, at most %d publishes in flight\n\n",
		limit, cfg.Duration, cfg.TextBytes, cfg.MaxInFlight)
	fmt.Fprintln(w, "| subscribers | server | capacity msg/s | deliveries/s | deliveries / CPU-s | p50 | p99 | server cores | generator cores |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		var at Round
		for _, rr := range r.PerRound {
			if rr.Pass && rr.Rate == r.Capacity {
				at = rr
			}
		}
		fmt.Fprintf(w, "| %d | %s | %.4g | %.0f | %.0f | %.1f ms | %.1f ms | %.2f | %.2f |\n", r.Subscribers, r.Server, r.Capacity,
			at.Rate*float64(r.Subscribers), at.DeliveriesPerCPU, at.P50ms, at.P99ms, at.ServerCores, at.GenCores)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| subscribers | server | asked → achieved msg/s | late (at cap) | lost / dup | errors | server cores publish / drain | generator cores publish / drain | deliveries / CPU-s | p50 | p99 | max | pass |")
	fmt.Fprintln(w, "|---:|---|---|---:|---|---:|---|---|---:|---:|---:|---:|---|")
	for _, r := range results {
		for _, rr := range r.PerRound {
			pass := "yes"
			if !rr.Pass {
				pass = "**no**"
			}
			fmt.Fprintf(w, "| %d | %s | %.4g → %.4g%s | %d (%d) | %d / %d | %d | %.2f / %.2f | %.2f / %.2f | %.0f | %.1f ms | %.1f ms | %.1f ms | %s |\n",
				r.Subscribers, r.Server, rr.Rate, rr.Achieved, comparable(rr.Comparable), rr.Late, rr.AtCap, rr.Lost, rr.Duplicates, rr.Errors,
				rr.ServerCores, rr.ServerDrainCores, rr.GenCores, rr.GenDrainCores, rr.DeliveriesPerCPU, rr.P50ms, rr.P99ms, rr.Maxms, pass)
		}
	}
}

// x formats a ratio ("—" when it could not be computed).
func x(v float64) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", v)
}
