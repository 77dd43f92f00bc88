package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"parley"
	"parley/storeguard"
)

// statusByCode is the one table from error codes to HTTP statuses.
var statusByCode = map[string]int{
	parley.EINVALID:      http.StatusBadRequest,
	parley.EUNAUTHORIZED: http.StatusUnauthorized,
	parley.EFORBIDDEN:    http.StatusForbidden,
	parley.EFEATUREOFF:   http.StatusForbidden,
	parley.ENOTFOUND:     http.StatusNotFound,
	parley.ECONFLICT:     http.StatusConflict,
	parley.ELIMIT:        http.StatusConflict,
	parley.ETOOLARGE:     http.StatusRequestEntityTooLarge,
	parley.ERATELIMITED:  http.StatusTooManyRequests,
	parley.EUNAVAILABLE:  http.StatusServiceUnavailable,
	parley.EINTERNAL:     http.StatusInternalServerError,
}

// StatusOf returns the HTTP status for an error code (500 for unknown codes).
func StatusOf(code string) int {
	if st, ok := statusByCode[code]; ok {
		return st
	}
	return http.StatusInternalServerError
}

type errorPayload struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func errorBody(code, message string) errorPayload {
	return errorPayload{errorDetail{Code: code, Message: message}}
}

// writeError reports err to the client: its code's status and message, with
// Retry-After on 429 and 503. Internal errors are logged and their text is
// kept from the client.
func (s *Server) writeError(w *statusWriter, r *http.Request, err error) {
	if w.code != 0 {
		// The response has begun; all we can do is log.
		s.log.Error("error after response started", "method", r.Method, "path", r.URL.Path, "err", err)
		return
	}
	if isMaxBytes(err) {
		err = parley.Errorf(parley.ETOOLARGE, "request body is larger than %d bytes", MaxBodyBytes)
	}
	code := parley.ErrorCode(err)
	if code == parley.EINTERNAL && storeguard.Lost(err) {
		// A broken database connection, met while the store guard is off
		// (it maps these itself when on): the database is unavailable,
		// not the request wrong.
		s.log.Warn("database connection failed", "method", r.Method, "path", r.URL.Path, "err", err)
		err = parley.Errorf(parley.EUNAVAILABLE, "the database connection failed; try again shortly")
		code = parley.EUNAVAILABLE
	}
	status := StatusOf(code)
	if code == parley.EINTERNAL || status == http.StatusInternalServerError {
		s.log.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		code = parley.EINTERNAL
	}
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		delay := time.Second
		var ra interface{ RetryAfter() time.Duration }
		if errors.As(err, &ra) {
			delay = ra.RetryAfter()
		}
		w.Header().Set("Retry-After", retrySeconds(delay))
	}
	writeJSON(w, status, errorBody(code, parley.ErrorMessage(err)))
}

// writeJSON writes v with the given status. The shared headers are set by
// the outer handler.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// noContent answers 204.
func noContent(w http.ResponseWriter) error {
	w.Header().Del("Content-Type")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// decode reads one JSON value from the body into v. Unknown fields are
// ignored; malformed JSON, wrong types, trailing data and strings holding
// NUL or invalid UTF-8 (checkJSONText) are 400; a body over MaxBodyBytes is
// 413. An empty body is 400 unless optional.
func decode(r *http.Request, v any, optional bool) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		if isMaxBytes(err) {
			return err
		}
		return parley.Errorf(parley.EINVALID, "read request body: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			if optional {
				return nil
			}
			return parley.Errorf(parley.EINVALID, "request body is required")
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return parley.Errorf(parley.EINVALID, "field %s: expected %s", te.Field, te.Type)
		}
		return parley.Errorf(parley.EINVALID, "malformed JSON body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return parley.Errorf(parley.EINVALID, "unexpected data after the JSON body")
	}
	return checkJSONText(body)
}

func isMaxBytes(err error) bool {
	var mb *http.MaxBytesError
	return errors.As(err, &mb)
}

// queryInt reads an optional integer query parameter (0 when absent).
func queryInt(r *http.Request, name string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, parley.Errorf(parley.EINVALID, "query parameter %s must be an integer", name)
	}
	return n, nil
}

// querySeq reads an optional non-negative seq query parameter.
func querySeq(r *http.Request, name string) (int64, error) {
	n, err := queryInt(r, name)
	if err == nil && n < 0 {
		err = parley.Errorf(parley.EINVALID, "query parameter %s must not be negative", name)
	}
	return n, err
}

// queryAfter reads after_seq, or else cursor: on the endpoints that page
// forward by seq, next_cursor is the after_seq of the next page, so generic
// cursor paging works as well.
func queryAfter(r *http.Request) (int64, error) {
	if r.URL.Query().Has("after_seq") {
		return querySeq(r, "after_seq")
	}
	return querySeq(r, "cursor")
}

// queryLimit reads limit; the store clamps it to the paging bounds.
func queryLimit(r *http.Request) (int, error) {
	n, err := queryInt(r, "limit")
	if err != nil {
		return 0, err
	}
	return int(max(min(n, 1<<30), -1)), nil
}
