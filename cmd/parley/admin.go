package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"parley"
	"parley/hot"
)

// healthTimeout bounds the store ping of a health check.
const healthTimeout = 2 * time.Second

// adminHandler serves the admin listener: Prometheus metrics, pprof, the
// live configuration (GET|PUT /config), the hot channels (GET /hot), the
// server operator's account switch (POST /users/{id}/deactivate and
// /reactivate, docs/lifecycle.md) and the liveness and readiness checks. It is meant for operators and scrapers only, which is why it has
// its own (loopback by default) address.
func (n *node) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(n.reg, promhttp.HandlerOpts{
		Registry:          n.reg, // promhttp's own error counters
		EnableOpenMetrics: true,
	}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/config", n.config.Handler())
	mux.Handle("GET /hot", hot.AdminHandler(n.hot))
	n.dir.adminRoutes(mux)
	mux.HandleFunc("POST /users/{id}/deactivate", n.operatorDeactivate(true))
	mux.HandleFunc("POST /users/{id}/reactivate", n.operatorDeactivate(false))
	mux.HandleFunc("GET /healthz", n.healthz)
	mux.HandleFunc("GET /readyz", n.readyz)
	return mux
}

// healthz says whether the process is alive and its store answers.
func (n *node) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	if err := n.store.Ping(ctx); err != nil {
		writeHealth(w, http.StatusServiceUnavailable, "store: "+err.Error())
		return
	}
	writeHealth(w, http.StatusOK, "")
}

// readyz says whether this node should get traffic: it serves, is not
// shutting down, its store answers and its bus is connected.
func (n *node) readyz(w http.ResponseWriter, r *http.Request) {
	if !n.ready.Load() {
		writeHealth(w, http.StatusServiceUnavailable, "not serving")
		return
	}
	if !n.bus.Connected() {
		writeHealth(w, http.StatusServiceUnavailable, "bus: not connected")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	if err := n.store.Ping(ctx); err != nil {
		writeHealth(w, http.StatusServiceUnavailable, "store: "+err.Error())
		return
	}
	writeHealth(w, http.StatusOK, "")
}

func writeHealth(w http.ResponseWriter, status int, problem string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	body := map[string]string{"status": "ok"}
	if problem != "" {
		body = map[string]string{"status": "unavailable", "error": problem}
	}
	json.NewEncoder(w).Encode(body)
}

// operatorDeactivate deactivates or reactivates an account as the server
// operator: whoever reaches the admin listener is one. It is for accounts
// no single workspace admin may switch (members of several workspaces).
func (n *node) operatorDeactivate(deactivated bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u, err := n.chat.OperatorSetDeactivated(r.Context(), r.PathValue("id"), deactivated)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if err != nil {
			status := http.StatusInternalServerError
			switch parley.ErrorCode(err) {
			case parley.ENOTFOUND:
				status = http.StatusNotFound
			case parley.EFORBIDDEN:
				status = http.StatusForbidden
			}
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		n.log.Info("operator changed an account", "user_id", u.ID, "deactivated", u.Deactivated)
		json.NewEncoder(w).Encode(u)
	}
}
