// Package httpapi is Parley's HTTP JSON API under /api/v1: it authenticates
// bearer tokens, applies per-IP and per-account rate limits, decodes requests,
// calls the parley.Store and the directory queries (parley.DirectoryQueries,
// whichever implementation it is given), and maps their error codes to
// statuses in one table. The route table in routes.go is the single list of endpoints: the
// mux, the metrics labels, the OpenAPI test and the authorization test all
// read it.
//
// It must not authorise anything itself beyond "who is calling": membership,
// roles and visibility are decided by the store inside its transactions (and
// by the directory queries, with the same rules). It must not know about the
// bus, the gateway, any database or which directory implementation it has.
package httpapi

import (
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/auth"
	"parley/files"
	"parley/internal/edge"
	"parley/internal/promutil"
)

// Config is what a Server needs. The zero value of every field except Store
// is a documented default.
type Config struct {
	// Store serves every request; required.
	Store parley.Store
	// Exporter streams workspace exports (the store itself: an export is
	// one long read, kept out of the guarded request path). Nil: the
	// export route answers 503.
	Exporter parley.Exporter
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registerer receives the HTTP metrics; nil means no metrics.
	Registerer prometheus.Registerer
	// Now defaults to time.Now; tests may pin the clock (it drives session
	// expiry and the rate limiters).
	Now func() time.Time
	// SessionTTL is how long a login's token lives (default 30 days).
	SessionTTL time.Duration
	// TrustedProxies are the reverse proxies whose X-Forwarded-For and
	// X-Forwarded-Proto are believed (edge.Proxies.ClientIP has the rule).
	// Default: none; per-IP limits key on the connection's peer.
	TrustedProxies edge.Proxies
	// Rates are this node's rate limits (ratelimit.go); each zero field is
	// DefaultRates' value. The live configuration overrides them field by
	// field.
	Rates parley.LiveRates
	// Live is the live configuration, read on every limited request so
	// that a change of its rate_* settings applies without a restart. Nil:
	// Rates alone.
	Live parley.LiveConfigSource
	// WSURL returns the gateway URL that boot hands out for a workspace
	// (the node the affinity ring picks). Nil: the request's own host with
	// /api/v1/gateway.
	WSURL func(workspaceID string) string
	// Directory answers the directory, /users/batch, the switcher, mention
	// suggestions, channel headers and the users a one-channel-first boot
	// references: the query cache (querycache.Cache) on a node, or the
	// store's (sqlstore.Directory). Required.
	Directory parley.DirectoryQueries
	// LiveNodes returns how many nodes are live (the nodes package's
	// membership): each node enforces its share of the cluster-wide join
	// rate (joinlimit.go). Nil: one node.
	LiveNodes func() int
	// WorkspaceDeleted is called after a workspace was deleted
	// (DELETE /workspaces/{ws}): the node purges its files and rows in
	// the background (purge.Purger.Start). Nil: they stay until a node's
	// purger resumes the purge.
	WorkspaceDeleted func(workspaceID string)

	// Integrations keeps bots, webhooks, commands and the bot audit log
	// (integrations.go). Nil: the integration routes answer 503.
	Integrations parley.IntegrationStore
	// Audit queues the bot audit log's entries (package auditlog). Nil:
	// each entry is written by its request, synchronously.
	Audit AuditRecorder
	// WebhookRate limits each incoming webhook (default DefaultWebhookRate).
	WebhookRate Rate
	// CommandTimeout is how long a slash command or outgoing webhook URL
	// has to answer (default integrations.DefaultTimeout).
	CommandTimeout time.Duration
	// CommandClient sends the requests of slash commands and outgoing
	// webhooks. Nil: a client that follows no redirects.
	CommandClient *http.Client
	// Files handles uploads and downloads (package files). Nil: the file
	// routes answer 503.
	Files *files.Service

	// Notify keeps email notification preferences (notify.go). Nil: the
	// Store, if it keeps them, else those routes answer 503.
	Notify parley.NotifyStore
	// NotifySecret signs unsubscribe links (the notifier's secret). Nil: a
	// random one, good until the process stops.
	NotifySecret []byte
	// EmailEnabled says an SMTP server is configured (GET /me/notifications
	// tells clients).
	EmailEnabled bool

	// WorkspaceLimits returns a workspace's limits and features from the
	// tenant directory (limits.go): the store enforces the limits, the
	// handlers the features. Nil: every workspace has the global
	// defaults.
	WorkspaceLimits WorkspaceLimitsFunc
	// Caps are the store's caps (parley.Caps), reported by boot with a
	// workspace's overrides applied.
	Caps parley.Caps

	// testRoutes are extra routes, for this package's tests only.
	testRoutes []route
}

// Rate is a token bucket (parley.Rate): the zero Rate is the default, a
// negative PerMinute no limit.
type Rate = parley.Rate

// Default limits and sizes.
const (
	DefaultSessionTTL = 30 * 24 * time.Hour
	// MaxBodyBytes bounds every request body (413 above).
	MaxBodyBytes = 1 << 20
)

// Server serves the API. Create it with New; it is safe for concurrent use.
type Server struct {
	store      parley.Store
	exporter   parley.Exporter // nil: export answers 503
	log        *slog.Logger
	now        func() time.Time
	sessionTTL time.Duration
	proxies    edge.Proxies
	rl         *limiters
	joins      *joinLimiter

	wsURL func(workspaceID string) string // nil: the request's host
	// workspaceDeleted starts a deleted workspace's purge; nil: none.
	workspaceDeleted func(workspaceID string)
	dir              parley.DirectoryQueries
	limits           parley.BootLimits
	wlimits          *workspaceLimits // per-workspace overrides (limits.go)

	integ  *integ         // bots, webhooks, commands (integrations.go)
	files  *files.Service // nil: file routes answer 503
	notify *notifyState   // email preferences, unsubscribe (notify.go)

	metrics *metrics           // nil without a Registerer
	panics  prometheus.Counter // parley_panics_total{where="http"}
	// testRoutes are added to the route table by tests (a handler that
	// panics, say); nil in production.
	testRoutes []route
	handler    http.Handler
}

// New returns a Server for cfg. It panics when cfg.Store or cfg.Directory
// is nil, which is a wiring mistake.
func New(cfg Config) *Server {
	if cfg.Store == nil {
		panic("httpapi: Config.Store is required")
	}
	if cfg.Directory == nil {
		panic("httpapi: Config.Directory is required")
	}
	s := &Server{
		store:      cfg.Store,
		exporter:   cfg.Exporter,
		log:        cfg.Logger,
		now:        cfg.Now,
		sessionTTL: cfg.SessionTTL,
		proxies:    cfg.TrustedProxies,
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.sessionTTL <= 0 {
		s.sessionTTL = DefaultSessionTTL
	}
	s.wsURL, s.dir, s.limits = cfg.WSURL, cfg.Directory, bootLimits()
	s.files = cfg.Files
	if cfg.Registerer != nil {
		s.metrics = newMetrics(cfg.Registerer)
	}
	s.panics = promutil.Panics(cfg.Registerer).WithLabelValues("http")
	s.testRoutes = cfg.testRoutes
	s.workspaceDeleted = cfg.WorkspaceDeleted
	s.rl = newLimiters(cfg, s.metrics.rejectedVec())
	s.joins = newJoinLimiter(cfg, cfg.Registerer, s.log)
	s.wlimits = newWorkspaceLimits(cfg)
	s.integ = newInteg(cfg, s)
	s.notify = newNotifyState(cfg)
	s.handler = s.buildHandler()
	return s
}

// Handler returns the handler of the whole /api/v1/ tree (its patterns
// include the /api/v1 prefix, so mount it at "/api/v1/" without stripping).
func (s *Server) Handler() http.Handler { return s.handler }

// caller is the authenticated principal of a request.
type caller struct {
	UserID    string
	TokenHash string
	// Scopes are a bot token's; nil for a person's login.
	Scopes []string
}

// bot reports whether the caller is a bot token.
func (c *caller) bot() bool { return c != nil && c.Scopes != nil }

// handlerFunc serves one route. It writes its own success response and
// returns an error for everything else; c is nil on public routes.
type handlerFunc func(w http.ResponseWriter, r *http.Request, c *caller) error

// buildHandler registers every route of the table on a ServeMux and wraps it
// with the headers every response shares.
func (s *Server) buildHandler() http.Handler {
	mux := http.NewServeMux()
	var methods []string
	for _, rt := range append(s.routes(), s.testRoutes...) {
		if !slices.Contains(methods, rt.Method) {
			methods = append(methods, rt.Method)
		}
		mux.Handle(rt.Method+" "+rt.Pattern, s.wrap(rt))
	}
	slices.Sort(methods)
	// Whatever no route takes lands here (the least specific pattern).
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.unmatched(w, r, mux, methods)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		h.Set("Referrer-Policy", "no-referrer")
		if !canonicalPath(r.URL.Path) {
			// ServeMux would answer 307 to the cleaned path, and a client
			// following it keeps the method: DELETE .../reactions/.. (an
			// emoji of "..") would delete the message itself.
			writeJSON(w, http.StatusBadRequest, errorBody(parley.EINVALID, "the path has '.' or '..' segments or an empty one"))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// canonicalPath reports whether p is already clean (no ".", ".." or empty
// segments; a trailing slash is kept), the form ServeMux routes without a
// redirect.
func canonicalPath(p string) bool {
	if p == "" {
		return true
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c == p
}

// unmatched answers a request no route takes: 405 with Allow when the path
// exists under other methods, 404 otherwise, both as JSON errors.
func (s *Server) unmatched(w http.ResponseWriter, r *http.Request, mux *http.ServeMux, methods []string) {
	start := s.now()
	var allowed []string
	for _, m := range methods {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "/" {
			allowed = append(allowed, m)
		}
	}
	status := http.StatusNotFound
	if len(allowed) > 0 {
		status = http.StatusMethodNotAllowed
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeJSON(w, status, errorBody(parley.EINVALID, "method not allowed"))
	} else {
		writeJSON(w, status, errorBody(parley.ENOTFOUND, "no such endpoint"))
	}
	method := r.Method
	if !slices.Contains(methods, method) {
		method = "OTHER" // keep client-chosen strings out of label values
	}
	s.metrics.observe("unmatched", method, status, s.now().Sub(start))
}

// wrap turns a route into an http.Handler: metrics, panic recovery,
// authentication (before anything else, including body parsing), the
// route's rate-limit tier, the body size limit, then the route's handler
// and its error.
func (s *Server) wrap(rt route) http.Handler {
	label := rt.Pattern
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				handlePanic(s.log, s.panics, sw, r, v, label, sw.code != 0)
			}
			s.metrics.observe(label, rt.Method, sw.status(), s.now().Sub(start))
		}()
		r = s.wlimits.withLimits(r)
		var c *caller
		if rt.Auth {
			var err error
			if c, err = s.authenticate(r); err != nil {
				s.writeError(sw, r, err)
				return
			}
			if c.bot() && rt.Method != http.MethodGet {
				// After the answer: what the bot did, or tried, and how
				// it went.
				defer s.integ.auditCall(r, c, rt, sw)
			}
			if err := checkScope(rt, c); err != nil {
				s.writeError(sw, r, err)
				return
			}
			if c.bot() {
				if err := s.botFeature(r, c); err != nil {
					s.writeError(sw, r, err)
					return
				}
			}
			if s.rl.limited(rt.Tier) { // not reads: they need no client address
				if err := s.rl.checkTier(start, rt.Tier, c.UserID, s.clientIP(r)); err != nil {
					s.writeError(sw, r, err)
					return
				}
			}
		}
		// Ids in the path are text: bytes no id can hold (invalid UTF-8,
		// NUL) name nothing, and PostgreSQL's text would refuse them as
		// an internal error where SQLite found nothing.
		if parley.CheckText("path", r.URL.Path) != nil {
			s.writeError(sw, r, parley.Errorf(parley.ENOTFOUND, "not found"))
			return
		}
		if err := checkQuery(r); err != nil {
			s.writeError(sw, r, err)
			return
		}
		if limit := rt.bodyLimit(); limit > 0 {
			r.Body = http.MaxBytesReader(sw, r.Body, limit)
		}
		if err := rt.Handle(sw, r, c); err != nil {
			s.writeError(sw, r, err)
		}
	})
}

// authenticate resolves the bearer token to a live session. Every failure
// that is not the store's own outage is 401.
func (s *Server) authenticate(r *http.Request) (*caller, error) {
	token, ok := bearerToken(r)
	if !ok {
		return nil, parley.Errorf(parley.EUNAUTHORIZED, "missing or malformed bearer token")
	}
	hash := auth.HashToken(token)
	sess, err := s.store.SessionByToken(r.Context(), hash)
	if err != nil {
		switch parley.ErrorCode(err) {
		case parley.EINTERNAL, parley.EUNAVAILABLE:
			return nil, err
		}
		return nil, parley.Errorf(parley.EUNAUTHORIZED, "invalid or expired token")
	}
	if sess == nil || !sess.ExpiresAt.After(s.now()) {
		return nil, parley.Errorf(parley.EUNAUTHORIZED, "invalid or expired token")
	}
	return &caller{UserID: sess.UserID, TokenHash: hash, Scopes: sess.Scopes}, nil
}

// bearerToken extracts the token of "Authorization: Bearer <token>".
func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	tok := strings.TrimSpace(h[len(prefix):])
	return tok, tok != ""
}

// statusWriter remembers the status written, for metrics and for knowing
// whether a late error can still be reported.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// clientIP is the address per-IP limits key on (edge has the rule).
func (s *Server) clientIP(r *http.Request) string { return s.proxies.ClientIP(r) }

// retryAfter carries a Retry-After delay with a 429 or 503 error.
type retryAfter struct {
	err   error
	delay time.Duration
}

func (e *retryAfter) Error() string             { return e.err.Error() }
func (e *retryAfter) Unwrap() error             { return e.err }
func (e *retryAfter) RetryAfter() time.Duration { return e.delay }

// retrySeconds renders a delay as whole seconds for Retry-After, at least 1.
func retrySeconds(d time.Duration) string {
	return strconv.Itoa(int(max(1, (d+time.Second-1)/time.Second)))
}
