package httpapi

import (
	"errors"
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
	m.rejected = register(reg, m.rejected)
	m.requests = register(reg, m.requests)
	m.duration = register(reg, m.duration)
	return m
}

// register registers c, or returns the collector already registered under
// the same description (several servers may share one registry).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic("httpapi: register metrics: " + err.Error())
	}
	return c
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
