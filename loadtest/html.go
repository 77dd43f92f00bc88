package loadtest

import (
	"fmt"
	"html"
	"html/template"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
)

// The HTML report is one file with no external assets: the plots are SVG
// drawn here from the timeline.

type series struct {
	name  string
	color string
	ys    []float64
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// band is a shaded span of the x axis (a fault's window), with a label.
type band struct {
	from, to float64
	color    string
	label    string
}

// svgChart draws series over xs (seconds) as a line chart.
func svgChart(title, unit string, xs []float64, ss []series) template.HTML {
	return svgChartBands(title, unit, xs, ss, nil)
}

// svgChartBands is svgChart with shaded spans behind the lines.
func svgChartBands(title, unit string, xs []float64, ss []series, bands []band) template.HTML {
	const w, h, l, r, t, b = 760.0, 240.0, 60.0, 20.0, 30.0, 36.0
	pw, ph := w-l-r, h-t-b
	var ymax, xmax float64
	for _, s := range ss {
		for _, y := range s.ys {
			if !math.IsNaN(y) {
				ymax = max(ymax, y)
			}
		}
	}
	for _, x := range xs {
		xmax = max(xmax, x)
	}
	for _, b := range bands {
		xmax = max(xmax, b.to)
	}
	ymax, xmax = niceCeil(ymax), max(xmax, 1)
	px := func(x float64) float64 { return l + x/xmax*pw }
	py := func(y float64) float64 { return t + ph - y/ymax*ph }
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img" aria-label="%s">`,
		w, h, w, h, html.EscapeString(title))
	fmt.Fprintf(&sb, `<text x="%.0f" y="18" font-size="14" font-weight="bold">%s</text>`, l, html.EscapeString(title))
	for _, b := range bands {
		fmt.Fprintf(&sb, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="0.25"><title>%s</title></rect>`,
			px(b.from), t, max(px(b.to)-px(b.from), 1), ph, b.color, html.EscapeString(b.label))
	}
	for i := 0; i <= 4; i++ {
		y := ymax * float64(i) / 4
		fmt.Fprintf(&sb, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/>`, l, l+pw, py(y), py(y))
		fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="end">%s</text>`, l-6, py(y)+4, html.EscapeString(fmtNum(y)))
	}
	step := niceCeil(xmax / 8)
	for x := 0.0; x <= xmax; x += step {
		fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%ss</text>`, px(x), t+ph+16, fmtNum(x))
	}
	fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="end">%s</text>`, l+pw, t+ph+32, html.EscapeString(unit))
	fmt.Fprintf(&sb, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`, l, t, pw, ph)
	for i, s := range ss {
		if len(s.ys) == 0 {
			continue
		}
		// NaN marks a second without data: the line breaks there.
		var pts []string
		flush := func() {
			if len(pts) > 0 {
				fmt.Fprintf(&sb, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>`, s.color, strings.Join(pts, " "))
			}
			pts = pts[:0]
		}
		for j, y := range s.ys {
			if math.IsNaN(y) {
				flush()
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(xs[j]), py(y)))
		}
		flush()
		lx := l + 10 + float64(i)*110
		fmt.Fprintf(&sb, `<rect x="%.1f" y="%.1f" width="10" height="10" fill="%s"/><text x="%.1f" y="%.1f" font-size="11">%s</text>`,
			lx, t+6, s.color, lx+14, t+15, html.EscapeString(s.name))
	}
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String()) // built from escaped text and numbers only
}

func fmtNum(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.3gk", v/1e3)
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

type kv struct{ K, V string }

var reportTmpl = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>parley loadtest {{.R.Scenario}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:820px}
table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;font-size:14px}
.pass{color:#080;font-weight:bold}.fail{color:#b00;font-weight:bold}svg{display:block;margin:16px 0}
</style></head><body>
<h1>parley loadtest: {{.R.Scenario}}</h1>
<p>Against {{.R.URL}}, started {{.R.Started.UTC.Format "2006-01-02 15:04:05 UTC"}}.
Verdict: {{if .R.Pass}}<span class="pass">PASS</span>{{else}}<span class="fail">FAIL</span>{{end}}
(lost {{.R.Lost}}, duplicated {{.R.Duplicated}}, out of order {{.R.OutOfOrder}}; {{.R.Connected}} of {{.R.Users}} users connected).</p>
<h2>Summary</h2>
<table>{{range .Rows}}<tr><th>{{.K}}</th><td>{{.V}}</td></tr>{{end}}</table>
<h2>Over time</h2>
{{range .Charts}}{{.}}{{end}}
<h2>Errors</h2>
<table><tr><th>kind</th><th>count</th></tr>{{range .Errors}}<tr><td>{{.K}}</td><td>{{.V}}</td></tr>{{else}}<tr><td colspan="2">none</td></tr>{{end}}</table>
</body></html>
`))

// HTML writes the self-contained report.
func (r *Result) HTML(w io.Writer) error {
	xs := make([]float64, len(r.Timeline))
	var p50, p90, p99, mx, dels, posts, conns, errs []float64
	for i, p := range r.Timeline {
		xs[i] = float64(p.T)
		if p.Measured == 0 {
			nan := math.NaN()
			p50, p90, p99, mx = append(p50, nan), append(p90, nan), append(p99, nan), append(mx, nan)
		} else {
			p50, p90, p99, mx = append(p50, p.P50), append(p90, p.P90), append(p99, p.P99), append(mx, p.Max)
		}
		dels, posts = append(dels, float64(p.Deliveries)), append(posts, float64(p.Posts))
		conns, errs = append(conns, float64(p.Conns)), append(errs, float64(p.Errors))
	}
	charts := []template.HTML{
		svgChart("Delivery latency (post or join → receipt) per second", "ms", xs, []series{
			{"p50", "#1f77b4", p50}, {"p90", "#2ca02c", p90}, {"p99", "#ff7f0e", p99}, {"max", "#d62728", mx}}),
		svgChart("Deliveries per second", "events/s", xs, []series{{"deliveries", "#1f77b4", dels}}),
		svgChart("Actions sent per second", "actions/s", xs, []series{{"sent", "#9467bd", posts}}),
		svgChart("Live gateway sessions", "sessions", xs, []series{{"sessions", "#2ca02c", conns}}),
		svgChart("Errors per second", "errors/s", xs, []series{{"errors", "#d62728", errs}}),
	}
	rows := []kv{
		{"sizes", fmt.Sprintf("%d users, %d channels, connect %.0f/s, rate %.0f/s, %d posters, %.0f s, %d-byte messages, %d procs, %s, seeded %v",
			r.Sizes.Users, r.Sizes.Channels, r.Sizes.ConnectRate, r.Sizes.Rate, r.Sizes.Posters, r.Sizes.DurationS, r.Sizes.TextBytes, r.Sizes.Procs, sourceText(r.Sizes.SourceIPs), r.Sizes.Seeded)},
		{"setup / run", fmt.Sprintf("%.1f s / %.1f s", r.SetupSeconds, r.RunSeconds)},
		{"peak live sessions", fmt.Sprint(r.PeakConns)},
		{"actions sent", fmt.Sprint(r.Posts)},
		{"deliveries", fmt.Sprintf("%d (%.0f/s mean, %d/s peak, %d by catch-up)", r.Deliveries, r.DeliveriesPerSecond, r.PeakDeliveries, r.CaughtUp)},
		{"checked streams", fmt.Sprint(r.Checked)},
		{"ephemeral events (typing, presence)", fmt.Sprint(r.Ephemeral)},
		{"resumes / fresh identifies / gap fills", fmt.Sprintf("%d / %d / %d", r.Client.Resumes, r.Client.InvalidSessions, r.Client.GapsFilled)},
	}
	for _, k := range slices.Sorted(maps.Keys(r.Latency)) {
		s := r.Latency[k]
		rows = append(rows, kv{k + " latency", fmt.Sprintf("p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms (n=%d)", s.P50, s.P90, s.P99, s.Max, s.Count)})
	}
	for _, k := range slices.Sorted(maps.Keys(r.Extra)) {
		rows = append(rows, kv{k, fmt.Sprintf("%.2f", r.Extra[k])})
	}
	var errors []kv
	for _, k := range slices.Sorted(maps.Keys(r.Errors)) {
		errors = append(errors, kv{k, fmt.Sprint(r.Errors[k])})
	}
	return reportTmpl.Execute(w, map[string]any{"R": r, "Rows": rows, "Charts": charts, "Errors": errors})
}

func sourceText(n int) string {
	if n == 0 {
		return "system-chosen source address"
	}
	return fmt.Sprintf("%d source addresses", n)
}
