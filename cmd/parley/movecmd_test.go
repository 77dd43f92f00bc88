package main

import (
	"context"
	"database/sql"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"parley"
	"parley/internal/testpg"
	"parley/sqlstore"
	"parley/storetest"
)

// TestWorkspacesMoveCommand runs `parley workspaces move` on two real
// PostgreSQL shards: the workspace's rows end up on the target only, the
// catalogue says so, and the command prints its progress and summary.
func TestWorkspacesMoveCommand(t *testing.T) {
	ctx := context.Background()
	dsn1, dsn2 := testpg.New(t), testpg.New(t)
	st, err := sqlstore.Open(ctx, sqlstore.Config{PostgresURL: dsn1})
	if err != nil {
		t.Fatal(err)
	}
	owner := storetest.MustUser(t, st, "owner")
	ws := storetest.MustWorkspace(t, st, owner)
	ch := storetest.MustChannel(t, st, ws, owner, "general-move", parley.KindPublic)
	for range 50 {
		storetest.MustPost(t, st, owner, ch, "hello")
	}
	st.Close()

	data := filepath.Join(t.TempDir(), "data")
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
	must("shards", "add", "pg1", "--region", "eu", "--dsn", dsn1)
	must("shards", "add", "pg2", "--region", "eu", "--dsn", dsn2)
	must("workspaces", "place", ws.ID, "--region", "eu", "--shard", "pg1")
	for _, bad := range [][]string{{"workspaces", "move", ws.ID}, {"workspaces", "move", ws.ID, "--to", "pg2", "--batch", "-1"},
		{"workspaces", "move", ws.ID, "--to", "pg2", "--drain", "-1s"}, {"workspaces", "move", ws.ID, "--to", "pg9"}} {
		if out, err := cli(bad...); err == nil {
			t.Errorf("parley %s succeeded:\n%s", strings.Join(bad, " "), out)
		}
	}
	out := must("workspaces", "move", ws.ID, "--to", "pg2", "--drain", "50ms", "--checksums")
	for _, want := range []string{"copy", "catchup", "freeze", "final", "switch", "read-only window", "rows copied", "purged"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if show := must("workspaces", "show", ws.ID); !strings.Contains(show, "pg2") || !strings.Contains(show, "active") {
		t.Fatalf("show after the move:\n%s", show)
	}
	for dsn, want := range map[string]int{dsn1: 0, dsn2: 50} {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM messages WHERE workspace_id = $1`, ws.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if n != want {
			t.Errorf("%d messages on a shard, want %d", n, want)
		}
	}
	t.Logf("parley workspaces move:\n%s", out)
}
