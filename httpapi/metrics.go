package httpapi

import (
	"parley/internal/promutil"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the API's Prometheus series, labelled by route pattern (never
// the raw path, which would explode cardinality).
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	rejected *prometheus.CounterVec
	integ    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_http_requests_total",
			Help: "HTTP API requests by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "parley_http_request_duration_seconds",
			Help:    "HTTP API request latency by route pattern and method.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5 ms … 16 s
		}, []string{"route", "method"}),
	}
	m.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "parley_ratelimit_rejections_total",
		Help: "API requests refused with 429 by a rate limit, by tier and by the key that ran out (user, ip, login_account, ...).",
	}, []string{"tier", "key"})
	m.integ = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "parley_integration_calls_total",
		Help: "Integration traffic by kind (webhook: incoming webhook posts; command, outgoing: calls to their URLs) and outcome (ok, refused, rate_limited, failed).",
	}, []string{"kind", "outcome"})
	m.integ = promutil.Register(reg, m.integ)
	m.rejected = promutil.Register(reg, m.rejected)
	m.requests = promutil.Register(reg, m.requests)
	m.duration = promutil.Register(reg, m.duration)
	return m
}

// observe records one request; a nil *metrics records nothing.
func (m *metrics) observe(route, method string, status int, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route, method).Observe(d.Seconds())
}

// rejectedVec is the rate-limit rejection counter, nil without metrics.
func (m *metrics) rejectedVec() *prometheus.CounterVec {
	if m == nil {
		return nil
	}
	return m.rejected
}

// integration counts one webhook post or command/outgoing call; a nil
// *metrics records nothing.
func (m *metrics) integration(kind, outcome string) {
	if m == nil {
		return
	}
	m.integ.WithLabelValues(kind, outcome).Inc()
}
