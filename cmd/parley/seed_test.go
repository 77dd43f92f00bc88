package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	pclient "parley/client"
)

// runSeedCmd runs `parley seed args…` and decodes the JSON it writes to
// stdout (with --out -) or to out.
func runSeedCmd(t *testing.T, out string, args ...string) *seedResult {
	t.Helper()
	cmd := exec.Command(binPath, append([]string{"seed", "--log-level", "warn"}, args...)...)
	cmd.Env = cleanEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("parley seed %q: %v\n%s", args, err, stderr.String())
	}
	raw := stdout
	if out != "-" {
		if raw, err = os.ReadFile(out); err != nil {
			t.Fatal(err)
		}
	}
	var res seedResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("seed output %q: %v", raw, err)
	}
	return &res
}

func TestSeed(t *testing.T) {
	data := t.TempDir()
	out := filepath.Join(t.TempDir(), "seed.json")
	const users, extra = 50, 3
	res := runSeedCmd(t, out, "--data", data, "--users", "50", "--channels", "3", "--out", out,
		"--base-url", "http://example.test")

	if res.WorkspaceID == "" || res.BaseURL != "http://example.test" || res.Owner.Token == "" {
		t.Fatalf("seed result header: %+v", res)
	}
	if len(res.Users) != users || len(res.Channels) != 1+extra || res.Channels[0].Name != "general" {
		t.Fatalf("%d users and channels %+v", len(res.Users), res.Channels)
	}
	// Spread: everyone in #general, user i in load-(i mod 3 + 1).
	tokens := map[string]bool{res.Owner.Token: true}
	counts := map[string]int{}
	for i, u := range res.Users {
		if u.ID == "" || tokens[u.Token] || !strings.HasPrefix(u.Handle, "load-") {
			t.Fatalf("user %d: %+v", i, u)
		}
		tokens[u.Token] = true
		want := []string{res.Channels[0].ID, res.Channels[1+i%extra].ID}
		if !slices.Equal(u.Channels, want) {
			t.Fatalf("user %d channels %v, want %v", i, u.Channels, want)
		}
		for _, c := range u.Channels {
			counts[c]++
		}
	}
	for _, c := range res.Channels {
		if c.Members != counts[c.ID]+1 { // the owner is in every channel
			t.Errorf("channel %s says %d members, users list %d (+ owner)", c.Name, c.Members, counts[c.ID])
		}
	}

	// The same slug again: a clear error, not a second workspace.
	cmd := exec.Command(binPath, "seed", "--data", data, "--users", "2")
	cmd.Env = cleanEnv()
	msg, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(string(msg), `workspace "load" is already seeded`) {
		t.Fatalf("second seed with the same slug: %v %s", err, msg)
	}

	// Another workspace in the same database, everyone in every channel,
	// the JSON on stdout.
	all := runSeedCmd(t, "-", "--data", data, "--slug", "all-in", "--users", "5", "--channels", "2",
		"--membership", "all", "--out", "-")
	for _, u := range all.Users {
		if len(u.Channels) != 3 {
			t.Fatalf("--membership all: user %s in %v", u.Handle, u.Channels)
		}
	}
	for _, c := range all.Channels {
		if c.Members != 6 {
			t.Fatalf("--membership all: %+v", all.Channels)
		}
	}

	// A node on the seeded database knows the tokens, the memberships and
	// the shared password.
	p := startParley(t, "--listen", "127.0.0.1:0", "--admin", "off", "--data", data)
	base := strings.TrimSuffix(p.url, "/")
	ctx := t.Context()
	for _, i := range []int{0, 17, users - 1} {
		u := res.Users[i]
		c := pclient.New(base, pclient.WithToken(u.Token))
		me, err := c.Me(ctx)
		if err != nil || me.ID != u.ID || me.Handle != u.Handle {
			t.Fatalf("GET /me as %s: %+v %v", u.Handle, me, err)
		}
		for _, chID := range u.Channels {
			if _, err := c.GetChannel(ctx, chID); err != nil {
				t.Fatalf("%s cannot see its channel %s: %v", u.Handle, chID, err)
			}
		}
	}
	owner := pclient.New(base, pclient.WithToken(res.Owner.Token))
	for _, ch := range res.Channels {
		page, err := owner.ListMembers(ctx, ch.ID, "", 200)
		if err != nil || len(page.Members) != ch.Members {
			t.Fatalf("members of %s: %d (%v), want %d", ch.Name, len(page.Members), err, ch.Members)
		}
	}
	anon := pclient.New(base)
	if _, err := anon.Login(ctx, res.Users[3].Email, res.Password); err != nil {
		t.Fatalf("login with the shared password: %v", err)
	}
	p.stop(t)
}
