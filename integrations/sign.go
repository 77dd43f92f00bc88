package integrations

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Request signing (docs/integrations.md, "Verifying requests"): Parley
// signs every request it sends to a command or outgoing-webhook URL the
// way Slack does, so that an app written for Slack verifies it unchanged.
//
//	basestring = "v0:" + timestamp + ":" + body
//	signature  = "v0=" + hex(HMAC-SHA256(signing_secret, basestring))
//
// The timestamp (Unix seconds) and the signature travel in the headers
// below, under Parley's names and Slack's.
const (
	HeaderTimestamp      = "X-Parley-Request-Timestamp"
	HeaderSignature      = "X-Parley-Signature"
	SlackHeaderTimestamp = "X-Slack-Request-Timestamp"
	SlackHeaderSignature = "X-Slack-Signature"
	// MaxSkew is how old (or how far ahead) a timestamp Verify accepts:
	// a captured request cannot be replayed later than this.
	MaxSkew = 5 * time.Minute
)

// Sign returns the signature of body sent at ts with secret.
func Sign(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:"))
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte(":"))
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

// Errors of Verify.
var (
	ErrStale        = errors.New("request timestamp is missing or too far from now")
	ErrBadSignature = errors.New("request signature does not match")
)

// Verify checks a request the way a receiving app should: the timestamp
// within MaxSkew of now, and the signature equal (in constant time) to
// Sign's over the exact body received.
func Verify(secret, timestamp, signature string, body []byte, now time.Time) error {
	ts, err := strconv.ParseInt(strings.TrimSpace(timestamp), 10, 64)
	if err != nil {
		return ErrStale
	}
	if d := now.Sub(time.Unix(ts, 0)); d > MaxSkew || d < -MaxSkew {
		return ErrStale
	}
	if !hmac.Equal([]byte(Sign(secret, ts, body)), []byte(signature)) {
		return ErrBadSignature
	}
	return nil
}

// NewSecret returns a random secret: 32 bytes, hex (webhook URL secrets,
// signing secrets, response_url tokens).
func NewSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("integrations: no randomness: " + err.Error()) // crypto/rand never fails on supported systems
	}
	return hex.EncodeToString(b)
}
