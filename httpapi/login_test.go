package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// deviceCookie returns the device cookie a successful login set.
func deviceCookie(t *testing.T, r *response) *http.Cookie {
	t.Helper()
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if strings.HasPrefix(c.Name, deviceCookiePrefix) {
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != Prefix+"/auth/login" {
				t.Errorf("device cookie %+v: want HttpOnly, SameSite=Strict, login path only", c)
			}
			return c
		}
	}
	t.Fatalf("no device cookie in %v", r.Header)
	return nil
}

// TestLoginAttackDoesNotLockOutOwner: an address hammering an account is
// refused quickly, while the owner logs in from elsewhere; a distributed
// attack is held by the per-account limit, and the owner's known device
// still gets in; a stolen device cookie buys only a few guesses.
func TestLoginAttackDoesNotLockOutOwner(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.TrustedProxies = loopbackProxy })
	owner := mustAccount(t, e.store, "owner")
	good := map[string]string{"email": owner.Email, "password": testPassword}
	bad := map[string]string{"email": owner.Email, "password": "not the password"}

	// The owner's laptop logged in once, long ago.
	known := deviceCookie(t, e.callFrom("203.0.113.5", "POST", "/auth/login", "", good))
	e.clock.Advance(24 * time.Hour)

	// One attacking address: refused after the (account, IP) burst.
	refused := false
	for i := range 20 {
		r := e.callFrom("198.51.100.66", "POST", "/auth/login", "", bad)
		if r.Status == http.StatusTooManyRequests {
			mustRateLimited(t, "attacker", r, 13*time.Second)
			if i > DefaultRates.LoginAccountIP.Burst {
				t.Errorf("attacker refused only after %d attempts", i)
			}
			refused = true
			break
		}
	}
	if !refused {
		t.Fatal("an address hammering one account was never refused")
	}
	// The owner, from a new device elsewhere, is not locked out.
	mustOK(t, "owner from another address", e.callFrom("203.0.113.77", "POST", "/auth/login", "", good))

	// A distributed attack: every address stays under its own limits, and
	// the per-account limit ends it.
	attempts := 0
	for ip := 1; ; ip++ {
		r := e.callFrom(fmt.Sprintf("192.0.2.%d", ip), "POST", "/auth/login", "", bad)
		if r.Status == http.StatusTooManyRequests {
			mustRateLimited(t, "distributed attack", r, 3*time.Second)
			break
		}
		if attempts++; attempts > DefaultRates.LoginAccount.Burst+5 {
			t.Fatalf("%d guesses from as many addresses and no refusal", attempts)
		}
	}
	// While it lasts the owner's known device still gets in (a new device
	// would wait a few seconds).
	mustRateLimited(t, "new device during the attack", e.callFrom("203.0.113.99", "POST", "/auth/login", "", good), 3*time.Second)
	r := e.callFrom("203.0.113.99", "POST", "/auth/login", "", good, known)
	mustOK(t, "known device during the attack", r)
	known = deviceCookie(t, r) // renewed by each login

	// A stolen device cookie is one more bucket, not a way around them.
	guesses := 0
	for ; guesses < 50; guesses++ {
		if r := e.callFrom(fmt.Sprintf("198.51.100.%d", 100+guesses), "POST", "/auth/login", "", bad, known); r.Status == http.StatusTooManyRequests {
			break
		}
	}
	if guesses > DefaultRates.LoginAccountIP.Burst {
		t.Errorf("a device cookie allowed %d guesses in one instant", guesses)
	}
	// A cookie for another account, or a forged one, is no known device.
	v := []byte(known.Value)
	if v[len(v)-1] != 'A' { // another base64 letter
		v[len(v)-1] = 'A'
	} else {
		v[len(v)-1] = 'B'
	}
	forged := &http.Cookie{Name: known.Name, Value: string(v)}
	mustRateLimited(t, "forged device cookie during the attack", e.callFrom("203.0.113.100", "POST", "/auth/login", "", good, forged), 3*time.Second)
}
