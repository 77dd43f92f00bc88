package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"parley"
	"parley/internal/testpg"
	"parley/sqlstore"
	"parley/tenantdir"
	"parley/transfer"
	"parley/transfer/transfertest"
)

// TestServeRoutesToShards runs the real binary on a control database with
// a second shard in its catalogue: store routing turns on, the second
// workspace is placed on the second shard, and a post to it lands in that
// database (and not in the node's own), with login and history working.
func TestServeRoutesToShards(t *testing.T) {
	control, second := testpg.New(t), testpg.New(t)
	data := filepath.Join(t.TempDir(), "data")
	cli := func(args ...string) {
		t.Helper()
		cmd := exec.Command(binPath, append(args, "--db", control, "--data", data)...)
		cmd.Env = cleanEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("parley %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	cli("shards", "add", "local", "--region", "local")
	cli("shards", "add", "s2", "--region", "local", "--dsn", second)
	p := startParley(t, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--db", control, "--data", data)
	p.waitLog(t, "store routing on")

	api := func(method, path, token string, body any, want int, out any) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, p.url+"api/v1"+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, got, want)
		}
		if out != nil {
			if err := json.Unmarshal(got, out); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
		}
	}
	var auth struct {
		Token string `json:"token"`
	}
	api("POST", "/auth/signup", "", map[string]string{"email": "shard@example.com", "password": "correct horse battery",
		"name": "Shard", "handle": "shard"}, http.StatusCreated, &auth)
	type ws struct {
		ID string `json:"id"`
	}
	var w1, w2 ws
	api("POST", "/workspaces", auth.Token, map[string]string{"name": "One", "slug": "one"}, http.StatusCreated, &w1)
	api("POST", "/workspaces", auth.Token, map[string]string{"name": "Two", "slug": "two"}, http.StatusCreated, &w2)
	shardOf := func(id string) string {
		code, body := adminGet(t, p, "/tenantdir/workspaces/"+id)
		if code != http.StatusOK {
			t.Fatalf("lookup %s: %d %s", id, code, body)
		}
		var rec struct {
			ShardID string `json:"shard_id"`
		}
		json.Unmarshal([]byte(body), &rec)
		return rec.ShardID
	}
	if a, b := shardOf(w1.ID), shardOf(w2.ID); a != "local" || b != "s2" {
		t.Fatalf("workspaces placed on %s and %s, want local and s2", a, b)
	}
	// A new login works, and lists both workspaces.
	var login struct {
		Token string `json:"token"`
	}
	api("POST", "/auth/login", "", map[string]string{"email": "shard@example.com", "password": "correct horse battery"},
		http.StatusOK, &login)
	var list struct {
		Workspaces []ws `json:"workspaces"`
	}
	api("GET", "/workspaces", login.Token, nil, http.StatusOK, &list)
	if len(list.Workspaces) != 2 {
		t.Fatalf("workspaces = %+v", list)
	}
	var ch struct {
		ID string `json:"id"`
	}
	api("POST", "/workspaces/"+w2.ID+"/channels", login.Token, map[string]string{"name": "routed", "kind": "public"},
		http.StatusCreated, &ch)
	api("POST", "/channels/"+ch.ID+"/messages", login.Token, map[string]string{"text": "on the second shard"},
		http.StatusCreated, nil)
	var page struct {
		Messages []struct {
			Text string `json:"text"`
		} `json:"messages"`
	}
	api("GET", "/channels/"+ch.ID+"/messages?limit=10", login.Token, nil, http.StatusOK, &page)
	if len(page.Messages) != 1 || page.Messages[0].Text != "on the second shard" {
		t.Fatalf("history = %+v", page)
	}
	// Integrations are routed too: a webhook of the second shard's
	// workspace posts there.
	var hook struct {
		URL string `json:"url"`
	}
	api("POST", "/channels/"+ch.ID+"/webhooks", login.Token, map[string]string{"name": "CI"}, http.StatusCreated, &hook)
	resp, err := http.Post(hook.URL, "application/json", strings.NewReader(`{"text":"from a webhook"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("webhook post = %d", resp.StatusCode)
	}
	count := func(dsn string) int {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM messages WHERE channel_id = $1`, ch.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if c, s := count(control), count(second); c != 0 || s != 2 {
		t.Fatalf("the message is in the control database %d times and in the shard %d times", c, s)
	}
	p.stop(t)
}

// TestImportRoutesToShard runs `parley import` on a control database
// whose catalogue has a second shard (the node's own draining, so the
// placement has one choice): the workspace is placed in the catalogue on
// the second shard and its history written there, not in the node's own
// database; a rerun finds it there and imports nothing twice.
func TestImportRoutesToShard(t *testing.T) {
	control, second := testpg.New(t), testpg.New(t)
	data := filepath.Join(t.TempDir(), "data")
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(binPath, append(args, "--db", control, "--data", data)...)
		cmd.Env = cleanEnv()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("parley %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	cli("shards", "add", "local", "--region", "local")
	cli("shards", "add", "s2", "--region", "local", "--dsn", second)
	cli("shards", "drain", "local")
	ctx := context.Background()
	own, err := sqlstore.Open(ctx, sqlstore.Config{PostgresURL: control})
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if _, err := own.CreateUser(ctx, parley.NewUser{Email: "owner@example.com", Handle: "owner", Name: "Owner", PasswordHash: "x"}); err != nil {
		t.Fatal(err)
	}
	ex := transfertest.Generate(transfertest.Config{Seed: 12, Messages: 300, NoEdge: true})
	zipPath := filepath.Join(t.TempDir(), "slack.zip")
	if err := os.WriteFile(zipPath, ex.Zip, 0o600); err != nil {
		t.Fatal(err)
	}
	var sum transfer.Summary
	importOnce := func() {
		t.Helper()
		sum = transfer.Summary{}
		out := cli("import", "slack", zipPath, "--workspace", "acme", "--owner", "owner@example.com", "--progress", "off", "--json")
		if err := json.Unmarshal([]byte(out), &sum); err != nil {
			t.Fatalf("summary %q: %v", out, err)
		}
	}
	importOnce()
	if !sum.WorkspaceCreated || sum.Messages != totalMessages(ex) {
		t.Fatalf("summary %+v, want a new workspace and %d messages", sum, totalMessages(ex))
	}
	cat, err := tenantdir.OpenCatalogue(ctx, tenantdir.CatalogueConfig{PostgresURL: control})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	rec, err := cat.Workspace(ctx, sum.WorkspaceID)
	if err != nil || rec.ShardID != "s2" {
		t.Fatalf("catalogue record of %s = %+v, %v; want it on s2", sum.WorkspaceID, rec, err)
	}
	if _, _, err := own.WorkspaceOwner(ctx, "acme"); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("the node's own database has the imported workspace (err %v)", err)
	}
	shard, err := sqlstore.Open(ctx, sqlstore.Config{PostgresURL: second})
	if err != nil {
		t.Fatal(err)
	}
	defer shard.Close()
	if id, _, err := shard.WorkspaceOwner(ctx, "acme"); err != nil || id != sum.WorkspaceID {
		t.Fatalf("shard s2: workspace acme = %q, %v; want %s", id, err, sum.WorkspaceID)
	}
	first := sum
	importOnce()
	if sum.WorkspaceCreated || sum.WorkspaceID != first.WorkspaceID || sum.Messages != 0 || sum.AlreadyImported != first.Messages {
		t.Fatalf("second run: %+v", sum)
	}
}

// TestExportRoutesToShard runs `parley export` on a control database whose
// catalogue has the workspace on a second shard (imported there by the
// routed import): the zip has its users, channels and messages, the same
// as an export read on that shard itself. With --store-routing off the
// command reads the node's own database, which does not have the
// workspace; with the shard refusing connections the export fails as
// unavailable and leaves no file.
func TestExportRoutesToShard(t *testing.T) {
	control, second := testpg.New(t), testpg.New(t)
	data := filepath.Join(t.TempDir(), "data")
	run := func(args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(binPath, append(args, "--db", control, "--data", data)...)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	cli := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("parley %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	cli("shards", "add", "local", "--region", "local")
	cli("shards", "add", "s2", "--region", "local", "--dsn", second)
	cli("shards", "drain", "local")
	ctx := context.Background()
	own, err := sqlstore.Open(ctx, sqlstore.Config{PostgresURL: control})
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if _, err := own.CreateUser(ctx, parley.NewUser{Email: "owner@example.com", Handle: "owner", Name: "Owner", PasswordHash: "x"}); err != nil {
		t.Fatal(err)
	}
	ex := transfertest.Generate(transfertest.Config{Seed: 13, Messages: 300, NoEdge: true})
	zipPath := filepath.Join(t.TempDir(), "slack.zip")
	if err := os.WriteFile(zipPath, ex.Zip, 0o600); err != nil {
		t.Fatal(err)
	}
	var sum transfer.Summary
	out := cli("import", "slack", zipPath, "--workspace", "acme", "--owner", "owner@example.com", "--progress", "off", "--json")
	if err := json.Unmarshal([]byte(out), &sum); err != nil || sum.Messages == 0 {
		t.Fatalf("import summary %q: %v", out, err)
	}
	if _, _, err := own.WorkspaceOwner(ctx, "acme"); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("the node's own database has the imported workspace (err %v)", err)
	}

	// What the shard itself exports.
	shard, err := sqlstore.Open(ctx, sqlstore.Config{PostgresURL: second})
	if err != nil {
		t.Fatal(err)
	}
	defer shard.Close()
	wsID, owner, err := shard.WorkspaceOwner(ctx, "acme")
	if err != nil || wsID != sum.WorkspaceID {
		t.Fatalf("shard s2: workspace acme = %q, %v; want %s", wsID, err, sum.WorkspaceID)
	}
	want, err := transfer.Export(ctx, shard, owner, wsID, parley.ExportOptions{Private: true}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}

	zipOut := filepath.Join(t.TempDir(), "acme.zip")
	out = cli("export", "--workspace", "acme", "--out", zipOut, "--private")
	if !strings.Contains(out, "exported acme") {
		t.Fatalf("export: %s", out)
	}
	f, err := os.Open(zipOut)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	src, err := transfer.ReadParley(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	messages := 0
	for _, ch := range src.Channels {
		ms, err := ch.Load()
		if err != nil {
			t.Fatalf("channel %s: %v", ch.Name, err)
		}
		messages += len(ms)
	}
	if len(src.Users) != want.Users || len(src.Channels) != want.Channels || messages != want.Messages || messages == 0 {
		t.Fatalf("the CLI's export has %d users, %d channels, %d messages; the shard's %d, %d, %d",
			len(src.Users), len(src.Channels), messages, want.Users, want.Channels, want.Messages)
	}

	// Not routed: only the node's own database is read.
	gone := filepath.Join(t.TempDir(), "none.zip")
	if out, err := run("export", "--workspace", "acme", "--out", gone, "--store-routing", "off"); err == nil ||
		!strings.Contains(out, `no workspace "acme"`) {
		t.Fatalf("export with --store-routing off: %v\n%s", err, out)
	}
	if out, err := run("export", "--workspace", "nope", "--out", gone); err == nil || !strings.Contains(out, "workspace nope not found") {
		t.Fatalf("export of a slug no shard has: %v\n%s", err, out)
	}

	// The workspace's shard down: unavailable, nothing written.
	setConnections(t, second, false)
	t.Cleanup(func() { setConnections(t, second, true) })
	if out, err := run("export", "--workspace", "acme", "--out", gone); err == nil || !strings.Contains(out, "shard s2 is unavailable") {
		t.Fatalf("export with its shard down: %v\n%s", err, out)
	}
	for _, p := range []string{gone, gone + ".partial"} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s after the failed exports: %v", p, err)
		}
	}
}

// setConnections makes the database of dsn refuse new connections (and
// ends its open ones), or take them again: a shard that is down.
func setConnections(t *testing.T, dsn string, allow bool) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", testpg.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	name := strings.TrimPrefix(u.Path, "/")
	if _, err := db.Exec(fmt.Sprintf("ALTER DATABASE %q ALLOW_CONNECTIONS %t", name, allow)); err != nil {
		t.Fatalf("set connections of %s: %v", name, err)
	}
	if !allow {
		if _, err := db.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, name); err != nil {
			t.Fatalf("end connections of %s: %v", name, err)
		}
	}
}

// TestShardPoolSizeFlag: --shard-pool-size is the size of the pool of
// each shard's store the router opens; the node's own database keeps its
// own pool.
func TestShardPoolSizeFlag(t *testing.T) {
	control, second := testpg.New(t), testpg.New(t)
	ctx := t.Context()
	cat, err := tenantdir.OpenCatalogue(ctx, tenantdir.CatalogueConfig{PostgresURL: control})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []tenantdir.Shard{{ID: "local", Region: "local"}, {ID: "s2", Region: "local", DSN: second}} {
		if _, err := cat.AddShard(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	cat.Close()
	n := startInProcess(t, "--db", control, "--shard-pool-size", "7")
	if n.router == nil {
		t.Fatal("store routing is off")
	}
	st, err := n.router.Shard(ctx, "s2")
	if err != nil {
		t.Fatal(err)
	}
	if got := st.PoolStats().MaxOpenConnections; got != 7 {
		t.Fatalf("shard s2's pool has %d connections, want 7", got)
	}
	if got := n.store.PoolStats().MaxOpenConnections; got != defaultShardPoolSize {
		t.Fatalf("the node's own pool has %d connections, want the store's default %d", got, defaultShardPoolSize)
	}
}
