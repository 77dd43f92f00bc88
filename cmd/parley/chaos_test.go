package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"parley/internal/testpg"
	"parley/loadtest"
)

// TestChaos is the CI-sized chaos run (issue 15): `parley chaos` with three
// nodes on a fresh PostgreSQL database, 45 s of steady and hot-channel
// traffic, a fault every 2–4 s (kill -9 and restart, SIGSTOP for 5–6 s,
// pg_terminate_backend, a stalled database), then the histories checked:
// nothing acknowledged lost, nothing handed twice or out of order, every
// logged event handed to every reader of its channel.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run: three nodes and a minute of faults; skipped with -short")
	}
	pg := testpg.ServerURL()
	if err := pingPG(pg); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL at %s is unreachable under CI: %v", pg, err)
		}
		t.Skipf("PostgreSQL at %s is unreachable: %v", pg, err)
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "chaos", "--postgres", pg, "--nodes", "3",
		"--users", "12", "--channels", "4", "--writers", "6", "--rate", "10", "--duration", "45s",
		"--gap-min", "2s", "--gap-max", "4s", "--stop-min", "5s", "--stop-max", "6s",
		"--settle", "30s", "--out", out)
	cmd.Env = cleanEnv()
	b, err := cmd.CombinedOutput()
	t.Logf("parley chaos:\n%s", b)
	raw, rerr := os.ReadFile(filepath.Join(out, "chaos.json"))
	if rerr != nil {
		t.Fatalf("no report (%v); the run: %v", rerr, err)
	}
	var rep loadtest.ChaosReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	c := rep.Counts
	if err != nil || !rep.Pass || c.Lost+c.Undelivered+c.Duplicated+c.OutOfOrder+c.Mismatched != 0 {
		t.Fatalf("chaos run failed (%v): %+v\nlost %v\nundelivered %v\nduplicated %v\nout of order %v\nmismatched %v",
			err, c, rep.Lost, rep.Undelivered, rep.Duplicated, rep.OutOfOrder, rep.Mismatched)
	}
	if len(rep.FaultCounts) < 3 {
		t.Fatalf("faults of %d kinds (%v), want at least 3", len(rep.FaultCounts), rep.FaultCounts)
	}
	if c.Acked < 200 || c.Receipts < c.Acked {
		t.Fatalf("too little traffic to mean anything: %+v", c)
	}
	t.Logf("seed %d: %d faults %v, %d posts acknowledged, %d recovered, %d receipts: 0 lost, 0 duplicated, 0 out of order",
		rep.Seed, len(rep.Faults), rep.FaultCounts, c.Acked, c.Recovered, c.Receipts)
}

func pingPG(url string) error {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}
