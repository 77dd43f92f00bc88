package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// Unsubscribe tokens: the user id and an HMAC-SHA256 of it under the
// server's secret (--email-secret), so an unsubscribe link works without a
// login and cannot be made for another user. They do not expire: an old
// email's link still turns email off.

var b64 = base64.RawURLEncoding

func mac(secret []byte, userID string) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("parley-unsubscribe\x00"))
	h.Write([]byte(userID))
	return h.Sum(nil)
}

// UnsubscribeToken returns the token of userID's unsubscribe link.
func UnsubscribeToken(secret []byte, userID string) string {
	return b64.EncodeToString([]byte(userID)) + "." + b64.EncodeToString(mac(secret, userID))
}

// VerifyUnsubscribeToken returns the user id a token was made for, or
// false when it was not made with secret.
func VerifyUnsubscribeToken(secret []byte, token string) (string, bool) {
	if len(secret) == 0 {
		return "", false
	}
	idPart, sigPart, ok := strings.Cut(token, ".")
	if !ok {
		return "", false
	}
	id, err := b64.DecodeString(idPart)
	if err != nil || len(id) == 0 {
		return "", false
	}
	sig, err := b64.DecodeString(sigPart)
	if err != nil || !hmac.Equal(sig, mac(secret, string(id))) {
		return "", false
	}
	return string(id), true
}
