package integrations

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestSignVerify(t *testing.T) {
	now := time.Unix(1_732_500_000, 0)
	body := []byte("command=%2Fdeploy&text=api")
	sig := Sign("s3cret", now.Unix(), body)
	if len(sig) != len("v0=")+64 || !strings.HasPrefix(sig, "v0=") {
		t.Fatalf("signature %q has the wrong shape", sig)
	}
	if err := Verify("s3cret", "1732500000", sig, body, now.Add(time.Minute)); err != nil {
		t.Fatalf("verify: %v", err)
	}
	cases := map[string]error{
		"other secret": Verify("other", "1732500000", sig, body, now),
		"other body":   Verify("s3cret", "1732500000", sig, append(body, '!'), now),
		"other time":   Verify("s3cret", "1732500001", sig, body, now),
		"stale":        Verify("s3cret", "1732500000", sig, body, now.Add(MaxSkew+time.Second)),
		"future":       Verify("s3cret", "1732500000", sig, body, now.Add(-MaxSkew-time.Second)),
		"no timestamp": Verify("s3cret", "", sig, body, now),
	}
	for name, err := range cases {
		if err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}

// TestSignMatchesOpenSSL pins the signature to an outside computation, so
// that a receiver written from the docs verifies it.
func TestSignMatchesOpenSSL(t *testing.T) {
	// printf 'v0:1531420618:token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J' | openssl dgst -sha256 -hmac 8f742231b10e8888abcd99yyyzzz85a5
	got := Sign("8f742231b10e8888abcd99yyyzzz85a5", 1531420618, []byte("token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J"))
	want := "v0=" + opensslHMAC(t, "8f742231b10e8888abcd99yyyzzz85a5", "v0:1531420618:token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J")
	if got != want {
		t.Fatalf("Sign = %s, openssl says %s", got, want)
	}
}

// commandServer is a real HTTP endpoint that checks each request's
// signature and answers with reply.
func commandServer(t *testing.T, secret string, reply func(w http.ResponseWriter, r *http.Request, form url.Values)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := Verify(secret, r.Header.Get(HeaderTimestamp), r.Header.Get(HeaderSignature), body, time.Now()); err != nil {
			http.Error(w, "bad signature: "+err.Error(), http.StatusUnauthorized)
			return
		}
		if r.Header.Get(SlackHeaderSignature) != r.Header.Get(HeaderSignature) {
			http.Error(w, "slack header differs", http.StatusBadRequest)
			return
		}
		form, err := url.ParseQuery(string(body))
		if err != nil {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		reply(w, r, form)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestCallerAnswers(t *testing.T) {
	const secret = "topsecret"
	srv := commandServer(t, secret, func(w http.ResponseWriter, r *http.Request, form url.Values) {
		switch form.Get("text") {
		case "json":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"response_type":"in_channel","text":"Deployed *api*"}`)
		case "plain":
			io.WriteString(w, "only you see this")
		case "empty":
		case "500":
			http.Error(w, "boom", http.StatusInternalServerError)
		case "badjson":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"text": `)
		case "slow":
			<-r.Context().Done() // until the caller gives up
		}
	})
	c := &Caller{Timeout: 300 * time.Millisecond}
	call := func(text string) (*Answer, error) {
		return c.Post(context.Background(), srv.URL, secret, url.Values{"command": {"/x"}, "text": {text}})
	}
	if a, err := call("json"); err != nil || a.ResponseType != InChannel || a.Text != "Deployed **api**" {
		t.Errorf("json: %+v, %v", a, err)
	}
	if a, err := call("plain"); err != nil || a.ResponseType != Ephemeral || a.Text != "only you see this" {
		t.Errorf("plain: %+v, %v", a, err)
	}
	if a, err := call("empty"); err != nil || a.Text != "" {
		t.Errorf("empty: %+v, %v", a, err)
	}
	for text, want := range map[string]string{
		"500":     "the integration failed (HTTP 500)",
		"badjson": "the integration answered with JSON that could not be read",
		"slow":    "the integration did not answer within 300ms",
	} {
		_, err := call(text)
		var ce *CallError
		if !errors.As(err, &ce) || ce.Msg != want {
			t.Errorf("%s: err %v, want %q", text, err, want)
		}
	}
	// A wrong secret is refused by the receiver, as it should be.
	if _, err := (&Caller{}).Post(context.Background(), srv.URL, "wrong", url.Values{"text": {"json"}}); err == nil ||
		!strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("wrong secret: %v, want the receiver's 401", err)
	}
	// Nothing listens there.
	if _, err := c.Post(context.Background(), "http://127.0.0.1:1/", secret, nil); err == nil ||
		!strings.Contains(err.Error(), "could not be reached") {
		t.Errorf("unreachable: %v", err)
	}
}

// opensslHMAC computes HMAC-SHA256 with the openssl command line tool,
// an implementation that is not this package's.
func opensslHMAC(t *testing.T, key, msg string) string {
	t.Helper()
	path, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not installed")
	}
	cmd := exec.Command(path, "dgst", "-sha256", "-hmac", key)
	cmd.Stdin = strings.NewReader(msg)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("openssl: %v", err)
	}
	f := strings.Fields(string(out))
	return f[len(f)-1]
}
