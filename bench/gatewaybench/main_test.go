package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// A tiny run of each mode and reader, so that the benchmark keeps working:
// it builds parley, seeds, serves, connects 50 sessions and checks that
// every message reached every session once.
func TestTinyRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs parley; skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "parley")
	build := exec.Command("go", "build", "-o", bin, "parley/cmd/parley")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("build parley: %v", err)
	}
	cases := []struct {
		name         string
		reader       string
		burst        int
		wantMessages int
	}{
		{"steady/raw", "raw", 0, 5},
		{"steady/client", "client", 0, 5},
		{"burst/raw", "raw", 5, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			const sessions = 50
			res, err := Run(t.Context(), Config{
				Parley: bin, Reader: tc.reader, Sessions: sessions,
				Rate: 20, Duration: 250 * time.Millisecond, // 5 messages
				Burst: tc.burst, BurstEvery: 100 * time.Millisecond, // 2 bursts
				TextBytes: 200, ConnectWorkers: 8, Settle: 200 * time.Millisecond,
				Drain: 10 * time.Second, DataDir: t.TempDir(),
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Messages != tc.wantMessages || res.Delivered != int64(sessions*tc.wantMessages) ||
				res.Lost != 0 || res.Duplicates != 0 || res.SGaps != 0 || res.Reconnects != 0 {
				t.Fatalf("result %+v", res)
			}
			if res.P50ms <= 0 || res.P99ms < res.P50ms || res.RSSSessionsBytes <= 0 || len(res.PerMessageP99ms) != res.Messages {
				t.Fatalf("implausible measurements %+v", res)
			}
		})
	}
}
