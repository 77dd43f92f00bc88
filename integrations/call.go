package integrations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"parley"
)

// DefaultTimeout is how long a command or outgoing webhook URL has to
// answer (Slack gives three seconds too; slower work answers later
// through response_url).
const DefaultTimeout = 3 * time.Second

// maxAnswer bounds what is read of an answer.
const maxAnswer = 1 << 20

// Response types of an answer.
const (
	Ephemeral = "ephemeral"
	InChannel = "in_channel"
)

// Answer is what a command URL said, rendered.
type Answer struct {
	// ResponseType is Ephemeral or InChannel.
	ResponseType string
	// Text is the answer in Parley markdown; empty for a bare 200 (an
	// acknowledgement: the real answer may come through response_url).
	Text string
	// Profile is the answer's username, icon_emoji and icon_url, as sent
	// (nil when it has none): the caller validates it
	// (parley.ValidateBotProfile) before it shows anywhere.
	Profile *parley.BotProfile
}

// CallError is a failed call, with a message meant for the person who
// typed the command.
type CallError struct {
	Msg string
	Err error
}

func (e *CallError) Error() string { return e.Msg }
func (e *CallError) Unwrap() error { return e.Err }

// Caller sends signed requests. The zero value works: DefaultTimeout,
// http.DefaultTransport, time.Now.
type Caller struct {
	Client  *http.Client // nil: a client with no redirects followed
	Timeout time.Duration
	Now     func() time.Time
}

var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// Post sends form to target, signed with secret, and reads the answer.
func (c *Caller) Post(ctx context.Context, target, secret string, form url.Values) (*Answer, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	client := c.Client
	if client == nil {
		client = noRedirects
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body := []byte(form.Encode())
	ts := now().Unix()
	sig := Sign(secret, ts, body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(string(body)))
	if err != nil {
		return nil, &CallError{Msg: "the integration's URL is not valid", Err: err}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("User-Agent", "Parley-Integrations/1")
	tsText := strconv.FormatInt(ts, 10)
	req.Header.Set(HeaderTimestamp, tsText)
	req.Header.Set(HeaderSignature, sig)
	req.Header.Set(SlackHeaderTimestamp, tsText)
	req.Header.Set(SlackHeaderSignature, sig)
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, &CallError{Msg: fmt.Sprintf("the integration did not answer within %s", timeout), Err: err}
		}
		return nil, &CallError{Msg: "the integration could not be reached", Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		if ctx.Err() != nil {
			return nil, &CallError{Msg: fmt.Sprintf("the integration did not answer within %s", timeout), Err: err}
		}
		return nil, &CallError{Msg: "the integration's answer was cut off", Err: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &CallError{Msg: fmt.Sprintf("the integration failed (HTTP %d)", resp.StatusCode)}
	}
	return ParseAnswer(resp.Header.Get("Content-Type"), raw)
}

// ParseAnswer reads a command's answer: a JSON payload (response_type,
// text, blocks, attachments), plain text (shown to the caller only, as
// Slack does), or nothing (an acknowledgement).
func ParseAnswer(contentType string, raw []byte) (*Answer, error) {
	body := strings.TrimSpace(string(raw))
	if body == "" {
		return &Answer{ResponseType: Ephemeral}, nil
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt != "application/json" && !strings.HasPrefix(body, "{") {
		return &Answer{ResponseType: Ephemeral, Text: body}, nil
	}
	var p Payload
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		return nil, &CallError{Msg: "the integration answered with JSON that could not be read", Err: err}
	}
	text, err := Render(&p)
	if err != nil {
		text = ""
	}
	rt := Ephemeral
	if p.ResponseType == InChannel {
		rt = InChannel
	}
	return &Answer{ResponseType: rt, Text: text, Profile: p.Profile()}, nil
}

// MatchTrigger returns the trigger word that text starts with (as a whole
// word: "deploy" matches "deploy api", not "deployment"), and whether one
// did.
func MatchTrigger(words []string, text string) (string, bool) {
	t := strings.TrimLeft(text, " \t")
	for _, w := range words {
		if w == "" || !strings.HasPrefix(t, w) {
			continue
		}
		rest := t[len(w):]
		if rest == "" || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\n' {
			return w, true
		}
	}
	return "", false
}

// ParseCommand splits "/name args" into the command name (lower case,
// without the slash) and its text; ok is false when text is no command.
func ParseCommand(text string) (name, args string, ok bool) {
	t := strings.TrimLeft(text, " \t")
	if !strings.HasPrefix(t, "/") || strings.HasPrefix(t, "//") {
		return "", "", false
	}
	name, args, _ = strings.Cut(t[1:], " ")
	if name == "" {
		return "", "", false
	}
	return strings.ToLower(name), strings.TrimSpace(args), true
}
