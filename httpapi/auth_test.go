package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"parley"
	"parley/internal/edge"
)

// signupBody returns a valid signup request for a new handle.
func signupBody(handle string) map[string]string {
	return map[string]string{"email": handle + "@Example.com", "password": testPassword, "name": "Person " + handle, "handle": handle}
}

func TestSignupLoginLogout(t *testing.T) {
	e := newEnv(t)
	h := "ann-" + uniq()
	var up authResponse
	e.must(http.StatusCreated, "POST", "/auth/signup", "", signupBody(h), &up)
	if up.Token == "" || up.User.ID == "" || up.User.Handle != h || up.User.Email != h+"@example.com" {
		t.Fatalf("signup answer %+v", up)
	}
	var me parley.User
	e.must(http.StatusOK, "GET", "/me", up.Token, nil, &me)
	if me.ID != up.User.ID {
		t.Errorf("GET /me = %s, want %s", me.ID, up.User.ID)
	}

	var in authResponse
	e.must(http.StatusOK, "POST", "/auth/login", "", map[string]string{"email": h + "@EXAMPLE.com", "password": testPassword}, &in)
	if in.Token == "" || in.Token == up.Token || in.User.ID != up.User.ID {
		t.Fatalf("login answer %+v", in)
	}

	// Logout revokes that token only.
	e.must(http.StatusNoContent, "POST", "/auth/logout", in.Token, nil, nil)
	e.must(http.StatusUnauthorized, "GET", "/me", in.Token, nil, nil)
	e.must(http.StatusOK, "GET", "/me", up.Token, nil, nil)
}

func TestSignupErrors(t *testing.T) {
	e := newEnv(t)
	h := "bob-" + uniq()
	e.must(http.StatusCreated, "POST", "/auth/signup", "", signupBody(h), nil)

	dupEmail := signupBody("other-" + uniq())
	dupEmail["email"] = h + "@example.com"
	dupHandle := signupBody(h)
	dupHandle["email"] = "fresh-" + uniq() + "@example.com"
	short := signupBody("short-" + uniq())
	short["password"] = "1234567"
	badHandle := signupBody("Bad Handle")

	for name, tc := range map[string]struct {
		body any
		want int
	}{
		"duplicate email":  {dupEmail, http.StatusConflict},
		"duplicate handle": {dupHandle, http.StatusConflict},
		"short password":   {short, http.StatusBadRequest},
		"bad handle":       {badHandle, http.StatusBadRequest},
		"bad JSON":         {"{", http.StatusBadRequest},
		"wrong type":       {`{"email": ["a"]}`, http.StatusBadRequest},
		"empty body":       {"", http.StatusBadRequest},
	} {
		r := e.call("POST", "/auth/signup", "", tc.body)
		if r.Status != tc.want || StatusOf(r.errCode()) != tc.want {
			t.Errorf("%s: %d %s, want %d", name, r.Status, r.Body, tc.want)
		}
	}
}

func TestLoginFailuresAreGeneric(t *testing.T) {
	e := newEnv(t)
	a := mustAccount(t, e.store, "cat")
	wrong := e.must(http.StatusUnauthorized, "POST", "/auth/login", "", map[string]string{"email": a.Email, "password": "wrong password"}, nil)
	unknown := e.must(http.StatusUnauthorized, "POST", "/auth/login", "", map[string]string{"email": "nobody-" + uniq() + "@example.com", "password": "wrong password"}, nil)
	garbage := e.must(http.StatusUnauthorized, "POST", "/auth/login", "", map[string]string{"email": "not an email", "password": "x"}, nil)
	if string(wrong.Body) != string(unknown.Body) || string(wrong.Body) != string(garbage.Body) {
		t.Errorf("login failures differ:\n%s\n%s\n%s", wrong.Body, unknown.Body, garbage.Body)
	}
	e.must(http.StatusBadRequest, "POST", "/auth/login", "", `{"email": 1}`, nil)
}

func TestLoginRateLimitPerAccount(t *testing.T) {
	e := newEnv(t) // defaults: 5 per minute, burst 10, per (account, IP)
	a := mustAccount(t, e.store, "dan")
	creds := map[string]string{"email": a.Email, "password": testPassword}
	for range 10 { // successful attempts count too
		e.must(http.StatusOK, "POST", "/auth/login", "", creds, nil)
	}
	r := e.must(http.StatusTooManyRequests, "POST", "/auth/login", "", creds, nil)
	if r.errCode() != parley.ERATELIMITED {
		t.Errorf("429 body %s", r.Body)
	}
	secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || secs < 1 || secs > 12 {
		t.Errorf("Retry-After %q, want 1..12 seconds", r.Header.Get("Retry-After"))
	}
	// The same account by another spelling is the same account.
	upper := map[string]string{"email": " " + a.Email + " ", "password": "wrong"}
	e.must(http.StatusTooManyRequests, "POST", "/auth/login", "", upper, nil)
	// Other accounts are unaffected; after Retry-After the account may try
	// again.
	b := mustAccount(t, e.store, "eve")
	e.must(http.StatusOK, "POST", "/auth/login", "", map[string]string{"email": b.Email, "password": testPassword}, nil)
	e.clock.Advance(time.Duration(secs) * time.Second)
	e.must(http.StatusOK, "POST", "/auth/login", "", creds, nil)
}

func TestLoginRateLimitPerIP(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Rates.LoginIP = Rate{PerMinute: 1, Burst: 3} })
	for range 3 {
		e.must(http.StatusUnauthorized, "POST", "/auth/login", "", map[string]string{"email": "x-" + uniq() + "@example.com", "password": "guess"}, nil)
	}
	r := e.must(http.StatusTooManyRequests, "POST", "/auth/login", "", map[string]string{"email": "y-" + uniq() + "@example.com", "password": "guess"}, nil)
	if r.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
}

func TestForwardedForOnlyWhenTrusted(t *testing.T) {
	login := func(e *env, ip string) int {
		body := strings.NewReader(`{"email":"z-` + uniq() + `@example.com","password":"guess"}`)
		req, _ := http.NewRequest("POST", e.srv.URL+Prefix+"/auth/login", body)
		req.Header.Set("X-Forwarded-For", "203.0.113.9, "+ip)
		res, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	limited := func(c *Config) { c.Rates.LoginIP = Rate{PerMinute: 1, Burst: 1} }

	trusted := newEnv(t, limited, func(c *Config) { c.TrustedProxies = edge.MustProxies("127.0.0.1", "::1") })
	if got := login(trusted, "198.51.100.1"); got != http.StatusUnauthorized {
		t.Fatalf("first login: %d", got)
	}
	if got := login(trusted, "198.51.100.2"); got != http.StatusUnauthorized {
		t.Errorf("another proxied client was limited: %d", got)
	}
	if got := login(trusted, "198.51.100.2"); got != http.StatusTooManyRequests {
		t.Errorf("same proxied client again: %d, want 429", got)
	}

	direct := newEnv(t, limited)
	login(direct, "198.51.100.1")
	if got := login(direct, "198.51.100.2"); got != http.StatusTooManyRequests {
		t.Errorf("untrusted X-Forwarded-For changed the key: %d, want 429", got)
	}
}

func TestSignupRateLimitPerIP(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Rates.SignupIP = Rate{PerMinute: 1, Burst: 2} })
	// Invalid attempts count as well: they are cheap to send.
	e.must(http.StatusBadRequest, "POST", "/auth/signup", "", map[string]string{"email": "bad"}, nil)
	e.must(http.StatusCreated, "POST", "/auth/signup", "", signupBody("fay-"+uniq()), nil)
	r := e.must(http.StatusTooManyRequests, "POST", "/auth/signup", "", signupBody("gus-"+uniq()), nil)
	if r.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
}

func TestSessionExpires(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SessionTTL = time.Hour })
	var up authResponse
	e.must(http.StatusCreated, "POST", "/auth/signup", "", signupBody("hal-"+uniq()), &up)
	e.must(http.StatusOK, "GET", "/me", up.Token, nil, nil)
	e.clock.Advance(time.Hour + time.Second)
	r := e.must(http.StatusUnauthorized, "GET", "/me", up.Token, nil, nil)
	if r.errCode() != parley.EUNAUTHORIZED {
		t.Errorf("body %s", r.Body)
	}
}
