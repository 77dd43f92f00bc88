package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"parley"
	pclient "parley/client"
)

// TestWorkspaceLimits drives a workspace's directory overrides end to end
// on a real node (SQLite, embedded NATS with JetStream, store routing off):
// `parley workspaces set --limit/--feature` writes the catalogue, the
// change reaches the node's directory client over the bus, and the API
// applies it: the store refuses the join past the member limit inside its
// transaction (409 limit_reached), the API refuses bot creation while
// integrations are off (403 feature_disabled), boot reports both, and
// setting them back takes effect without a restart.
func TestWorkspaceLimits(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	p := startParley(t, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--data", data, "--region", "eu")
	must := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(binPath, append(args, "--data", data)...)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("parley %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	base := strings.TrimSuffix(p.url, "/") + "/api/v1"
	call := func(method, path, token string, body any) (int, []byte) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, base+path, rd)
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, raw
	}
	want := func(method, path, token string, body any, status int, out any) {
		t.Helper()
		code, raw := call(method, path, token, body)
		if code != status {
			t.Fatalf("%s %s = %d %s, want %d", method, path, code, raw, status)
		}
		if out != nil {
			if err := json.Unmarshal(raw, out); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
		}
	}
	wantCode := func(raw []byte, code string) {
		t.Helper()
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if json.Unmarshal(raw, &e); e.Error.Code != code {
			t.Fatalf("error %s, want code %s", raw, code)
		}
	}
	signup := func(handle string) string {
		var a struct {
			Token string `json:"token"`
		}
		want("POST", "/auth/signup", "", map[string]string{"email": handle + "@limits.test", "password": "a long enough password",
			"name": handle, "handle": handle}, http.StatusCreated, &a)
		return a.Token
	}
	owner, bob, carol := signup("owner"), signup("bob"), signup("carol")
	var w struct {
		ID string `json:"id"`
	}
	want("POST", "/workspaces", owner, map[string]string{"name": "Limited", "slug": "limited"}, http.StatusCreated, &w)
	var inv struct {
		Code string `json:"code"`
	}
	want("POST", "/workspaces/"+w.ID+"/invites", owner, map[string]int{}, http.StatusCreated, &inv)

	// The workspace predates the catalogue here (routing is off): place it
	// on the node's own shard, then limit it to two members and turn its
	// integrations off.
	must("workspaces", "place", w.ID, "--region", "eu", "--shard", "local")
	must("workspaces", "set", w.ID, "--limit", "members=2", "--feature", "integrations=false")
	bootOf := func() (lim map[string]int64, fea map[string]bool) {
		var b struct {
			Limits struct {
				Workspace map[string]int64 `json:"workspace"`
				Features  map[string]bool  `json:"features"`
			} `json:"limits"`
		}
		want("POST", "/boot", owner, map[string]string{"workspace_id": w.ID}, http.StatusOK, &b)
		return b.Limits.Workspace, b.Limits.Features
	}
	// Propagation: catalogue -> relay -> JetStream -> the node's client.
	waitUntil(t, 5*time.Second, "the overrides to reach the node", func() bool {
		lim, fea := bootOf()
		return lim["members"] == 2 && !fea["integrations"]
	})
	if _, fea := bootOf(); !fea["file_uploads"] {
		t.Fatalf("boot features %v: file_uploads should stay on", fea)
	}

	want("POST", "/invites/"+inv.Code+"/accept", bob, nil, http.StatusOK, nil)
	code, raw := call("POST", "/invites/"+inv.Code+"/accept", carol, nil)
	if code != http.StatusConflict {
		t.Fatalf("third member's accept = %d %s, want 409", code, raw)
	}
	wantCode(raw, "limit_reached")
	bot := map[string]string{"name": "CI", "handle": "ci-bot"}
	code, raw = call("POST", "/workspaces/"+w.ID+"/bots", owner, bot)
	if code != http.StatusForbidden {
		t.Fatalf("bot creation with integrations off = %d %s, want 403", code, raw)
	}
	wantCode(raw, "feature_disabled")

	// Back on, and room for a third: both apply within a second.
	must("workspaces", "set", w.ID, "--limit", "members=3", "--feature", "integrations=true")
	start := time.Now()
	waitUntil(t, time.Second, "the raised limit to apply", func() bool {
		code, _ := call("POST", "/invites/"+inv.Code+"/accept", carol, nil)
		return code == http.StatusOK
	})
	var made struct {
		User struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	waitUntil(t, time.Second, "integrations to come back on", func() bool {
		code, raw := call("POST", "/workspaces/"+w.ID+"/bots", owner, bot)
		return code == http.StatusCreated && json.Unmarshal(raw, &made) == nil
	})
	t.Logf("overrides applied %v after `parley workspaces set`", time.Since(start))

	// The bot's gateway session follows the feature: turned off, the
	// node closes it 4004 when its directory client hears the change, and
	// a new identify is refused 4004 (which the client does not retry).
	var tok struct {
		Token string `json:"token"`
	}
	want("POST", "/workspaces/"+w.ID+"/bots/"+made.User.ID+"/tokens", owner,
		map[string]any{"label": "gw", "scopes": []string{"channels:read"}}, http.StatusCreated, &tok)
	botClient := pclient.New(strings.TrimSuffix(p.url, "/"))
	botClient.SetToken(tok.Token)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := botClient.Connect(ctx, w.ID, pclient.ConnectOptions{Handler: func(pclient.Event) {}})
	if err != nil {
		t.Fatalf("bot connects with integrations on: %v", err)
	}
	defer conn.Close()
	must("workspaces", "set", w.ID, "--feature", "integrations=false")
	select {
	case <-conn.Done():
	case <-time.After(10 * time.Second): // the change's propagation, on a loaded machine
		t.Fatal("the bot's session stayed open after integrations were turned off")
	}
	var ce *pclient.CloseError
	if err := conn.Err(); !errors.As(err, &ce) || ce.Code != parley.CloseAuthFailed {
		t.Fatalf("bot session ended with %v, want close 4004", err)
	}
	if _, err := botClient.Connect(ctx, w.ID, pclient.ConnectOptions{Handler: func(pclient.Event) {}}); !errors.As(err, &ce) || ce.Code != parley.CloseAuthFailed {
		t.Fatalf("bot identify with integrations off: %v, want close 4004", err)
	}

	// Unknown keys and bad values are refused by the CLI with the keys it knows.
	for _, bad := range [][]string{{"--limit", "seats=5"}, {"--limit", "members=0"}, {"--feature", "huddles=false"}} {
		cmd := exec.Command(binPath, append([]string{"workspaces", "set", w.ID, "--data", data}, bad...)...)
		cmd.Env = cleanEnv()
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "bad_request") {
			t.Errorf("parley workspaces set %v: %v\n%s", bad, err, out)
		}
	}
	p.stop(t)
}
