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

// TestConfigReachesTheStore flips collapsed threads on a running node and
// sees the store's writes follow at once: a reply does not count in the
// channel's unread count while collapsed threads are on, and does once they
// are off.
func TestConfigReachesTheStore(t *testing.T) {
	p := startParley(t, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--demo", "--data", filepath.Join(t.TempDir(), "data"))
	alice, st := readDemo(t, p)
	bob := login(t, p, "bob@demo.parley.dev")
	var dm struct{ ID string }
	alice.do("POST", "/dms", map[string]any{"workspace_id": st.workspaceID, "user_ids": []string{st.users["bob"]}}, 200, &dm)

	var root struct {
		ID  string
		Seq int64
	}
	bob.do("POST", "/channels/"+dm.ID+"/messages", map[string]any{"text": "root", "client_msg_id": "r1"}, 201, &root)
	alice.do("POST", "/channels/"+dm.ID+"/read", map[string]any{"seq": root.Seq}, 200, nil)
	unread := func() float64 {
		t.Helper()
		var b struct {
			Channels []map[string]any `json:"channels"`
			DMs      []map[string]any `json:"dms"`
		}
		alice.do("POST", "/boot", map[string]any{"workspace_id": st.workspaceID}, 200, &b)
		for _, c := range append(b.Channels, b.DMs...) {
			if c["id"] == dm.ID {
				return c["unread_count"].(float64)
			}
		}
		t.Fatalf("the DM %s is not in alice's boot", dm.ID)
		return 0
	}
	reply := func(id string) {
		bob.do("POST", "/channels/"+dm.ID+"/messages", map[string]any{"text": "a reply", "client_msg_id": id, "thread_root_id": root.ID}, 201, nil)
	}

	reply("c1")
	if n := unread(); n != 0 {
		t.Fatalf("collapsed threads on: a reply made the DM unread (%v)", n)
	}
	cmd := exec.Command(binPath, "config", "set", "collapsed_threads=false", "--admin", p.admin)
	cmd.Env = cleanEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("config set: %v\n%s", err, out)
	}
	reply("c2")
	if n := unread(); n != 1 {
		t.Fatalf("collapsed threads off: unread %v after one inline reply, want 1", n)
	}
	p.stop(t)
}
