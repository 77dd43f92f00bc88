// Package client is a Go client for a Parley server: typed calls for the
// HTTP API under /api/v1 (returning the domain types of package parley) and
// a gateway connection (Conn) that keeps a WebSocket session alive across
// drops, resumes it, falls back to /sync catch-up, and hands the application
// every channel's durable events in seq order with no gaps and no
// duplicates. Tests, the load tester and bots use it.
//
// It speaks only the public client contract (PROTOCOL.md, docs/protocol.md):
// it must not import the server's packages (httpapi, gateway, sqlstore) nor
// rely on anything a third-party client could not see.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of a Client.
const (
	DefaultTimeout      = 30 * time.Second // per HTTP attempt
	DefaultMaxRetries   = 3                // retries after the first attempt
	DefaultMaxRetryWait = 10 * time.Second // longest single wait before a retry
	// maxResponseBytes bounds a response body read into memory.
	maxResponseBytes = 64 << 20
	apiPrefix        = "/api/v1"
)

// Client calls one Parley server as one user (or anonymously before Signup
// or Login). It is safe for concurrent use. Clients for different users may
// share an http.Client (WithHTTPClient) and, for their gateway connections,
// one process-wide WebSocket engine.
type Client struct {
	bases        []string     // scheme://host[:port][/path], no trailing slash; bases[0] is the primary
	cur          atomic.Int32 // index in bases of the server in use
	wsURL        string       // the gateway URL override ("" for none)
	hc           *http.Client
	maxRetries   int
	maxRetryWait time.Duration
	log          *slog.Logger

	mu    sync.Mutex
	token string // guarded by mu
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the client send its requests with hc (its Timeout
// bounds each attempt). The default is a client with DefaultTimeout over a
// clone of http.DefaultTransport that keeps more idle connections per host.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithToken starts the client with a bearer token (one from an earlier
// Signup or Login).
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithWSURL overrides the gateway URL (by default ws:// or wss:// on the base
// URL's host, path /api/v1/gateway).
func WithWSURL(u string) Option { return func(c *Client) { c.wsURL = u } }

// WithRetry sets how often a call throttled (429) or shed (503), or failed
// in transit, is retried — only calls that are safe to repeat — and the
// longest wait before one retry: a Retry-After above maxWait is returned to
// the caller as an *APIError instead of being waited out. maxRetries 0
// disables retries.
func WithRetry(maxRetries int, maxWait time.Duration) Option {
	return func(c *Client) { c.maxRetries, c.maxRetryWait = max(maxRetries, 0), maxWait }
}

// WithFallbackURLs adds base URLs of other nodes of the same cluster. A
// call that fails in transit is retried (when safe to repeat) on the next
// one, and gateway connections move through their gateways in turn.
func WithFallbackURLs(baseURLs ...string) Option {
	return func(c *Client) {
		for _, b := range baseURLs {
			c.bases = append(c.bases, strings.TrimRight(b, "/"))
		}
	}
}

// WithLogger sets the logger of the client and of its gateway connections
// (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// New returns a client for the server at baseURL, such as
// "http://127.0.0.1:8080" (with or without a trailing slash).
func New(baseURL string, opts ...Option) *Client {
	c := &Client{
		bases:        []string{strings.TrimRight(baseURL, "/")},
		maxRetries:   DefaultMaxRetries,
		maxRetryWait: DefaultMaxRetryWait,
	}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		c.hc = &http.Client{Timeout: DefaultTimeout, Transport: tr}
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.maxRetryWait <= 0 {
		c.maxRetryWait = DefaultMaxRetryWait
	}
	return c
}

// gatewayURL derives the gateway's WebSocket URL from an HTTP base URL.
func gatewayURL(base string) string {
	switch {
	case strings.HasPrefix(base, "https://"):
		return "wss://" + strings.TrimPrefix(base, "https://") + apiPrefix + "/gateway"
	case strings.HasPrefix(base, "http://"):
		return "ws://" + strings.TrimPrefix(base, "http://") + apiPrefix + "/gateway"
	}
	return base + apiPrefix + "/gateway"
}

// BaseURL returns the base URL of the server in use.
func (c *Client) BaseURL() string { return c.bases[int(c.cur.Load())%len(c.bases)] }

// WSURL returns the gateway URL that Connect tries first.
func (c *Client) WSURL() string { return c.gatewayURLs()[0] }

// gatewayURLs are the gateways Connect uses by default: the override, or
// each base URL's gateway.
func (c *Client) gatewayURLs() []string {
	if c.wsURL != "" {
		return []string{c.wsURL}
	}
	out := make([]string, len(c.bases))
	for i, b := range c.bases {
		out[i] = gatewayURL(b)
	}
	return out
}

// Token returns the current bearer token ("" when logged out).
func (c *Client) Token() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.token
}

// SetToken replaces the bearer token used by later calls and by gateway
// identifies and resumes.
func (c *Client) SetToken(token string) {
	c.mu.Lock()
	c.token = token
	c.mu.Unlock()
}

// APIError is a failed API call: the HTTP status and the error body of the
// contract, {"error": {"code", "message"}}. RetryAfter is the server's
// Retry-After on 429 and 503 (0 when absent).
type APIError struct {
	Status     int
	Code       string // a parley error code such as "not_found"
	Message    string
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	return fmt.Sprintf("parley api: %d %s: %s", e.Status, e.Code, e.Message)
}

// ErrorCode returns the code of the *APIError in err's chain ("" if none).
func ErrorCode(err error) string {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// call describes one API request.
type call struct {
	method string
	path   string // below /api/v1, already escaped
	query  url.Values
	body   any // encoded as JSON when not nil
	// idempotent calls may be sent again after a 429, a 503 or a failure in
	// transit; the others are sent once.
	idempotent bool
	noAuth     bool
}

// do sends the call and decodes a successful response into out (when not
// nil). It retries idempotent calls within the client's retry budget.
func (c *Client) do(ctx context.Context, cl call, out any) error {
	var body []byte
	if cl.body != nil {
		var err error
		if body, err = json.Marshal(cl.body); err != nil {
			return fmt.Errorf("%s %s: encode body: %w", cl.method, cl.path, err)
		}
	}
	suffix := apiPrefix + cl.path
	if len(cl.query) > 0 {
		suffix += "?" + cl.query.Encode()
	}
	for attempt := 0; ; attempt++ {
		i := c.cur.Load()
		err := c.once(ctx, cl, c.bases[int(i)%len(c.bases)]+suffix, body, out)
		if err == nil {
			return nil
		}
		if isTransient(err) && len(c.bases) > 1 {
			c.cur.CompareAndSwap(i, (i+1)%int32(len(c.bases))) // try the next node
		}
		if !cl.idempotent || attempt >= c.maxRetries || ctx.Err() != nil {
			return err
		}
		var wait time.Duration
		var ae *APIError
		switch {
		case errors.As(err, &ae):
			if ae.Status != http.StatusTooManyRequests && ae.Status != http.StatusServiceUnavailable {
				return err
			}
			if ae.RetryAfter > c.maxRetryWait {
				return err // longer than we are willing to wait: the caller decides
			}
			wait = ae.RetryAfter
			if wait <= 0 {
				wait = retryBackoff(attempt)
			}
		case isTransient(err):
			wait = retryBackoff(attempt)
		default:
			return err
		}
		t := time.NewTimer(min(wait, c.maxRetryWait))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// once sends one attempt.
func (c *Client) once(ctx context.Context, cl call, target string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, target, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", cl.method, cl.path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if tok := c.Token(); tok != "" && !cl.noAuth {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return &transportError{fmt.Errorf("%s %s: %w", cl.method, cl.path, err)}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes))
	if err != nil {
		return &transportError{fmt.Errorf("%s %s: read response: %w", cl.method, cl.path, err)}
	}
	if res.StatusCode >= 300 {
		return apiError(res, raw)
	}
	if out == nil || len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: decode response: %w", cl.method, cl.path, err)
	}
	return nil
}

// apiError builds the *APIError of a failed response.
func apiError(res *http.Response, raw []byte) *APIError {
	e := &APIError{Status: res.StatusCode}
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message = body.Error.Code, body.Error.Message
	} else {
		// Not the contract's shape (a proxy, say): keep what we can.
		e.Code = "http_" + strconv.Itoa(res.StatusCode)
		e.Message = strings.TrimSpace(string(raw[:min(len(raw), 200)]))
		if e.Message == "" {
			e.Message = http.StatusText(res.StatusCode)
		}
	}
	e.RetryAfter = parseRetryAfter(res.Header.Get("Retry-After"), time.Now())
	return e
}

// parseRetryAfter reads Retry-After as delay-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(min(n, 1<<20)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// transportError is a failure before a response was read: the request may or
// may not have reached the server.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// isTransient reports whether err is a failure in transit (the caller has
// already ruled out its own cancelled context).
func isTransient(err error) bool {
	var te *transportError
	return errors.As(err, &te)
}

// retryBackoff is the wait before retry n (0-based) when the server named
// none: 100 ms doubling, with full jitter.
func retryBackoff(n int) time.Duration {
	d := 100 * time.Millisecond << min(n, 6)
	return d/2 + rand.N(d/2+1)
}

// esc escapes one path segment.
func esc(s string) string { return url.PathEscape(s) }
