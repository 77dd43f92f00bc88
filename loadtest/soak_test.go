package loadtest

import (
	"strings"
	"testing"
	"time"
)

// soakSeries makes samples every 30 s over an hour; f gives each field's
// value at minute m.
func soakSeries(f func(m float64) SoakSample) []SoakSample {
	var out []SoakSample
	for at := 0.0; at <= 3600; at += 30 {
		s := f(at / 60)
		s.At = at
		out = append(out, s)
	}
	return out
}

func TestJudgeSoak(t *testing.T) {
	flat := func(m float64) SoakSample {
		// Noise around a level: ±5 %.
		n := 1 + 0.05*float64(int(m*7)%3-1)
		return SoakSample{Goroutines: 400 * n, HeapInuse: 200e6 * n, RSS: 300e6 * n, FDs: 3300 * n, DBOpen: 32, DBActive: 1}
	}
	v, err := JudgeSoak(soakSeries(flat), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Flat || len(v.Metrics) != 5 {
		t.Fatalf("flat series judged %+v", v)
	}
	if v.EarlyFrom != 300 || v.EarlyTo != 900 || v.LateFrom != 3000 {
		t.Fatalf("windows %+v, want minutes 5–15 and 50–60", v)
	}

	// A goroutine leak of 10 a minute: 500 more by the end.
	leak := func(m float64) SoakSample {
		s := flat(m)
		s.Goroutines += 10 * m
		return s
	}
	v, err = JudgeSoak(soakSeries(leak), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if v.Flat {
		t.Fatalf("a leak judged flat: %+v", v)
	}
	for _, m := range v.Metrics {
		if (m.Name == "goroutines") == m.Flat {
			t.Errorf("%s: flat %v (early %.0f, late %.0f, limit %.0f)", m.Name, m.Flat, m.Early, m.Late, m.Limit)
		}
	}

	// No database: its series are left out, not judged.
	noDB := func(m float64) SoakSample { s := flat(m); s.DBOpen, s.DBActive = -1, -1; return s }
	if v, err = JudgeSoak(soakSeries(noDB), time.Hour); err != nil || len(v.Metrics) != 4 || !v.Flat {
		t.Fatalf("without a database: %+v, %v", v, err)
	}

	// Too short to have both windows.
	if _, err := JudgeSoak(soakSeries(flat)[:20], time.Hour); err == nil {
		t.Fatal("no error for a run without a late window")
	}
}

func TestParseMetrics(t *testing.T) {
	m, err := parseMetrics(strings.NewReader(`# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 52
process_open_fds 19
parley_gateway_resume_sources_total{source="buffer"} 7
parley_gateway_resume_sources_total{source="sync"} 2
go_gc_duration_seconds{quantile="0.5"} NaN
`))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{"go_goroutines": 52, "process_open_fds": 19,
		`parley_gateway_resume_sources_total{source="buffer"}`: 7, "parley_gateway_resume_sources_total": 9} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
}
