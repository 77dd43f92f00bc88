package loadtest

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The soak sampler (`parley soak`): while load runs against a server, it
// reads the server's admin listener every Every — goroutines, heap in use,
// RSS and open files from /metrics, and, when the server's PostgreSQL
// database is named, its connections (open, and busy in a query) from
// pg_stat_activity (the store exposes no pool metrics; the database's own
// view counts what the pool holds) — writes the series as CSV and JSON,
// takes heap and goroutine profiles at the start and the end from
// /debug/pprof/, and judges whether each series stayed flat.

// SoakConfig is one sampling run.
type SoakConfig struct {
	Admin    string        // the server's admin base URL, http://127.0.0.1:9091
	DB       string        // optional: URL of the server's PostgreSQL database (pg_stat_activity)
	Every    time.Duration // between samples (default 30 s)
	Duration time.Duration // how long to sample (default 1 h)
	Out      string        // directory for soak.csv, soak.json and the profiles
	Progress io.Writer     // one line per sample (nil: none)
}

// SoakSample is one reading. DB fields are -1 without a database.
type SoakSample struct {
	At         float64 `json:"at_s"` // seconds since the first sample
	Goroutines float64 `json:"goroutines"`
	HeapInuse  float64 `json:"heap_inuse_bytes"`
	RSS        float64 `json:"rss_bytes"`
	FDs        float64 `json:"open_fds"`
	Sessions   float64 `json:"gateway_sessions"`
	DBOpen     float64 `json:"db_conns_open"`
	DBActive   float64 `json:"db_conns_active"`
}

// SoakMetric is the verdict on one series.
type SoakMetric struct {
	Name      string  `json:"name"`
	Early     float64 `json:"early_median"` // median over the early window
	Late      float64 `json:"late_median"`  // median over the last window
	Limit     float64 `json:"limit"`        // the late median may not exceed this
	Flat      bool    `json:"flat"`
	Threshold string  `json:"threshold"` // how Limit follows from Early
}

// SoakVerdict compares the last window with an early one.
type SoakVerdict struct {
	EarlyFrom float64      `json:"early_from_s"`
	EarlyTo   float64      `json:"early_to_s"`
	LateFrom  float64      `json:"late_from_s"`
	LateTo    float64      `json:"late_to_s"`
	Metrics   []SoakMetric `json:"metrics"`
	Flat      bool         `json:"flat"`
}

// SoakResult is what soak.json holds.
type SoakResult struct {
	Admin    string       `json:"admin"`
	Every    float64      `json:"every_s"`
	Started  time.Time    `json:"started"`
	Samples  []SoakSample `json:"samples"`
	Verdict  SoakVerdict  `json:"verdict"`
	Profiles []string     `json:"profiles"`
}

// soakLimits are the thresholds of flatness: the late median may exceed
// the early one by a factor and a constant (the constant keeps tiny
// values — a dozen goroutines, a few connections — from failing on noise).
var soakLimits = []struct {
	name   string
	get    func(SoakSample) float64
	factor float64
	slack  float64
	text   string
}{
	{"goroutines", func(s SoakSample) float64 { return s.Goroutines }, 1.10, 50, "early × 1.10 + 50"},
	{"heap_inuse_bytes", func(s SoakSample) float64 { return s.HeapInuse }, 1.25, 8 << 20, "early × 1.25 + 8 MiB"},
	{"rss_bytes", func(s SoakSample) float64 { return s.RSS }, 1.25, 16 << 20, "early × 1.25 + 16 MiB"},
	{"open_fds", func(s SoakSample) float64 { return s.FDs }, 1.10, 20, "early × 1.10 + 20"},
	{"db_conns_open", func(s SoakSample) float64 { return s.DBOpen }, 1.0, 4, "early + 4"},
}

// JudgeSoak gives the verdict on samples over a run of length total: the
// median of the last 10/60 of the run (the last 10 minutes of an hour)
// against the median of 5/60 to 15/60 (minutes 5–15: after the warm-up),
// each within soakLimits. Series that are all -1 (no database) are left
// out. It needs samples in both windows.
func JudgeSoak(samples []SoakSample, total time.Duration) (SoakVerdict, error) {
	t := total.Seconds()
	v := SoakVerdict{EarlyFrom: t * 5 / 60, EarlyTo: t * 15 / 60, LateFrom: t * 50 / 60, LateTo: t, Flat: true}
	for _, l := range soakLimits {
		var early, late []float64
		for _, s := range samples {
			x := l.get(s)
			if x < 0 {
				continue
			}
			if s.At >= v.EarlyFrom && s.At <= v.EarlyTo {
				early = append(early, x)
			}
			if s.At >= v.LateFrom {
				late = append(late, x)
			}
		}
		if len(early) == 0 && len(late) == 0 {
			continue
		}
		if len(early) == 0 || len(late) == 0 {
			return v, fmt.Errorf("soak verdict: %s has %d samples in the early window and %d in the late one", l.name, len(early), len(late))
		}
		m := SoakMetric{Name: l.name, Early: median(early), Late: median(late), Threshold: l.text}
		m.Limit = m.Early*l.factor + l.slack
		m.Flat = m.Late <= m.Limit
		v.Flat = v.Flat && m.Flat
		v.Metrics = append(v.Metrics, m)
	}
	if len(v.Metrics) == 0 {
		return v, errors.New("soak verdict: no samples")
	}
	return v, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// RunSoak samples until cfg.Duration has passed (or ctx ends: then what
// was sampled is judged against the time it took), writes the files and
// returns the result.
func RunSoak(ctx context.Context, cfg SoakConfig) (*SoakResult, error) {
	if cfg.Every <= 0 {
		cfg.Every = 30 * time.Second
	}
	if cfg.Duration <= 0 {
		cfg.Duration = time.Hour
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if _, err := url.Parse(cfg.Admin); err != nil || !strings.HasPrefix(cfg.Admin, "http") {
		return nil, fmt.Errorf("--admin %q: want http://host:port", cfg.Admin)
	}
	cfg.Admin = strings.TrimSuffix(cfg.Admin, "/")
	if cfg.Out == "" {
		return nil, errors.New("--out is required")
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, err
	}
	var db *sql.DB
	var dbName string
	if cfg.DB != "" {
		u, err := url.Parse(cfg.DB)
		if err != nil || strings.Trim(u.Path, "/") == "" {
			return nil, fmt.Errorf("--db %q: want the URL of the server's database", cfg.DB)
		}
		dbName = strings.Trim(u.Path, "/")
		if db, err = sql.Open("pgx", cfg.DB); err != nil {
			return nil, fmt.Errorf("open %s: %w", cfg.DB, err)
		}
		db.SetMaxOpenConns(1)
		defer db.Close()
	}
	hc := &http.Client{Timeout: 20 * time.Second}
	res := &SoakResult{Admin: cfg.Admin, Every: cfg.Every.Seconds(), Started: time.Now().UTC()}
	for _, p := range []string{"heap", "goroutine"} {
		name, err := saveProfile(ctx, hc, cfg.Admin, p, "start", cfg.Out)
		if err != nil {
			return nil, err
		}
		res.Profiles = append(res.Profiles, name)
	}
	start := time.Now()
	tick := time.NewTicker(cfg.Every)
	defer tick.Stop()
	for {
		s, err := soakSample(ctx, hc, cfg.Admin, db, dbName)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return nil, err
		}
		s.At = time.Since(start).Seconds()
		res.Samples = append(res.Samples, s)
		fmt.Fprintf(cfg.Progress, "soak %6.0fs goroutines=%.0f heap_inuse=%.1fMiB rss=%.1fMiB fds=%.0f sessions=%.0f db_open=%.0f db_active=%.0f\n",
			s.At, s.Goroutines, s.HeapInuse/(1<<20), s.RSS/(1<<20), s.FDs, s.Sessions, s.DBOpen, s.DBActive)
		if time.Since(start)+cfg.Every/2 > cfg.Duration {
			break
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		if ctx.Err() != nil {
			break
		}
	}
	total := min(cfg.Duration, time.Since(start))
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, p := range []string{"heap", "goroutine"} {
		name, err := saveProfile(pctx, hc, cfg.Admin, p, "end", cfg.Out)
		if err != nil {
			return nil, err
		}
		res.Profiles = append(res.Profiles, name)
	}
	v, err := JudgeSoak(res.Samples, total)
	res.Verdict = v
	if werr := res.write(cfg.Out); werr != nil {
		return res, werr
	}
	return res, err
}

// soakSample reads one sample.
func soakSample(ctx context.Context, hc *http.Client, admin string, db *sql.DB, dbName string) (SoakSample, error) {
	m, err := scrapeMetrics(ctx, hc, admin)
	if err != nil {
		return SoakSample{}, err
	}
	s := SoakSample{DBOpen: -1, DBActive: -1}
	for _, f := range []struct {
		name string
		dst  *float64
	}{
		{"go_goroutines", &s.Goroutines},
		{"go_memstats_heap_inuse_bytes", &s.HeapInuse},
		{"process_resident_memory_bytes", &s.RSS},
		{"process_open_fds", &s.FDs},
		{"parley_gateway_sessions", &s.Sessions},
	} {
		v, ok := m[f.name]
		if !ok {
			return s, fmt.Errorf("%s/metrics has no %s", admin, f.name)
		}
		*f.dst = v
	}
	if db != nil {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err := db.QueryRowContext(qctx, `SELECT count(*), count(*) FILTER (WHERE state = 'active')
			FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, dbName).Scan(&s.DBOpen, &s.DBActive)
		if err != nil {
			return s, fmt.Errorf("pg_stat_activity: %w", err)
		}
	}
	return s, nil
}

// scrapeMetrics reads the unlabelled series of a Prometheus text
// exposition, and sums labelled ones under their bare name.
func scrapeMetrics(ctx context.Context, hc *http.Client, admin string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/metrics: %s", admin, resp.Status)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics parses Prometheus text: name{labels} value. Every series of
// a name is also summed under the name with its labels, exactly as written
// (name{a="b"}), so callers can read either.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil || math.IsNaN(v) {
			continue
		}
		series := line[:i]
		out[series] = v
		if j := strings.IndexByte(series, '{'); j >= 0 {
			out[series[:j]] += v
		}
	}
	return out, sc.Err()
}

// saveProfile writes the server's named pprof profile to dir.
func saveProfile(ctx context.Context, hc *http.Client, admin, profile, when, dir string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/debug/pprof/"+profile, nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s profile: %w", profile, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s/debug/pprof/%s: %s", admin, profile, resp.Status)
	}
	name := when + "-" + profile + ".pb.gz"
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return "", fmt.Errorf("%s profile: %w", profile, err)
	}
	return name, f.Close()
}

// write saves soak.json and soak.csv.
func (r *SoakResult) write(dir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "soak.json"), b, 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "soak.csv"))
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"at_s", "goroutines", "heap_inuse_bytes", "rss_bytes", "open_fds", "gateway_sessions", "db_conns_open", "db_conns_active"})
	g := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	for _, s := range r.Samples {
		_ = w.Write([]string{g(s.At), g(s.Goroutines), g(s.HeapInuse), g(s.RSS), g(s.FDs), g(s.Sessions), g(s.DBOpen), g(s.DBActive)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Print writes the verdict as a table.
func (r *SoakResult) Print(w io.Writer) {
	v := r.Verdict
	fmt.Fprintf(w, "soak: %d samples every %.0f s; early window %.0f–%.0f s, late window %.0f–%.0f s\n",
		len(r.Samples), r.Every, v.EarlyFrom, v.EarlyTo, v.LateFrom, v.LateTo)
	fmt.Fprintf(w, "%-18s %14s %14s %14s  %-22s %s\n", "series", "early median", "late median", "limit", "threshold", "")
	for _, m := range v.Metrics {
		verdict := "flat"
		if !m.Flat {
			verdict = "RISING"
		}
		fmt.Fprintf(w, "%-18s %14.0f %14.0f %14.0f  %-22s %s\n", m.Name, m.Early, m.Late, m.Limit, m.Threshold, verdict)
	}
	fmt.Fprintf(w, "verdict: %s\n", map[bool]string{true: "FLAT", false: "NOT FLAT"}[v.Flat])
}
