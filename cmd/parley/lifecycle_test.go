package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// adminPost posts to the admin listener.
func adminPost(t *testing.T, p *proc, path string) (int, string) {
	t.Helper()
	resp, err := http.Post(strings.TrimSuffix(p.admin, "/")+path, "application/json", nil)
	if err != nil {
		t.Fatalf("admin POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestOperatorDeactivates: the server operator deactivates and reactivates
// an account on the admin listener of the real binary (docs/lifecycle.md);
// the account's token stops working and its login says why; an owner is
// refused.
func TestOperatorDeactivates(t *testing.T) {
	p := startParley(t, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--data", t.TempDir(), "--demo")
	alice, demo := readDemo(t, p)
	bob := login(t, p, "bob@demo.parley.dev")
	bobID := demo.users["bob"]
	if bobID == "" {
		t.Fatalf("no bob in the demo: %v", demo.users)
	}
	code, body := adminPost(t, p, "/users/"+bobID+"/deactivate")
	var u struct {
		ID          string `json:"id"`
		Deactivated bool   `json:"deactivated"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &u) != nil || !u.Deactivated || u.ID != bobID {
		t.Fatalf("deactivate: %d %s", code, body)
	}
	bob.do("GET", "/me", nil, 401, nil)
	anon := &client{t: t, base: alice.base}
	anon.do("POST", "/auth/login", map[string]string{"email": "bob@demo.parley.dev", "password": demoPassword}, 403, nil)
	if code, body := adminPost(t, p, "/users/"+bobID+"/reactivate"); code != 200 || strings.Contains(body, `"deactivated":true`) {
		t.Fatalf("reactivate: %d %s", code, body)
	}
	login(t, p, "bob@demo.parley.dev")
	// alice owns the demo workspace.
	if code, body := adminPost(t, p, "/users/"+demo.users["alice"]+"/deactivate"); code != 403 {
		t.Fatalf("deactivating an owner: %d %s", code, body)
	}
	if code, _ := adminPost(t, p, "/users/Unosuch/deactivate"); code != 404 {
		t.Fatalf("unknown user: %d", code)
	}
}
