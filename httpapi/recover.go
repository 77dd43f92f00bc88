package httpapi

import (
	"bufio"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/internal/promutil"
)

// Panic recovery. A panic in a handler must cost one request, not the
// process, and must not vanish: it is answered 500 with the API's error
// body (when nothing was written yet), logged with its stack and route, and
// counted in parley_panics_total{where="http"}. http.ErrAbortHandler is
// passed on, as net/http means it: abort the response, quietly.
//
// The API's routes recover inside wrap, so that their request metrics see
// the 500. Recover is for whatever else serves on a listener: the web
// client, the gateway's upgrade, the admin listener.

// Recover returns next with its panics recovered. panics is the counter
// vector of promutil.Panics; nil counts nowhere. log nil is slog.Default().
func Recover(log *slog.Logger, panics *prometheus.CounterVec, next http.Handler) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	if panics == nil {
		panics = promutil.Panics(nil)
	}
	counter := panics.WithLabelValues("http")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &recoverWriter{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				handlePanic(log, counter, rw, r, v, r.Pattern, rw.started)
			}
		}()
		next.ServeHTTP(rw, r)
	})
}

// handlePanic reports the panic v of a handler serving r on route: it must
// be called from the deferred function that recovered v (the stack is the
// panicking goroutine's). started says whether the response has begun; a
// 500 is written only when it has not.
func handlePanic(log *slog.Logger, counter prometheus.Counter, w http.ResponseWriter, r *http.Request, v any, route string, started bool) {
	if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
		panic(v)
	}
	counter.Inc()
	if route == "" {
		route = "unmatched"
	}
	log.Error("http handler panic", "method", r.Method, "route", route, "path", r.URL.Path,
		"panic", v, "stack", string(debug.Stack()))
	if started {
		return // the client sees a cut-short response; nothing else can be said
	}
	h := w.Header()
	for _, k := range []string{"Content-Length", "Content-Encoding", "ETag", "Last-Modified", "Content-Disposition"} {
		h.Del(k)
	}
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusInternalServerError, errorBody(parley.EINTERNAL, "internal error"))
}

// recoverWriter remembers whether the response has begun. It passes
// Hijack and Flush through (the gateway's WebSocket upgrade asserts
// http.Hijacker directly); a hijacked connection counts as begun.
type recoverWriter struct {
	http.ResponseWriter
	started bool
}

func (w *recoverWriter) WriteHeader(code int) {
	if code >= 200 { // 1xx are informational; the real header is still to come
		w.started = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recoverWriter) Write(b []byte) (int, error) {
	w.started = true
	return w.ResponseWriter.Write(b)
}

func (w *recoverWriter) Flush() {
	w.started = true
	http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *recoverWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.started = true
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *recoverWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
