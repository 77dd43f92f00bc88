package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"parley"
	"parley/auth"
	"parley/internal/edge"
)

// Login limits without a lockout (docs/security.md). A guesser is held by
// three buckets: per client IP (one address spraying many accounts), per
// (account, IP) (one address on one account: tight) and per account (many
// addresses on one account: loose, the only one an owner elsewhere could
// share with an attacker). A device that has logged in to the account
// before shows a device cookie (auth.DeviceToken) and is counted in a
// bucket of its own instead, so an attack from elsewhere, however
// distributed, never locks the owner's known devices out; and a stolen
// device cookie still buys only that one bucket's guesses.

const (
	deviceCookiePrefix = "parley_device_"
	// deviceTTL is how long a device stays known without a login.
	deviceTTL = 365 * 24 * time.Hour
)

// deviceCookieName is per account, so that a browser used for several
// accounts is known for each; the name does not reveal the user id.
func deviceCookieName(userID string) string {
	sum := sha256.Sum256([]byte("parley device\x00" + userID))
	return deviceCookiePrefix + hex.EncodeToString(sum[:6])
}

func hasDeviceCookie(r *http.Request) bool {
	for _, c := range r.Cookies() {
		if strings.HasPrefix(c.Name, deviceCookiePrefix) {
			return true
		}
	}
	return false
}

// knownDevice returns the request's device token for u when it is valid.
func (s *Server) knownDevice(r *http.Request, u *parley.User, hash string) (string, bool) {
	c, err := r.Cookie(deviceCookieName(u.ID))
	if err != nil || !auth.VerifyDeviceToken(c.Value, hash, u.ID, s.now(), deviceTTL) {
		return "", false
	}
	return c.Value, true
}

// setDeviceCookie marks this device as known to u's account, for a year
// from this login. Only the login endpoint ever sees it.
func (s *Server) setDeviceCookie(w http.ResponseWriter, r *http.Request, u *parley.User, hash string) {
	http.SetCookie(w, &http.Cookie{
		Name:     deviceCookieName(u.ID),
		Value:    auth.DeviceToken(hash, u.ID, s.now()),
		Path:     Prefix + "/auth/login",
		MaxAge:   int(deviceTTL / time.Second),
		HttpOnly: true,
		Secure:   s.isHTTPS(r),
		SameSite: http.SameSiteStrictMode,
	})
}

// isHTTPS reports whether the client reached us over TLS, directly or
// through a trusted proxy that says so.
func (s *Server) isHTTPS(r *http.Request) bool {
	return r.TLS != nil ||
		s.proxies.FromTrustedProxy(r) && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// credentials is what a login learnt of the account.
type credentials struct {
	user *parley.User
	hash string
	err  error
}

// loginLimits takes a token for a login attempt on email, or returns the
// 429. With a device cookie it reads the account first (to check the
// cookie); the credentials read, if any, are returned for reuse.
func (s *Server) loginLimits(r *http.Request, email string) (*credentials, error) {
	now := s.now()
	var cred *credentials
	if hasDeviceCookie(r) {
		u, hash, err := s.store.UserCredentials(r.Context(), email)
		cred = &credentials{u, hash, err}
		if err == nil {
			if token, ok := s.knownDevice(r, u, hash); ok {
				return cred, s.rl.allow(now, TierAuth,
					limitCheck{s.rl.loginAccountIP, email + "\x00device\x00" + token, "login_device"})
			}
		}
	}
	ip := edge.IPKey(s.clientIP(r))
	return cred, s.rl.allow(now, TierAuth,
		limitCheck{s.rl.loginIP, ip, "login_ip"},
		limitCheck{s.rl.loginAccountIP, email + "\x00" + ip, "login_account_ip"},
		limitCheck{s.rl.loginAccount, email, "login_account"},
	)
}
