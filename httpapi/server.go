// Package httpapi is Parley's HTTP JSON API under /api/v1: it authenticates
// bearer tokens, applies per-IP and per-account rate limits, decodes requests,
// calls the parley.Store, and maps the store's error codes to statuses in one
// table. The route table in routes.go is the single list of endpoints: the
// mux, the metrics labels, the OpenAPI test and the authorization test all
// read it.
//
// It must not authorise anything itself beyond "who is calling": membership,
// roles and visibility are decided by the store inside its transactions. It
// must not know about the bus, the gateway or any database.
package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/auth"
)

// Config is what a Server needs. The zero value of every field except Store
// is a documented default.
type Config struct {
	// Store serves every request; required.
	Store parley.Store
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registerer receives the HTTP metrics; nil means no metrics.
	Registerer prometheus.Registerer
	// Now defaults to time.Now; tests may pin the clock (it drives session
	// expiry and the rate limiters).
	Now func() time.Time
	// SessionTTL is how long a login's token lives (default 30 days).
	SessionTTL time.Duration
	// TrustProxyHeaders makes per-IP limits use the last address of
	// X-Forwarded-For, as appended by one trusted reverse proxy. Default
	// false: the connection's RemoteAddr.
	TrustProxyHeaders bool
	// LoginPerAccount limits login attempts per email, successful or not
	// (default 5 per minute, burst 10).
	LoginPerAccount Rate
	// LoginPerIP limits login attempts per client IP (default 20 per
	// minute, burst 40).
	LoginPerIP Rate
	// SignupPerIP limits signups per client IP (default 10 per minute,
	// burst 20).
	SignupPerIP Rate
	// WSURL returns the gateway URL that boot hands out for a workspace
	// (the node the affinity ring picks). Nil: the request's own host with
	// /api/v1/gateway.
	WSURL func(workspaceID string) string
	// Users looks up the users a one-channel-first boot references. Nil:
	// Cache, when it implements UserLookup (the query cache does), else the
	// store.
	Users UserLookup
	// Cache serves the directory, /users/batch, the switcher, mention
	// suggestions and channel headers from memory (querycache). Nil: the
	// store serves them (see querycache.go in this package).
	Cache Cache
}

// Rate is a token bucket: PerMinute tokens a minute, at most Burst at once.
// The zero Rate means the field's default; a negative PerMinute means no
// limit.
type Rate struct {
	PerMinute float64
	Burst     int
}

// Default limits and sizes.
const (
	DefaultSessionTTL = 30 * 24 * time.Hour
	// MaxBodyBytes bounds every request body (413 above).
	MaxBodyBytes = 1 << 20
)

var (
	defaultLoginPerAccount = Rate{PerMinute: 5, Burst: 10}
	defaultLoginPerIP      = Rate{PerMinute: 20, Burst: 40}
	defaultSignupPerIP     = Rate{PerMinute: 10, Burst: 20}
)

func (r Rate) orDefault(d Rate) Rate {
	if r.PerMinute == 0 {
		return d
	}
	if r.Burst <= 0 {
		r.Burst = 1
	}
	return r
}

// Server serves the API. Create it with New; it is safe for concurrent use.
type Server struct {
	store             parley.Store
	log               *slog.Logger
	now               func() time.Time
	sessionTTL        time.Duration
	trustProxyHeaders bool

	loginAccount *keyedLimiter
	loginIP      *keyedLimiter
	signupIP     *keyedLimiter

	wsURL  func(workspaceID string) string // nil: the request's host
	cache  Cache                           // nil: the store
	users  UserLookup
	limits parley.BootLimits

	metrics *metrics // nil without a Registerer
	handler http.Handler
}

// New returns a Server for cfg. It panics when cfg.Store is nil, which is a
// wiring mistake.
func New(cfg Config) *Server {
	if cfg.Store == nil {
		panic("httpapi: Config.Store is required")
	}
	s := &Server{
		store:             cfg.Store,
		log:               cfg.Logger,
		now:               cfg.Now,
		sessionTTL:        cfg.SessionTTL,
		trustProxyHeaders: cfg.TrustProxyHeaders,
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
	s.loginAccount = newKeyedLimiter(cfg.LoginPerAccount.orDefault(defaultLoginPerAccount), maxLimiterKeys)
	s.loginIP = newKeyedLimiter(cfg.LoginPerIP.orDefault(defaultLoginPerIP), maxLimiterKeys)
	s.signupIP = newKeyedLimiter(cfg.SignupPerIP.orDefault(defaultSignupPerIP), maxLimiterKeys)
	s.wsURL, s.users, s.limits = cfg.WSURL, cfg.Users, bootLimits(cfg)
	s.cache = cfg.Cache
	if s.users == nil {
		s.users = storeUsers{cfg.Store}
		if ul, ok := cfg.Cache.(UserLookup); ok { // the query cache has Users too
			s.users = ul
		}
	}
	if cfg.Registerer != nil {
		s.metrics = newMetrics(cfg.Registerer)
	}
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
}

// handlerFunc serves one route. It writes its own success response and
// returns an error for everything else; c is nil on public routes.
type handlerFunc func(w http.ResponseWriter, r *http.Request, c *caller) error

// buildHandler registers every route of the table on a ServeMux and wraps it
// with the headers every response shares.
func (s *Server) buildHandler() http.Handler {
	mux := http.NewServeMux()
	var methods []string
	for _, rt := range s.routes() {
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
		mux.ServeHTTP(w, r)
	})
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
// authentication (before anything else, including body parsing), the body
// size limit, then the route's handler and its error.
func (s *Server) wrap(rt route) http.Handler {
	label := rt.Pattern
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.writeError(sw, r, fmt.Errorf("panic: %v", v))
			}
			s.metrics.observe(label, rt.Method, sw.status(), s.now().Sub(start))
		}()
		var c *caller
		if rt.Auth {
			var err error
			if c, err = s.authenticate(r); err != nil {
				s.writeError(sw, r, err)
				return
			}
		}
		// Ids in the path are text: bytes no id can hold (invalid UTF-8,
		// NUL) name nothing, and PostgreSQL's text would refuse them as
		// an internal error where SQLite found nothing.
		if p := r.URL.Path; !utf8.ValidString(p) || strings.IndexByte(p, 0) >= 0 {
			s.writeError(sw, r, parley.Errorf(parley.ENOTFOUND, "not found"))
			return
		}
		if err := checkQuery(r); err != nil {
			s.writeError(sw, r, err)
			return
		}
		r.Body = http.MaxBytesReader(sw, r.Body, MaxBodyBytes)
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
	return &caller{UserID: sess.UserID, TokenHash: hash}, nil
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

// clientIP is the address per-IP limits key on.
func (s *Server) clientIP(r *http.Request) string {
	if s.trustProxyHeaders {
		if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
			parts := strings.Split(xff[len(xff)-1], ",")
			if ip := strings.TrimSpace(parts[len(parts)-1]); ip != "" {
				return ip
			}
		}
	}
	host := r.RemoteAddr
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	return strings.Trim(host, "[]")
}

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
