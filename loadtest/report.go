package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"parley/client"
)

// Result is a whole run, as written to result.json.
type Result struct {
	Scenario string    `json:"scenario"`
	URL      string    `json:"url"`
	Started  time.Time `json:"started"`
	Sizes    Sizes     `json:"sizes"`

	SetupSeconds float64 `json:"setup_seconds"`
	RunSeconds   float64 `json:"run_seconds"`

	Users     int   `json:"users"`
	Connected int   `json:"connected"`
	PeakConns int64 `json:"peak_conns"`
	Checked   int   `json:"checked_streams"`

	// The figures that must be zero.
	Lost       int64 `json:"lost"`
	Duplicated int64 `json:"duplicated"`
	OutOfOrder int64 `json:"out_of_order"`
	Pass       bool  `json:"pass"`

	Deliveries          int64   `json:"deliveries"`
	CaughtUp            int64   `json:"deliveries_by_catch_up"`
	Ephemeral           int64   `json:"ephemeral_events"`
	Posts               int64   `json:"actions_sent"`
	DeliveriesPerSecond float64 `json:"deliveries_per_second"` // mean over the seconds with deliveries
	PeakDeliveries      int64   `json:"peak_deliveries_per_second"`

	Latency map[string]Summary `json:"latency"` // delivery, connect, boot, reconnect, join_delivery, join_api, post
	Errors  map[string]int64   `json:"errors"`
	Extra   map[string]float64 `json:"extra,omitempty"`
	Client  client.Stats       `json:"client_stats"`
	// Offered is each open-loop schedule's asked and achieved rate.
	Offered []Offered `json:"offered"`

	Timeline []Point `json:"timeline"`

	// Audience is the audience scenario's frames per action, targets and
	// stale entries.
	Audience *AudienceResult `json:"audience,omitempty"`
}

// Offered is the load one schedule (post, join, connect, action) offered:
// a schedule below 95 % of its asked rate is not comparable with a run
// that reached it, whatever its latencies say.
type Offered struct {
	Name       string  `json:"name"`
	Asked      float64 `json:"asked_rate"`
	Achieved   float64 `json:"achieved_rate"`
	Late       int64   `json:"late_starts"`
	AtCap      int64   `json:"at_cap"` // due while --max-in-flight actions were running
	Comparable bool    `json:"comparable"`
}

// offered reads the schedules' extras (runner.schedule) out of extra.
func offered(extra map[string]float64) []Offered {
	var out []Offered
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		name, ok := strings.CutSuffix(k, "_asked_rate")
		if !ok {
			continue
		}
		o := Offered{Name: name, Asked: extra[k], Achieved: extra[name+"_achieved_rate"], Late: int64(extra[name+"_late_starts"]), AtCap: int64(extra[name+"_at_cap"])}
		o.Comparable = o.Asked > 0 && o.Achieved >= 0.95*o.Asked
		out = append(out, o)
	}
	return out
}

// isOffered says whether an extra is one of a schedule's.
func isOffered(k string) bool {
	return strings.HasSuffix(k, "_asked_rate") || strings.HasSuffix(k, "_achieved_rate") || strings.HasSuffix(k, "_late_starts") || strings.HasSuffix(k, "_at_cap")
}

// Sizes are the run's settings.
type Sizes struct {
	Users       int     `json:"users"`
	Channels    int     `json:"channels"`
	ConnectRate float64 `json:"connect_rate"`
	Rate        float64 `json:"rate"`
	MaxInFlight int     `json:"max_in_flight"`
	Posters     int     `json:"posters"`
	Watchers    int     `json:"watchers,omitempty"`
	Viewers     int     `json:"viewers,omitempty"`
	OtherRate   float64 `json:"other_rate,omitempty"`
	Baseline    bool    `json:"baseline,omitempty"`
	DurationS   float64 `json:"duration_s"`
	TextBytes   int     `json:"text_bytes"`
	Procs       int     `json:"procs"`
	SourceIPs   int     `json:"source_ips"`
	Seeded      bool    `json:"seeded"`
}

// Point is one second of the timeline.
type Point struct {
	T          int   `json:"t"`
	Deliveries int64 `json:"deliveries"`
	Posts      int64 `json:"posts"`
	Conns      int64 `json:"conns"`
	Errors     int64 `json:"errors"`
	// Latency of the second's live deliveries; Measured is how many there
	// were (the percentiles are 0 without any).
	Measured uint64  `json:"measured"`
	P50      float64 `json:"p50_ms"`
	P90      float64 `json:"p90_ms"`
	P99      float64 `json:"p99_ms"`
	Max      float64 `json:"max_ms"`
}

func buildResult(cfg *Config, plan *Plan, parts []*Part, setup time.Duration) *Result {
	var d Data
	res := &Result{Scenario: cfg.Scenario, URL: cfg.URL, Started: plan.Start, SetupSeconds: setup.Seconds(),
		RunSeconds: time.Since(plan.Start).Seconds(),
		Sizes: Sizes{Users: cfg.Users, Channels: len(plan.Channels), ConnectRate: cfg.ConnectRate, Rate: cfg.Rate, MaxInFlight: cfg.MaxInFlight,
			Posters: cfg.Posters, DurationS: cfg.Duration.Seconds(), TextBytes: cfg.TextBytes, Procs: cfg.Procs,
			SourceIPs: len(cfg.SourceIPs), Seeded: cfg.Seed != ""},
		Latency: map[string]Summary{}}
	if cfg.Scenario == ScenarioJoinSpike {
		res.Sizes.Watchers = cfg.Watchers
	}
	if cfg.Scenario == ScenarioHotChannel {
		res.Sizes.Viewers, res.Sizes.OtherRate, res.Sizes.Baseline = min(cfg.Viewers, cfg.Users), cfg.OtherRate, cfg.Baseline
	}
	for _, p := range parts {
		d.Merge(p.Data)
		res.Users += p.Users
		res.Connected += p.Connected
		res.Checked += p.Checked
		res.Lost += p.Lost
		res.Duplicated += p.Duplicated
		res.OutOfOrder += p.OutOfOrder
		res.Ephemeral += p.Ephemeral
		res.CaughtUp += p.CaughtUp
		addStats(&res.Client, p.ConnStats)
		if p.Audience != nil {
			res.Audience = p.Audience // one process only
		}
	}
	res.Pass = res.Lost == 0 && res.Duplicated == 0 && res.OutOfOrder == 0 && res.Connected == res.Users
	if cfg.Scenario == ScenarioAudience {
		res.Pass = res.Pass && res.Audience != nil && res.Audience.StaleEntries == 0
	}
	for k, h := range d.Hists {
		if h.Count() > 0 {
			res.Latency[k] = h.Summarize()
		}
	}
	res.Errors, res.Extra = d.Errors, d.Extra
	if n := d.Extra["joins_accepted"]; n > 0 {
		// join-spike: per join, over every process's sessions and joins.
		res.Extra["frames_per_join"] = d.Extra["spike_frames"] / n
		res.Extra["all_frames_per_join"] = d.Extra["spike_all_frames"] / n
		if s := d.Extra["joins_done_s"]; s > 0 {
			res.Extra["joins_accepted_rate"] = n / s
		}
	}
	if cfg.Scenario == ScenarioHotChannel {
		hotFigures(res.Extra, cfg.Duration)
	}
	res.Offered = offered(d.Extra)
	var busy int
	for _, s := range d.Seconds {
		pt := Point{T: s.T, Deliveries: s.Deliveries, Posts: s.Posts, Conns: s.Conns}
		for _, n := range s.Errors {
			pt.Errors += n
		}
		if len(s.Latency) > 0 {
			pt.Measured = s.Latency.Count()
			pt.P50, pt.P90, pt.P99, pt.Max = s.Latency.Quantile(0.5), s.Latency.Quantile(0.9), s.Latency.Quantile(0.99), s.Latency.Quantile(1)
		}
		res.Timeline = append(res.Timeline, pt)
		res.Deliveries += s.Deliveries
		res.Posts += s.Posts
		res.PeakConns = max(res.PeakConns, s.Conns)
		res.PeakDeliveries = max(res.PeakDeliveries, s.Deliveries)
		if s.Deliveries > 0 {
			busy++
		}
	}
	if busy > 0 {
		res.DeliveriesPerSecond = float64(res.Deliveries) / float64(busy)
	}
	return res
}

// Print writes the summary table.
func (r *Result) Print(w io.Writer) {
	verdict := "PASS"
	if !r.Pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "\nparley loadtest %s against %s — %s\n", r.Scenario, r.URL, verdict)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, f string, a ...any) { fmt.Fprintf(tw, "  %s\t"+f+"\n", append([]any{k}, a...)...) }
	row("users connected", "%d of %d (peak %d live sessions, %d procs, %s)", r.Connected, r.Users, r.PeakConns, r.Sizes.Procs, sourceText(r.Sizes.SourceIPs))
	row("setup / run", "%.1f s / %.1f s", r.SetupSeconds, r.RunSeconds)
	row("actions sent", "%d", r.Posts)
	row("deliveries", "%d (%.0f/s mean, %d/s peak; %d by catch-up)", r.Deliveries, r.DeliveriesPerSecond, r.PeakDeliveries, r.CaughtUp)
	if r.Ephemeral > 0 {
		row("ephemeral events", "%d (typing, presence)", r.Ephemeral)
	}
	row("lost / duplicated / out of order", "%d / %d / %d over %d checked streams", r.Lost, r.Duplicated, r.OutOfOrder, r.Checked)
	row("resumes / fresh identifies / gap fills", "%d / %d / %d", r.Client.Resumes, r.Client.InvalidSessions, r.Client.GapsFilled)
	for _, k := range []string{"delivery", "other_delivery", "passive_delivery", "connect", "boot", "reconnect", "join_delivery", "join_api", "post"} {
		s, ok := r.Latency[k]
		if !ok || s.Count == 0 {
			continue
		}
		row(k+" latency", "p50 %.1f ms  p90 %.1f ms  p99 %.1f ms  max %.1f ms  (n=%d)", s.P50, s.P90, s.P99, s.Max, s.Count)
	}
	for _, o := range r.Offered {
		mark := ""
		if !o.Comparable {
			mark = "  NOT COMPARABLE: below 95 % of the asked rate"
		}
		row(o.Name+" rate (open-loop)", "%.1f/s asked, %.1f/s achieved, %d late starts (%d at the in-flight cap)%s", o.Asked, o.Achieved, o.Late, o.AtCap, mark)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Extra)) {
		if !isOffered(k) {
			row(k, "%.2f", r.Extra[k])
		}
	}
	var errs []string
	for _, k := range slices.Sorted(maps.Keys(r.Errors)) {
		errs = append(errs, fmt.Sprintf("%s=%d", k, r.Errors[k]))
	}
	if len(errs) == 0 {
		errs = []string{"none"}
	}
	row("errors", "%s", strings.Join(errs, ", "))
	tw.Flush()
	if r.Audience != nil {
		r.Audience.Print(w)
	}
}

// Write writes result.json and report.html into dir.
func (r *Result) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report dir: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "result.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "report.html"))
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := r.HTML(f); err != nil {
		f.Close()
		return fmt.Errorf("write report: %w", err)
	}
	return f.Close()
}
