package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// TestServeLimits: the real binary keys per-IP limits on the client behind
// --trusted-proxies, starts at the --rate-* flags, and `parley config set
// rate_*` changes a limit while it runs.
func TestServeLimits(t *testing.T) {
	p := startParley(t, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--data", t.TempDir(),
		"--trusted-proxies", "127.0.0.1", "--rate-signup-ip", "1/min,burst=1")
	n := 0
	signup := func(from string) int {
		t.Helper()
		n++
		body, _ := json.Marshal(map[string]string{"email": "u" + strings.Repeat("x", n) + "@example.com",
			"password": "a long enough password", "name": "U", "handle": "u" + strings.Repeat("x", n)})
		req, _ := http.NewRequest("POST", strings.TrimSuffix(p.url, "/")+"/api/v1/auth/signup", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", from)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := signup("198.51.100.1"); got != http.StatusCreated {
		t.Fatalf("first signup: %d", got)
	}
	if got := signup("198.51.100.1"); got != http.StatusTooManyRequests {
		t.Fatalf("second signup from the same client: %d, want 429 (--rate-signup-ip)", got)
	}
	if got := signup("198.51.100.2"); got != http.StatusCreated {
		t.Fatalf("signup from another client behind the proxy: %d", got)
	}

	cmd := exec.Command(binPath, "config", "set", "rate_signup_ip=off", "--admin", p.admin)
	cmd.Env = cleanEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("config set: %v\n%s", err, out)
	}
	if got := signup("198.51.100.1"); got != http.StatusCreated {
		t.Fatalf("signup after rate_signup_ip=off: %d", got)
	}
	if code, body := adminGet(t, p, "/config"); code != 200 || !strings.Contains(body, `"rate_signup_ip":"off"`) || !strings.Contains(body, `"rate_message_user":"default"`) {
		t.Fatalf("GET /config: %d %s", code, body)
	}
	p.stop(t)
}
