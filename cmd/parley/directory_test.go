package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
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
	out := must("workspaces", "place", "acme", "--region", "eu", "--slug", "acme-co", "--limit", "members=50")
	if !strings.Contains(out, "eu2") {
		t.Fatalf("placed on a draining shard:\n%s", out)
	}
	if out := must("shards", "list"); strings.Contains(out, "hunter2") {
		t.Fatalf("shards list prints a password:\n%s", out)
	}
	for _, bad := range [][]string{{"workspaces", "place", "acme", "--region", "eu"}, {"workspaces", "place", "x", "--region", "mars"},
		{"workspaces", "show", "nope"}, {"workspaces", "move", "acme", "--to", "nope"}, {"workspaces", "move", "acme", "--step", "sideways"},
		{"shards", "add", "bad.id", "--region", "eu"}, {"workspaces", "place", "y", "--region", "eu", "--limit", "members"},
		{"workspaces", "place", "z", "--region", "eu", "--slug", "Not A Slug"}} {
		if out, err := cli(bad...); err == nil {
			t.Errorf("parley %s succeeded:\n%s", strings.Join(bad, " "), out)
		}
	}
	// The slug reserved at placement: show prints it (and its JSON
	// carries it); another workspace cannot be placed with it.
	if out := must("workspaces", "show", "acme"); !regexp.MustCompile(`(?m)^slug +acme-co$`).MatchString(out) {
		t.Fatalf("workspaces show prints no slug:\n%s", out)
	}
	var shown map[string]any
	if err := json.Unmarshal([]byte(must("workspaces", "show", "acme", "--json")), &shown); err != nil || shown["slug"] != "acme-co" ||
		shown["shard_id"] != "eu2" {
		t.Fatalf("workspaces show --json: %v %v", shown, err)
	}
	if out, err := cli("workspaces", "place", "beta", "--region", "eu", "--slug", "acme-co"); err == nil || !strings.Contains(out, `slug "acme-co" is taken`) {
		t.Fatalf("placing a taken slug: %v\n%s", err, out)
	}
	if out, err := cli("workspaces", "show", "beta"); err == nil {
		t.Fatalf("a refused placement left an entry:\n%s", out)
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
	// A shard's new DSN reaches the records of its workspaces on the
	// node (logged with each of them); the password is not printed.
	if out := must("shards", "set", "eu2", "--dsn", "postgres://app:s3cret@db2b/parley"); strings.Contains(out, "s3cret") || !strings.Contains(out, "db2b") {
		t.Fatalf("shards set:\n%s", out)
	}
	waitUntil(t, 10*time.Second, "the node's client to hear acme's shard's new DSN", func() bool {
		_, m := lookup()
		return m["dsn"] == "postgres://app:xxxxx@db2b/parley"
	})
	for _, bad := range [][]string{{"shards", "set", "eu2"}, {"shards", "set", "nope", "--dsn", "postgres://x/y"}} {
		if out, err := cli(bad...); err == nil {
			t.Errorf("parley %s succeeded:\n%s", strings.Join(bad, " "), out)
		}
	}
	// ?cold=1 asks the replica again; the lookup's time is in Server-Timing.
	// A cold value that is not 0 or 1 is refused.
	for q, want := range map[string]int{"?cold=1": 200, "?cold=0": 200, "?cold=maybe": 400, "?cold=%00": 400} {
		resp, err := http.Get(p.admin + "tenantdir/workspaces/acme" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("lookup%s: %d, want %d", q, resp.StatusCode, want)
		}
		if timing := resp.Header.Get("Server-Timing"); want == 200 && !strings.HasPrefix(timing, "lookup;dur=") {
			t.Errorf("lookup%s: Server-Timing %q", q, timing)
		}
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

// TestDirectoryStreamReplicasUnmet: a node asking for 3-replica directory
// streams of a single JetStream server serves without a directory, and
// says why, rather than not at all. The server is one of the test's own
// (the library Parley embeds, on a random loopback port): the machine's
// nats-server 2.9 accepts a 3-replica stream it cannot replicate, and is
// shared with other tests.
func TestDirectoryStreamReplicasUnmet(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true,
		JetStream: true, StoreDir: t.TempDir(), SyncAlways: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	p := startParley(t, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--data", t.TempDir(), "--nats", srv.ClientURL(),
		"--directory-stream-replicas", "3")
	p.waitLog(t, `tenant directory off: the external NATS cannot keep its streams`)
	p.waitLog(t, `"stream_replicas":3`)
	if code, body := adminGet(t, p, "/readyz"); code != 200 {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	if code, _ := adminGet(t, p, "/tenantdir/workspaces/acme"); code != http.StatusNotFound {
		t.Fatalf("the directory's admin lookup answered %d with the directory off, want 404 (no such route)", code)
	}
	p.stopQuietly(t)
}
