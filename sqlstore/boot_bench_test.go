package sqlstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"parley"
	"parley/sqlstore"
	"parley/storetest"
)

// Boot benchmark; docs/benchmarks.md ("Boot") has the command and results.
// A generated workspace of bootUsers users and bootChannels channels besides
// #general, the caller in bootCallerChannels of them (#general included;
// plus bootCallerDMs DMs): the thin
// boot against a naive full snapshot of the same workspace (every user,
// every channel, every membership, as an rtm.start-style payload would
// carry), both encoded with encoding/json the way the API does.

const (
	bootUsers          = 10_000
	bootChannels       = 2_000
	bootCallerChannels = 200
	bootCallerDMs      = 10
	bootPerUser        = 10 // channels each other user is in
	bootPostsPerChan   = 5  // posts in each of the caller's channels
)

type bootBenchTeam struct {
	st       *sqlstore.Store
	ws       *parley.Workspace
	caller   *parley.User
	channels []*parley.Channel
}

// newBootBenchTeam generates the workspace through the store's own methods
// (a fixed password hash; eight writers at once, so that group commit
// batches them).
func newBootBenchTeam(b *testing.B) *bootBenchTeam {
	b.Helper()
	ctx := context.Background()
	st := mustOpen(b, sqlstore.Config{Path: filepath.Join(b.TempDir(), "parley.db")})
	t := &bootBenchTeam{st: st}
	admin := storetest.MustUser(b, st, "admin")
	t.ws = storetest.MustWorkspace(b, st, admin)
	inv, err := st.CreateInvite(ctx, admin.ID, t.ws.ID, parley.InviteParams{})
	if err != nil {
		b.Fatal(err)
	}
	users := make([]*parley.User, bootUsers)
	must := func(what string, err error) {
		if err != nil {
			b.Fatalf("%s: %v", what, err)
		}
	}
	must("users", runWriters(bootUsers, func(i int) error {
		h := fmt.Sprintf("user-%05d", i)
		u, err := st.CreateUser(ctx, parley.NewUser{Email: h + "@example.com", Name: fmt.Sprintf("User %d", i),
			Handle: h, PasswordHash: "$argon2id$v=19$m=65536,t=1,p=2$precomputed$hash"})
		if err != nil {
			return err
		}
		users[i] = u
		_, err = st.AcceptInvite(ctx, u.ID, inv.Code)
		return err
	}))
	t.caller = users[0]
	t.channels = make([]*parley.Channel, bootChannels)
	must("channels", runWriters(bootChannels, func(i int) error {
		kind := parley.KindPublic
		if i%10 == 9 {
			kind = parley.KindPrivate
		}
		ch, err := st.CreateChannel(ctx, admin.ID, t.ws.ID, parley.NewChannel{Name: fmt.Sprintf("channel-%04d", i), Kind: kind})
		t.channels[i] = ch
		return err
	}))
	// Memberships: the caller in #general and the first
	// bootCallerChannels-1 channels, every other user in #general and
	// bootPerUser channels spread over all of them.
	byChannel := make([][]string, bootChannels)
	for c := range bootCallerChannels - 1 {
		byChannel[c] = append(byChannel[c], t.caller.ID)
	}
	for i, u := range users[1:] {
		for j := range bootPerUser {
			c := (i*7 + j*(bootChannels/bootPerUser+3)) % bootChannels
			byChannel[c] = append(byChannel[c], u.ID)
		}
	}
	must("memberships", runWriters(bootChannels, func(c int) error {
		ids := slices.Compact(slices.Sorted(slices.Values(byChannel[c])))
		for len(ids) > 0 {
			n := min(len(ids), parley.MaxAddMembers)
			if _, err := st.AddMembers(ctx, admin.ID, t.channels[c].ID, ids[:n]); err != nil {
				return err
			}
			ids = ids[n:]
		}
		return nil
	}))
	// Traffic in the caller's channels: posts by the admin, a fifth of
	// them mentioning the caller, an @channel in every tenth channel; the
	// caller has read half of the channels; and DMs with one message each.
	must("posts", runWriters((bootCallerChannels-1)*bootPostsPerChan, func(i int) error {
		c, k := i/bootPostsPerChan, i%bootPostsPerChan
		text := fmt.Sprintf("message %d in channel %d", k, c)
		switch {
		case k == 0:
			text += " @" + t.caller.Handle
		case k == 1 && c%10 == 0:
			text += " @channel"
		}
		_, _, err := st.PostMessage(ctx, admin.ID, t.channels[c].ID, parley.NewMessage{Text: text})
		return err
	}))
	for c := 0; c < bootCallerChannels-1; c += 2 {
		_, err := st.MarkRead(ctx, t.caller.ID, t.channels[c].ID, 1<<40)
		must("mark read", err)
	}
	for i := 1; i <= bootCallerDMs; i++ {
		dm, _, err := st.OpenDM(ctx, t.caller.ID, t.ws.ID, []string{users[i].ID})
		must("open dm", err)
		_, _, err = st.PostMessage(ctx, users[i].ID, dm.ID, parley.NewMessage{Text: "hi @" + t.caller.Handle})
		must("dm post", err)
	}
	return t
}

// naiveSnapshot is what a boot without lazy loading would send: the thin
// boot plus every user, every channel and every membership.
type naiveSnapshot struct {
	*parley.Boot
	Users       []parley.User       `json:"users"`
	AllChannels []parley.Channel    `json:"all_channels"`
	Members     map[string][]string `json:"members"`
}

func (t *bootBenchTeam) naive(ctx context.Context) ([]byte, error) {
	b, err := t.st.Boot(ctx, t.caller.ID, parley.BootQuery{WorkspaceID: t.ws.ID})
	if err != nil {
		return nil, err
	}
	snap := naiveSnapshot{Boot: b, Members: map[string][]string{}}
	err = t.st.ReadDirectory(ctx, t.ws.ID, parley.DirectoryVisitor{
		User:    func(u *parley.User, _ parley.Role) { snap.Users = append(snap.Users, *u) },
		Channel: func(c *parley.Channel) { snap.AllChannels = append(snap.AllChannels, *c) },
		Member:  func(ch, u string) { snap.Members[ch] = append(snap.Members[ch], u) },
	})
	if err != nil {
		return nil, err
	}
	return json.Marshal(snap)
}

// BenchmarkBoot reports, per kind of boot, the JSON size and the p50 and
// p99 latency of reading and encoding it.
func BenchmarkBoot(b *testing.B) {
	t := newBootBenchTeam(b)
	ctx := context.Background()
	full, err := t.st.Boot(ctx, t.caller.ID, parley.BootQuery{WorkspaceID: t.ws.ID})
	if err != nil {
		b.Fatal(err)
	}
	if n := len(full.Channels); n != bootCallerChannels || len(full.DMs) != bootCallerDMs {
		b.Fatalf("boot has %d channels and %d dms", n, len(full.DMs))
	}
	boot := func(q parley.BootQuery) func() ([]byte, error) {
		return func() ([]byte, error) {
			bt, err := t.st.Boot(ctx, t.caller.ID, q)
			if err != nil {
				return nil, err
			}
			return json.Marshal(bt)
		}
	}
	cases := []struct {
		name string
		run  func() ([]byte, error)
	}{
		{"thin", boot(parley.BootQuery{WorkspaceID: t.ws.ID})},
		{"since-unchanged", boot(parley.BootQuery{WorkspaceID: t.ws.ID, Since: full.Version})},
		{"one-channel", boot(parley.BootQuery{WorkspaceID: t.ws.ID, ChannelID: t.channels[1].ID})},
		{"naive-full", func() ([]byte, error) { return t.naive(ctx) }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var lat []time.Duration
			var size int
			for b.Loop() {
				start := time.Now()
				out, err := c.run()
				lat = append(lat, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				size = len(out)
			}
			slices.Sort(lat)
			pct := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(float64(size), "bytes")
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
		})
	}
}
