package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDirectoryCommands drives `parley shards` and `parley workspaces`
// against the control database of a running node with no services (SQLite,
// embedded NATS with JetStream), and reads the result back through the
// node's directory client on the admin listener: the change goes
// catalogue -> change log -> relay -> JetStream -> replica -> client.
func TestDirectoryCommands(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	p := startParley(t, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--data", data, "--region", "eu")
	cli := func(args ...string) (string, error) {
		cmd := exec.Command(binPath, append(args, "--data", data)...)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := cli(args...)
		if err != nil {
			t.Fatalf("parley %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	// The node added its default shard: its own database, in its region.
	if out := must("shards", "list"); !strings.Contains(out, "local") || !strings.Contains(out, "eu") ||
		!strings.Contains(out, "(the node's own database)") {
		t.Fatalf("shards list:\n%s", out)
	}
	must("shards", "add", "eu2", "--region", "eu", "--dsn", "postgres://app:hunter2@db2/parley")
	must("shards", "drain", "local")
	out := must("workspaces", "place", "acme", "--region", "eu", "--limit", "members=50")
	if !strings.Contains(out, "eu2") {
		t.Fatalf("placed on a draining shard:\n%s", out)
	}
	if out := must("shards", "list"); strings.Contains(out, "hunter2") {
		t.Fatalf("shards list prints a password:\n%s", out)
	}
	for _, bad := range [][]string{{"workspaces", "place", "acme", "--region", "eu"}, {"workspaces", "place", "x", "--region", "mars"},
		{"workspaces", "show", "nope"}, {"workspaces", "move", "acme", "--to", "nope"}, {"workspaces", "move", "acme", "--step", "sideways"},
		{"shards", "add", "bad.id", "--region", "eu"}, {"workspaces", "place", "y", "--region", "eu", "--limit", "members"}} {
		if out, err := cli(bad...); err == nil {
			t.Errorf("parley %s succeeded:\n%s", strings.Join(bad, " "), out)
		}
	}

	lookup := func() (int, map[string]any) {
		resp, err := http.Get(p.admin + "tenantdir/workspaces/acme")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var m map[string]any
		json.Unmarshal(body, &m)
		return resp.StatusCode, m
	}
	waitUntil(t, 10*time.Second, "the node's client to find acme", func() bool {
		code, m := lookup()
		return code == http.StatusOK && m["shard_id"] == "eu2"
	})
	if _, m := lookup(); m["dsn"] != "postgres://app:xxxxx@db2/parley" {
		t.Fatalf("admin lookup dsn %v, want it redacted", m["dsn"])
	}
	must("shards", "add", "eu3", "--region", "eu")
	must("workspaces", "move", "acme", "--to", "eu3", "--step", "all")
	waitUntil(t, 10*time.Second, "the node's client to hear of the move", func() bool {
		_, m := lookup()
		return m["shard_id"] == "eu3" && m["status"] == "active"
	})

	// The chaos switches: bad input is refused, a region can be cut.
	put := func(body string) int {
		req, _ := http.NewRequest(http.MethodPut, p.admin+"tenantdir/chaos", bytes.NewBufferString(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, bad := range []string{`{"lookup_latency_fraction": 2}`, `{"regions_off": ["a.b"]}`, `{"nope": 1}`, `[`} {
		if code := put(bad); code != http.StatusBadRequest {
			t.Errorf("PUT chaos %s: %d, want 400", bad, code)
		}
	}
	if code := put(`{"regions_off": ["eu"]}`); code != http.StatusOK {
		t.Fatalf("PUT chaos: %d", code)
	}
	// Cached: still answered with the region off.
	if code, m := lookup(); code != http.StatusOK || m["shard_id"] != "eu3" {
		t.Fatalf("cached lookup with the region off: %d %v", code, m)
	}
	p.stop(t)
}

// waitUntil polls cond until it holds or d passes.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
