package gateway

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"parley/internal/promutil"
)

// metrics are the gateway's Prometheus metrics, all named parley_gateway_*.
type metrics struct {
	connections       prometheus.Gauge
	sessions          prometheus.Gauge
	subscriptions     prometheus.Gauge
	identifies        *prometheus.CounterVec
	resumes           *prometheus.CounterVec
	resumeSources     *prometheus.CounterVec
	resumeTokenChecks *prometheus.CounterVec
	botCloses         prometheus.Counter
	closes            *prometheus.CounterVec
	handovers         *prometheus.CounterVec
	deliveries        prometheus.Counter
	droppedEphemeral  prometheus.Counter
	slowCloses        prometheus.Counter
	sessionFills      prometheus.Counter
	fillRetries       *prometheus.CounterVec
	fillReads         prometheus.Counter
	fillStream        prometheus.Counter
	fillsInFlight     prometheus.Gauge
	typingDropped     prometheus.Counter
	presenceHidden    prometheus.Counter
	viewLimited       prometheus.Counter
	previews          prometheus.Counter
	floodCloses       prometheus.Counter

	admissionWaiting  prometheus.Gauge
	admissionWait     *prometheus.HistogramVec
	admissionRejected *prometheus.CounterVec
	fanout            prometheus.Histogram
	queueDepth        prometheus.Histogram
	panics            *prometheus.CounterVec // parley_panics_total, shared with other packages
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "parley_gateway_connections", Help: "Open WebSocket connections."}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "parley_gateway_sessions", Help: "Sessions on this node, connected or waiting for a resume."}),
		subscriptions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "parley_gateway_bus_subscriptions", Help: "Bus topics this node is subscribed to."}),
		identifies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_gateway_identifies_total", Help: "Identify attempts by result."}, []string{"result"}),
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_gateway_resumes_total", Help: "Resume attempts by result."}, []string{"result"}),
		resumeSources: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_gateway_resume_sources_total",
			Help: "Where resumes were served from: buffer (this node's session and its replay buffer), handover (another node's, handed over the bus), sync (invalid_session: the client identifies afresh and catches up through /sync)."}, []string{"source"}),
		resumeTokenChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_gateway_resume_token_checks_total",
			Help: "How resumes' tokens were checked: session (against the token hash and expiry of the session held or handed over, no store read), store (SessionByToken)."}, []string{"by"}),
		botCloses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_bot_sessions_closed_total",
			Help: "Bot sessions closed 4004 because their workspace turned integrations off."}),
		closes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_gateway_closes_total", Help: "Connections closed by the gateway, by close code."}, []string{"code"}),
		handovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_gateway_handovers_total", Help: "Sessions handed between nodes on resume, by result (given, taken, no_answer, unknown, error)."}, []string{"result"}),
		deliveries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_deliveries_total", Help: "Events queued to sessions."}),
		droppedEphemeral: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_ephemeral_dropped_total", Help: "Ephemeral events (typing, presence) dropped for full or detached sessions."}),
		slowCloses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_slow_consumer_closes_total", Help: "Connections closed 4009 because their send queue was full."}),
		sessionFills: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_session_catchups_total", Help: "Sessions brought up to the node's stream of a channel from its log (from the store, or from the stream's tail); several share one read."}),
		fillStream: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_catchup_stream_hits_total", Help: "Session catch-ups answered from the node's tail of the channel's stream, without a store read."}),
		fillRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_gateway_catchup_retries_total", Help: "Session catch-ups asked for again: after a failed read (failed, with backoff) or a read that never answered (stuck)."}, []string{"reason"}),
		fillReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_catchup_reads_total", Help: "Reads of a channel log for session catch-ups, each shared by every session waiting for that channel."}),
		fillsInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "parley_gateway_catchup_reads_in_flight", Help: "Catch-up reads of a channel log running now; at most Config.FillConcurrency."}),
		typingDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_typing_dropped_total", Help: "Typing ops dropped by the per-user, per-channel throttle, for non-members, or for ids over 64 bytes."}),
		presenceHidden: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_presence_hidden_total", Help: "User ids dropped from presence_sub because the session may not see them (not in its workspace), or could not be checked."}),
		viewLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_view_limited_total", Help: "presence_sub frames naming more users than a session may have in view (parley.MaxUsersInView): the first were kept, and the session was told with presence_sub_limited."}),
		previews: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_previews_total", Help: "Previews started: a session following a public channel its user is not in while it has it in focus."}),
		floodCloses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_inbound_rate_closes_total", Help: "Connections closed 4008 because they sent frames faster than Config.InboundRate."}),
		admissionWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "parley_gateway_admission_waiting", Help: "Identifies and resumes waiting in the admission queue for a slot."}),
		admissionWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "parley_gateway_admission_wait_seconds",
			Help:    "Time identifies and resumes waited in the admission queue, by outcome (admitted, timeout).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"result"}),
		admissionRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_gateway_admission_rejected_total", Help: "Identifies and resumes sent away overloaded, by reason (queue_full, wait_timeout)."}, []string{"reason"}),
		fanout: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "parley_gateway_fanout_seconds",
			Help:    "From an event's receipt off the bus to its being queued to a partition's sessions.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}),
		queueDepth: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "parley_gateway_queue_depth",
			Help:    "Frames waiting in a session's send queue when it is flushed.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512},
		}),
	}
	m.panics = promutil.Panics(reg)
	m.connections = promutil.Register(reg, m.connections)
	m.sessions = promutil.Register(reg, m.sessions)
	m.subscriptions = promutil.Register(reg, m.subscriptions)
	m.identifies = promutil.Register(reg, m.identifies)
	m.resumes = promutil.Register(reg, m.resumes)
	m.resumeSources = promutil.Register(reg, m.resumeSources)
	m.resumeTokenChecks = promutil.Register(reg, m.resumeTokenChecks)
	m.botCloses = promutil.Register(reg, m.botCloses)
	m.closes = promutil.Register(reg, m.closes)
	m.handovers = promutil.Register(reg, m.handovers)
	m.deliveries = promutil.Register(reg, m.deliveries)
	m.droppedEphemeral = promutil.Register(reg, m.droppedEphemeral)
	m.slowCloses = promutil.Register(reg, m.slowCloses)
	m.sessionFills = promutil.Register(reg, m.sessionFills)
	m.fillReads = promutil.Register(reg, m.fillReads)
	m.fillStream = promutil.Register(reg, m.fillStream)
	m.fillRetries = promutil.Register(reg, m.fillRetries)
	m.fillsInFlight = promutil.Register(reg, m.fillsInFlight)
	m.typingDropped = promutil.Register(reg, m.typingDropped)
	m.presenceHidden = promutil.Register(reg, m.presenceHidden)
	m.viewLimited = promutil.Register(reg, m.viewLimited)
	m.previews = promutil.Register(reg, m.previews)
	m.floodCloses = promutil.Register(reg, m.floodCloses)
	m.admissionWaiting = promutil.Register(reg, m.admissionWaiting)
	m.admissionWait = promutil.Register(reg, m.admissionWait)
	m.admissionRejected = promutil.Register(reg, m.admissionRejected)
	m.fanout = promutil.Register(reg, m.fanout)
	m.queueDepth = promutil.Register(reg, m.queueDepth)
	return m
}

// counter is the identify or resume counter for a result.
func (m *metrics) counter(op, result string) prometheus.Counter {
	if op == "resume" {
		return m.resumes.WithLabelValues(result)
	}
	return m.identifies.WithLabelValues(result)
}

func closeLabel(code int) string { return strconv.Itoa(code) }
