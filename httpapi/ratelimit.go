package httpapi

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/internal/edge"
)

// Tier is the rate-limit class of a route, after Slack's Web API tiers:
// every route of a tier shares one bucket per user and one per client IP.
// The route table gives each route its tier (routes.go).
type Tier string

const (
	// TierRead: reads, not limited here (the gateway and the store's own
	// page caps bound them).
	TierRead Tier = "read"
	// TierAuth: signup and login. Their keys (the email, a device) are in
	// the body, so their handlers check them (login.go), not wrap.
	TierAuth Tier = "auth"
	// TierMessage: posting messages.
	TierMessage Tier = "message"
	// TierWrite: every other small write: edits, deletes, reactions, pins,
	// read markers, follows, joins and leaves, profile changes.
	TierWrite Tier = "write"
	// TierCreate: things that take room: workspaces, channels, DMs,
	// invites and their acceptance.
	TierCreate Tier = "create"
	// TierSearch: full-text search, the most expensive read.
	TierSearch Tier = "search"
)

// DefaultRates are the limits when neither Config.Rates nor the live
// configuration sets them. They are sized so that a person never meets
// them (the fastest typist posts a message every few seconds; a flurry of
// reactions is a few dozen) while a script is held to a pace a store
// absorbs: one account cannot create more than about a channel every two
// seconds once its burst is spent. Per-IP limits are ten times the
// per-user ones, room for an office behind one NAT address.
var DefaultRates = parley.LiveRates{
	MessageUser:    parley.MustRate("120/min,burst=60"),
	MessageIP:      parley.MustRate("1200/min,burst=600"),
	WriteUser:      parley.MustRate("300/min,burst=150"),
	WriteIP:        parley.MustRate("3000/min,burst=1500"),
	CreateUser:     parley.MustRate("30/min,burst=60"),
	CreateIP:       parley.MustRate("300/min,burst=600"),
	SearchUser:     parley.MustRate("60/min,burst=30"),
	SearchIP:       parley.MustRate("600/min,burst=300"),
	LoginAccountIP: parley.MustRate("5/min,burst=10"),
	LoginAccount:   parley.MustRate("30/min,burst=60"),
	LoginIP:        parley.MustRate("20/min,burst=40"),
	SignupIP:       parley.MustRate("10/min,burst=20"),
}

// limiters holds a limiter per (tier, scope) and the login ones, and keeps
// their rates in step with the live configuration.
type limiters struct {
	defaults parley.LiveRates        // Config.Rates over DefaultRates
	live     parley.LiveConfigSource // nil: defaults only
	rejected *prometheus.CounterVec  // nil without metrics

	// Set once by newLimiters; their rates change through sync.
	user, ip                                        map[Tier]*edge.Limiter
	loginAccountIP, loginAccount, loginIP, signupIP *edge.Limiter

	mu      sync.Mutex
	applied parley.LiveRates // guarded by mu: the rates the limiters have
}

func newLimiters(cfg Config, rejected *prometheus.CounterVec) *limiters {
	l := &limiters{
		defaults: cfg.Rates.Or(DefaultRates),
		live:     cfg.Live,
		rejected: rejected,
		user:     map[Tier]*edge.Limiter{},
		ip:       map[Tier]*edge.Limiter{},
	}
	for _, t := range []Tier{TierMessage, TierWrite, TierCreate, TierSearch} {
		l.user[t] = edge.NewLimiter(parley.Rate{}, 0)
		l.ip[t] = edge.NewLimiter(parley.Rate{}, 0)
	}
	l.loginAccountIP = edge.NewLimiter(parley.Rate{}, 0)
	l.loginAccount = edge.NewLimiter(parley.Rate{}, 0)
	l.loginIP = edge.NewLimiter(parley.Rate{}, 0)
	l.signupIP = edge.NewLimiter(parley.Rate{}, 0)
	l.sync()
	return l
}

// rates are the limits in force: the live configuration's, each over this
// node's default.
func (l *limiters) rates() parley.LiveRates {
	if l.live == nil {
		return l.defaults
	}
	return l.live.LiveConfig().LiveRates.Or(l.defaults)
}

// sync gives every limiter its current rate. It runs before each check, so
// a live change applies to the next request; a limiter whose rate did not
// change keeps its buckets.
func (l *limiters) sync() {
	r := l.rates()
	l.mu.Lock()
	defer l.mu.Unlock()
	if r == l.applied {
		return
	}
	l.applied = r
	l.user[TierMessage].SetRate(r.MessageUser)
	l.ip[TierMessage].SetRate(r.MessageIP)
	l.user[TierWrite].SetRate(r.WriteUser)
	l.ip[TierWrite].SetRate(r.WriteIP)
	l.user[TierCreate].SetRate(r.CreateUser)
	l.ip[TierCreate].SetRate(r.CreateIP)
	l.user[TierSearch].SetRate(r.SearchUser)
	l.ip[TierSearch].SetRate(r.SearchIP)
	l.loginAccountIP.SetRate(r.LoginAccountIP)
	l.loginAccount.SetRate(r.LoginAccount)
	l.loginIP.SetRate(r.LoginIP)
	l.signupIP.SetRate(r.SignupIP)
}

// limitCheck is one (limiter, key) pair of a request, with the label its
// rejection is counted under.
type limitCheck struct {
	lim   *edge.Limiter
	key   string
	label string
}

// allow takes a token from every check or from none; a refusal is a 429
// whose Retry-After says how long to wait, counted under tier and the
// refusing check's label.
func (l *limiters) allow(now time.Time, tier Tier, checks ...limitCheck) error {
	l.sync()
	ec := make([]edge.Check, len(checks))
	for i, c := range checks {
		ec[i] = edge.Check{Limiter: c.lim, Key: c.key}
	}
	i, wait := edge.AllowAll(now, ec...)
	if i < 0 {
		return nil
	}
	if l.rejected != nil {
		l.rejected.WithLabelValues(string(tier), checks[i].label).Inc()
	}
	msg := "too many requests; retry later"
	if tier == TierAuth {
		msg = "too many attempts; retry later"
	}
	return &retryAfter{err: parley.Errorf(parley.ERATELIMITED, "%s", msg), delay: wait}
}

// checkTier applies a route's tier to an authenticated caller: one bucket
// for the user, one for the client's address.
// limited reports whether tier has per-route limits (not read; auth is
// checked by its handlers).
func (l *limiters) limited(tier Tier) bool {
	_, ok := l.user[tier]
	return ok
}

func (l *limiters) checkTier(now time.Time, tier Tier, userID, ip string) error {
	u, ok := l.user[tier]
	if !ok {
		return nil // read, auth (checked by its handler)
	}
	return l.allow(now, tier,
		limitCheck{u, userID, "user"},
		limitCheck{l.ip[tier], edge.IPKey(ip), "ip"},
	)
}

// bootRates are the limits boot reports, by name, without the ones that
// are off (nothing to respect).
func (l *limiters) bootRates() map[string]parley.RateLimit {
	r := l.rates()
	named := map[string]parley.Rate{
		"message_per_user":     r.MessageUser,
		"message_per_ip":       r.MessageIP,
		"write_per_user":       r.WriteUser,
		"write_per_ip":         r.WriteIP,
		"create_per_user":      r.CreateUser,
		"create_per_ip":        r.CreateIP,
		"search_per_user":      r.SearchUser,
		"search_per_ip":        r.SearchIP,
		"login_per_account_ip": r.LoginAccountIP,
		"login_per_account":    r.LoginAccount,
		"login_per_ip":         r.LoginIP,
		"signup_per_ip":        r.SignupIP,
	}
	out := make(map[string]parley.RateLimit, len(named))
	for name, rt := range named {
		if rt.PerMinute > 0 {
			out[name] = parley.RateLimit{PerMinute: rt.PerMinute, Burst: max(1, rt.Burst)}
		}
	}
	return out
}
