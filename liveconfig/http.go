package liveconfig

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"parley"
)

// maxBody bounds a PUT /config body.
const maxBody = 64 << 10

// Handler serves the live configuration on the admin listener (operators
// only, like /metrics):
//
//	GET /config                    the current configuration of this node
//	PUT /config[?dry_run=true]     {"collapsed_threads": false, …}: change
//	                               the given fields; answers a Change
func (m *Manager) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /config", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, m.LiveConfig())
	})
	mux.HandleFunc("PUT /config", func(w http.ResponseWriter, r *http.Request) {
		dry := false
		if v := r.URL.Query().Get("dry_run"); v != "" {
			var err error
			if dry, err = strconv.ParseBool(v); err != nil {
				writeError(w, parley.Errorf(parley.EINVALID, "dry_run must be true or false"))
				return
			}
		}
		var p Patch
		dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			msg := err.Error()
			var pe *parley.Error
			if errors.As(err, &pe) { // a value's own check, e.g. a rate's text
				msg = pe.Message
			}
			writeError(w, parley.Errorf(parley.EINVALID, "bad configuration body: %s", msg))
			return
		}
		ch, err := m.Update(r.Context(), p, dry)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, ch)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	code := parley.ErrorCode(err)
	switch code {
	case parley.EINVALID:
		status = http.StatusBadRequest
	case parley.EUNAVAILABLE:
		status = http.StatusServiceUnavailable
	}
	msg := err.Error()
	var pe *parley.Error
	if errors.As(err, &pe) {
		msg = pe.Message
	}
	if status == http.StatusInternalServerError {
		msg = "internal error"
	}
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}
