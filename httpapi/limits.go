package httpapi

import (
	"context"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/internal/promutil"
)

// Per-workspace limits and features (docs/directory.md "Limits and
// features"): every request carries a lookup of the workspace's overrides
// in its context (parley.WithLimitsLookup), so that the store applies the
// workspace's caps inside its writes, and the handlers of a feature that a
// workspace may have turned off check it before calling the store.

// WorkspaceLimitsFunc returns a workspace's overrides from the tenant
// directory. ENOTFOUND (a workspace the directory does not list: it
// predates the directory, or the directory runs without placements) means
// none.
type WorkspaceLimitsFunc func(ctx context.Context, workspaceID string) (parley.WorkspaceLimits, error)

// workspaceLimits resolves overrides and counts the lookups that failed.
type workspaceLimits struct {
	fn       WorkspaceLimitsFunc // nil: no overrides, the global defaults
	caps     parley.Caps         // the store's caps, with defaults: what boot reports
	failures prometheus.Counter
}

func newWorkspaceLimits(cfg Config) *workspaceLimits {
	l := &workspaceLimits{fn: cfg.WorkspaceLimits, caps: cfg.Caps.WithDefaults()}
	l.failures = promutil.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "parley_workspace_limits_lookup_failures_total",
		Help: "Lookups of a workspace's limits and features in the tenant directory that failed; the request went on with the global defaults.",
	}))
	return l
}

// lookup is the parley.LimitsLookup requests carry. A failure of the
// directory must not fail the request: it gets the global defaults,
// logged by the caller's metric alone (the directory client logs its own
// outage).
func (l *workspaceLimits) lookup(ctx context.Context, workspaceID string) parley.WorkspaceLimits {
	if l.fn == nil {
		return parley.WorkspaceLimits{}
	}
	wl, err := l.fn(ctx, workspaceID)
	if err != nil {
		if parley.ErrorCode(err) != parley.ENOTFOUND {
			l.failures.Inc()
		}
		return parley.WorkspaceLimits{}
	}
	return wl
}

// withLimits returns r with the lookup in its context, remembering each
// workspace's answer for the request: the handler's feature check and the
// store's caps then see the same overrides, for one lookup.
func (l *workspaceLimits) withLimits(r *http.Request) *http.Request {
	if l.fn == nil {
		return r
	}
	var (
		mu   sync.Mutex
		seen map[string]parley.WorkspaceLimits
	)
	return r.WithContext(parley.WithLimitsLookup(r.Context(), func(ctx context.Context, ws string) parley.WorkspaceLimits {
		mu.Lock()
		wl, ok := seen[ws]
		mu.Unlock()
		if ok {
			return wl
		}
		wl = l.lookup(ctx, ws)
		mu.Lock()
		defer mu.Unlock()
		if seen == nil {
			seen = map[string]parley.WorkspaceLimits{}
		}
		seen[ws] = wl
		return wl
	}))
}

// feature returns EFEATUREOFF when workspaceID has feature turned off.
func (s *Server) feature(ctx context.Context, workspaceID, feature string) error {
	return parley.LimitsFor(ctx, workspaceID).CheckFeature(feature)
}

// botFeature refuses a bot token's call when its workspace has turned
// integrations off: the bot exists but may not act until they are back on.
func (s *Server) botFeature(r *http.Request, c *caller) error {
	if s.wlimits.fn == nil || s.integ.store == nil {
		return nil
	}
	ws, err := s.integ.store.BotWorkspace(r.Context(), c.UserID)
	if err != nil {
		if parley.ErrorCode(err) == parley.ENOTFOUND {
			return nil // not a bot any more: its calls fail on their own
		}
		return err
	}
	return s.feature(r.Context(), ws, parley.FeatureIntegrations)
}
