package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"parley/loadtest"
)

// runLoadtest runs `parley loadtest args…` against p and decodes the
// result file it writes.
func runLoadtest(t *testing.T, p *proc, args ...string) (*loadtest.Result, string) {
	t.Helper()
	out := t.TempDir()
	args = append([]string{"loadtest", "--url", strings.TrimSuffix(p.url, "/"), "--out", out}, args...)
	cmd := exec.Command(binPath, args...)
	cmd.Env = cleanEnv()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("parley %q: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(out, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res loadtest.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("result.json: %v", err)
	}
	html, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "Delivery latency", "PASS"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	for _, ref := range []string{"src=", "href=", "<script", "<link", "@import"} {
		if strings.Contains(string(html), ref) {
			t.Errorf("report.html has %q: it must be self-contained", ref)
		}
	}
	if !strings.Contains(stdout.String(), "lost / duplicated / out of order") || !strings.Contains(stderr.String(), "conns=") {
		t.Errorf("no summary table or progress lines:\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	return &res, stdout.String()
}

// checkClean fails unless the run connected everyone and delivered with
// no loss, duplicate or reordering.
func checkClean(t *testing.T, res *loadtest.Result, users int) {
	t.Helper()
	if !res.Pass || res.Lost != 0 || res.Duplicated != 0 || res.OutOfOrder != 0 || res.Connected != users {
		t.Fatalf("result: pass %v, lost %d, duplicated %d, out of order %d, connected %d of %d; errors %v",
			res.Pass, res.Lost, res.Duplicated, res.OutOfOrder, res.Connected, res.Users, res.Errors)
	}
	if res.Deliveries == 0 || res.Latency["delivery"].Count == 0 || len(res.Timeline) == 0 || res.Checked < users {
		t.Fatalf("nothing measured: %d deliveries, latency %+v, %d seconds, %d streams",
			res.Deliveries, res.Latency["delivery"], len(res.Timeline), res.Checked)
	}
}

func TestLoadtestTinyRun(t *testing.T) {
	p := startParley(t, "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--admin", "off", "--log-level", "warn")

	// API setup, two worker processes, sockets from two source addresses
	// (package loadtest runs every scenario in process under -race).
	res, _ := runLoadtest(t, p, "--scenario", "hot-channel", "--users", "6", "--rate", "20",
		"--duration", "2s", "--procs", "2", "--source-ips", "127.0.0.1-127.0.0.2", "--catch-up", "20s")
	checkClean(t, res, 6)
	if res.Sizes.Procs != 2 || res.Users != 6 || res.Posts == 0 {
		t.Fatalf("procs run: %+v, %d users, %d posts", res.Sizes, res.Users, res.Posts)
	}
}

func TestLoadtestRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--scenario", "nope", "--users", "2"},
		{"--scenario", "hot-channel"},
		{"--scenario", "hot-channel", "--users", "2", "--source-ips", "127.0.0.9-127.0.0.1"},
		{"--scenario", "hot-channel", "--users", "2", "--url", "ftp://x"},
		{"--scenario", "audience", "--users", "2", "--procs", "2"},
		{"--scenario", "audience", "--users", "2", "--view", "501"},
	} {
		cmd := exec.Command(binPath, append([]string{"loadtest"}, args...)...)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "parley:") {
			t.Errorf("loadtest %q: err %v, output %s", args, err, out)
		}
	}
}
