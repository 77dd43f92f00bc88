package httpapi

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"parley"
)

// bootTeam is a workspace with alice (owner) and bob, a public channel
// both are in, and a DM between them.
type bootTeam struct {
	alice, bob, carol *account
	ws                *parley.Workspace
	ch, dm            *parley.Channel
}

func newBootTeam(t *testing.T, e *env) *bootTeam {
	t.Helper()
	tm := &bootTeam{
		alice: mustAccount(t, e.store, "alice"),
		bob:   mustAccount(t, e.store, "bob"),
		carol: mustAccount(t, e.store, "carol"),
	}
	tm.ws = mustWorkspace(t, e.store, tm.alice)
	mustJoin(t, e.store, tm.ws, tm.alice, tm.bob, tm.carol)
	tm.ch = mustChannel(t, e.store, tm.ws, tm.alice, parley.KindPublic)
	if _, err := e.store.JoinChannel(context.Background(), tm.bob.ID, tm.ch.ID); err != nil {
		t.Fatal(err)
	}
	dm, _, err := e.store.OpenDM(context.Background(), tm.alice.ID, tm.ws.ID, []string{tm.bob.ID})
	if err != nil {
		t.Fatal(err)
	}
	tm.dm = dm
	return tm
}

func TestBootShape(t *testing.T) {
	e := newEnv(t)
	tm := newBootTeam(t, e)
	mustPost(t, e.store, tm.alice, tm.ch, "hello @"+tm.bob.Handle)
	mustPost(t, e.store, tm.alice, tm.ch, "again")
	mustPost(t, e.store, tm.alice, tm.dm, "psst")

	r := e.must(200, "POST", "/boot", tm.bob.Token, map[string]string{"workspace_id": tm.ws.ID}, nil)
	var raw map[string]json.RawMessage
	r.decode(t, &raw)
	for _, k := range []string{"self", "workspace", "channels", "dms", "version", "ws_url", "limits", "prefs"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("boot has no %q: %s", k, r.Body)
		}
	}
	for _, k := range []string{"users", "channel_ids", "channel", "messages"} {
		if _, ok := raw[k]; ok {
			t.Errorf("full boot has %q: %s", k, r.Body)
		}
	}
	var b parley.Boot
	r.decode(t, &b)
	if want := "ws://" + strings.TrimPrefix(e.srv.URL, "http://") + "/api/v1/gateway"; b.WSURL != want {
		t.Errorf("ws_url = %q, want %q", b.WSURL, want)
	}
	if b.Limits == nil || b.Limits.MaxMessageChars != parley.MaxMessageLen || b.Limits.RateLimits["login_per_account_ip"].PerMinute != 5 || b.Limits.RateLimits["message_per_user"].PerMinute != 120 {
		t.Errorf("limits = %+v", b.Limits)
	}
	if string(raw["prefs"]) != "{}" || b.Self.ID != tm.bob.ID || b.Self.Email != tm.bob.Email || b.Workspace.ID != tm.ws.ID {
		t.Errorf("prefs %s, self %+v, workspace %+v", raw["prefs"], b.Self, b.Workspace)
	}
	var ch *parley.BootChannel
	for i := range b.Channels {
		if b.Channels[i].ID == tm.ch.ID {
			ch = &b.Channels[i]
		}
	}
	if ch == nil || ch.UnreadCount != 2 || ch.MentionCount != 1 || ch.MemberCount != 2 || ch.Name != tm.ch.Name {
		t.Fatalf("channel row %+v in %s", ch, r.Body)
	}
	if len(b.DMs) != 1 || b.DMs[0].ID != tm.dm.ID || b.DMs[0].UnreadCount != 1 || len(b.DMs[0].DMUserIDs) != 2 {
		t.Fatalf("dms %+v", b.DMs)
	}
	// The channel object carries the counts too.
	var got parley.Channel
	e.must(200, "GET", "/channels/"+tm.ch.ID, tm.bob.Token, nil, &got)
	if got.UnreadCount != 2 || got.MentionCount != 1 {
		t.Fatalf("GET channel counts %+v", got)
	}

	// Incremental: read the channel, then boot since the version.
	e.must(200, "POST", "/channels/"+tm.ch.ID+"/read", tm.bob.Token, map[string]int64{"seq": ch.LastSeq}, nil)
	var inc parley.Boot
	e.must(200, "POST", "/boot", tm.bob.Token, map[string]string{"workspace_id": tm.ws.ID, "since": b.Version}, &inc)
	if len(inc.Channels) != 1 || inc.Channels[0].ID != tm.ch.ID || inc.Channels[0].UnreadCount != 0 || len(inc.DMs) != 0 {
		t.Fatalf("since boot channels %+v dms %+v", inc.Channels, inc.DMs)
	}
	if len(inc.ChannelIDs) != len(b.Channels)+len(b.DMs) || inc.Version == b.Version {
		t.Fatalf("since boot channel_ids %v, version %q", inc.ChannelIDs, inc.Version)
	}
}

func TestBootOneChannelUsers(t *testing.T) {
	var (
		mu    sync.Mutex
		asked [][]string
	)
	var e *env
	e = newEnv(t, func(c *Config) {
		c.WSURL = func(ws string) string { return "wss://node-7.example/api/v1/gateway?ws=" + ws }
		c.Directory = usersSpy{c.Directory, func(ids []string) {
			mu.Lock()
			asked = append(asked, ids)
			mu.Unlock()
		}}
	})
	tm := newBootTeam(t, e)
	mustPost(t, e.store, tm.alice, tm.ch, "hi @"+tm.carol.Handle+" and @"+tm.bob.Handle+" and @ghost-user")
	mustPost(t, e.store, tm.bob, tm.ch, "@channel hello")

	var b parley.Boot
	r := e.must(200, "POST", "/boot", tm.bob.Token, map[string]any{"workspace_id": tm.ws.ID, "channel_id": tm.ch.ID}, &b)
	if b.Channel == nil || b.Channel.ID != tm.ch.ID || len(b.Channels) != 1 || len(b.DMs) != 0 || len(b.Messages) != 2 || b.Version != "" {
		t.Fatalf("one-channel boot %s", r.Body)
	}
	var ids []string
	for _, u := range b.Users {
		ids = append(ids, u.ID)
		if u.Email != "" {
			t.Errorf("user %s carries an email", u.ID)
		}
	}
	if want := []string{tm.alice.ID, tm.bob.ID, tm.carol.ID}; !slices.Equal(ids, want) {
		t.Fatalf("users %v, want exactly the authors and the mentioned: %v", ids, want)
	}
	if len(asked) != 1 || b.WSURL != "wss://node-7.example/api/v1/gateway?ws="+tm.ws.ID {
		t.Fatalf("users lookup asked %v; ws_url %q", asked, b.WSURL)
	}

	// An empty channel: empty lists, and no lookup.
	empty := mustChannel(t, e.store, tm.ws, tm.alice, parley.KindPublic)
	var raw map[string]json.RawMessage
	e.must(200, "POST", "/boot", tm.bob.Token, map[string]any{"workspace_id": tm.ws.ID, "channel_id": empty.ID}, &raw)
	if string(raw["messages"]) != "[]" || string(raw["users"]) != "[]" || len(asked) != 1 {
		t.Fatalf("empty channel boot: messages %s, users %s, lookups %d", raw["messages"], raw["users"], len(asked))
	}
}

// usersSpy records the ids of each Users lookup, then asks the real
// directory.
type usersSpy struct {
	parley.DirectoryQueries
	asked func(ids []string)
}

func (s usersSpy) Users(ctx context.Context, ws string, ids []string) ([]parley.User, error) {
	s.asked(ids)
	return s.DirectoryQueries.Users(ctx, ws, ids)
}

func TestBootErrors(t *testing.T) {
	e := newEnv(t)
	tm := newBootTeam(t, e)
	other := mustAccount(t, e.store, "other")
	otherWS := mustWorkspace(t, e.store, other)
	elsewhere := mustChannel(t, e.store, otherWS, other, parley.KindPublic)
	secret := mustChannel(t, e.store, tm.ws, tm.alice, parley.KindPrivate)

	cases := []struct {
		name   string
		token  string
		body   any
		status int
	}{
		{"no token", "", map[string]string{"workspace_id": tm.ws.ID}, 401},
		{"no body", tm.bob.Token, nil, 400},
		{"no workspace", tm.bob.Token, map[string]string{}, 400},
		{"wrong type", tm.bob.Token, map[string]int{"workspace_id": 3}, 400},
		{"bad since", tm.bob.Token, map[string]string{"workspace_id": tm.ws.ID, "since": "???"}, 400},
		{"since and channel", tm.bob.Token, map[string]string{"workspace_id": tm.ws.ID, "since": "AQ", "channel_id": tm.ch.ID}, 400},
		{"unknown workspace", tm.bob.Token, map[string]string{"workspace_id": "Wnope"}, 404},
		{"another's workspace", tm.bob.Token, map[string]string{"workspace_id": otherWS.ID}, 404},
		{"channel of another workspace", tm.bob.Token, map[string]string{"workspace_id": tm.ws.ID, "channel_id": elsewhere.ID}, 404},
		{"private channel not joined", tm.bob.Token, map[string]string{"workspace_id": tm.ws.ID, "channel_id": secret.ID}, 404},
	}
	for _, c := range cases {
		r := e.call("POST", "/boot", c.token, c.body)
		if r.Status != c.status || StatusOf(r.errCode()) != c.status {
			t.Errorf("%s: status %d (%s), want %d", c.name, r.Status, r.Body, c.status)
		}
	}
	// The version of another user is refused, not silently answered.
	var ab parley.Boot
	e.must(200, "POST", "/boot", tm.alice.Token, map[string]string{"workspace_id": tm.ws.ID}, &ab)
	e.must(400, "POST", "/boot", tm.bob.Token, map[string]string{"workspace_id": tm.ws.ID, "since": ab.Version}, nil)
}
