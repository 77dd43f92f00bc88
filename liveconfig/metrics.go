package liveconfig

import (
	"github.com/prometheus/client_golang/prometheus"
	"parley/internal/promutil"

	"parley"
)

type metrics struct {
	updates          prometheus.Counter
	reloadErrors     prometheus.Counter
	collapsedThreads prometheus.Gauge
	mentionCap       prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		updates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_config_updates_total", Help: "Live configuration changes saved by this node."}),
		reloadErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_config_reload_errors_total", Help: "Failed reloads of the live configuration from the store."}),
		collapsedThreads: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "parley_config_collapsed_threads", Help: "1 when collapsed reply threads are on (live configuration)."}),
		mentionCap: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "parley_config_channel_mention_max_members", Help: "Member count above which @channel needs an admin (0: no cap)."}),
	}
	m.updates = promutil.Register(reg, m.updates)
	m.reloadErrors = promutil.Register(reg, m.reloadErrors)
	m.collapsedThreads = promutil.Register(reg, m.collapsedThreads)
	m.mentionCap = promutil.Register(reg, m.mentionCap)
	return m
}

func (m *metrics) observe(c parley.LiveConfig) {
	v := 0.0
	if c.CollapsedThreads {
		v = 1
	}
	m.collapsedThreads.Set(v)
	m.mentionCap.Set(float64(c.ChannelMentionMaxMembers))
}
