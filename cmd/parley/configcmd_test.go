package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigCommand changes the live configuration of a running node with
// `parley config` and reads it back, also after a restart (it is stored).
func TestConfigCommand(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	p := startParley(t, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--data", data)
	cli := func(args ...string) (string, error) {
		cmd := exec.Command(binPath, append(append([]string{"config"}, args...), "--admin", p.admin)...)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	get := func() map[string]any {
		t.Helper()
		out, err := cli("get")
		if err != nil {
			t.Fatalf("config get: %v\n%s", err, out)
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(out), &c); err != nil {
			t.Fatalf("config get printed %q: %v", out, err)
		}
		return c
	}
	if c := get(); c["collapsed_threads"] != true || c["channel_mention_max_members"] != float64(1000) {
		t.Fatalf("defaults: %v", c)
	}
	if out, err := cli("set", "collapsed_threads=false", "--dry-run"); err != nil || !strings.Contains(out, `"dry_run": true`) {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if c := get(); c["collapsed_threads"] != true {
		t.Fatal("a dry run changed the configuration")
	}
	if out, err := cli("set", "collapsed_threads=false", "channel_mention_max_members=20"); err != nil {
		t.Fatalf("config set: %v\n%s", err, out)
	}
	if c := get(); c["collapsed_threads"] != false || c["channel_mention_max_members"] != float64(20) {
		t.Fatalf("after set: %v", c)
	}
	for _, bad := range []string{"no_such_setting=1", "channel_mention_max_members=-5", "collapsed_threads=maybe", "novalue"} {
		if out, err := cli("set", bad); err == nil {
			t.Fatalf("config set %s succeeded:\n%s", bad, out)
		}
	}
	p.stop(t)

	p = startParley(t, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--data", data)
	if c := get(); c["collapsed_threads"] != false || c["channel_mention_max_members"] != float64(20) {
		t.Fatalf("after a restart: %v", c)
	}
	p.stop(t)
}
