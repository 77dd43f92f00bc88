package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"parley"
)

// badTexts are the three ways a client can send a string no store should
// take, as they appear inside a JSON string literal: an escaped NUL, a raw
// byte that is not UTF-8, and a lone UTF-16 surrogate.
var badTexts = []struct{ name, lit, why string }{
	{"nul", `a\u0000b`, "NUL"},
	{"invalid-utf8", "a\xffb", "UTF-8"},
	{"lone-surrogate", `a\ud800b`, "UTF-8"},
}

// TestBadTextRejected sends NUL and invalid UTF-8 in every string field of
// the API, on both stores: each is 400 bad_request naming the field, and
// nothing is stored. Before the check, PostgreSQL answered 500 to NUL and
// SQLite stored it; invalid UTF-8 was silently turned into U+FFFD.
func TestBadTextRejected(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			e := newEnvOn(t, d)
			ctx := context.Background()
			owner, bob := mustAccount(t, e.store, "owner"), mustAccount(t, e.store, "bob")
			ws := mustWorkspace(t, e.store, owner)
			mustJoin(t, e.store, ws, owner, bob)
			ch := mustChannel(t, e.store, ws, owner, parley.KindPublic)
			root := mustPost(t, e.store, owner, ch, "root")
			before, err := e.store.ListMessages(ctx, owner.ID, ch.ID, parley.HistoryQuery{})
			if err != nil {
				t.Fatal(err)
			}

			cases := []struct {
				method, path, body, field string
			}{
				{"POST", "/channels/" + ch.ID + "/messages", `{"text":"%s"}`, "text"},
				{"POST", "/channels/" + ch.ID + "/messages", `{"text":"ok","client_msg_id":"%s"}`, "client_msg_id"},
				{"POST", "/channels/" + ch.ID + "/messages", `{"text":"ok","thread_root_id":"` + root.ID + `%s"}`, "thread_root_id"},
				{"PATCH", "/messages/" + root.ID, `{"text":"%s"}`, "text"},
				{"PATCH", "/me", `{"name":"%s"}`, "name"},
				{"PATCH", "/me", `{"title":"%s"}`, "title"},
				{"PATCH", "/me", `{"avatar_hash":"%s"}`, "avatar_hash"},
				{"PUT", "/me/status", `{"emoji":"smile","text":"%s"}`, "text"},
				{"PUT", "/me/status", `{"emoji":"%s","text":"hi"}`, "emoji"},
				{"POST", "/workspaces/" + ws.ID + "/channels", `{"name":"n%s","kind":"public"}`, "name"},
				{"POST", "/workspaces/" + ws.ID + "/channels", `{"name":"fine-` + uniq() + `","kind":"public","topic":"%s"}`, "topic"},
				{"POST", "/workspaces/" + ws.ID + "/channels", `{"name":"fine-` + uniq() + `","kind":"public","purpose":"%s"}`, "purpose"},
				{"PATCH", "/channels/" + ch.ID, `{"name":"%s"}`, "name"},
				{"PATCH", "/channels/" + ch.ID, `{"topic":"%s"}`, "topic"},
				{"PATCH", "/channels/" + ch.ID, `{"purpose":"%s"}`, "purpose"},
				{"POST", "/workspaces", `{"name":"%s","slug":"s-` + uniq() + `"}`, "name"},
				{"POST", "/workspaces", `{"name":"ok","slug":"%s"}`, "slug"},
				{"POST", "/workspaces/" + ws.ID + "/invites", `{"note":"%s"}`, "note"},
				{"POST", "/sync", `{"channels":{"` + ch.ID + `%s":0}}`, "a key of channels"},
				{"POST", "/users/batch", `{"ids":["` + bob.ID + `","%s"]}`, "ids[1]"},
				{"POST", "/dms", `{"workspace_id":"` + ws.ID + `","user_ids":["%s"]}`, "user_ids[0]"},
				{"POST", "/dms", `{"workspace_id":"%s","user_ids":["` + bob.ID + `"]}`, "workspace_id"},
				{"POST", "/channels/" + ch.ID + "/members", `{"user_ids":["` + bob.ID + `","%s"]}`, "user_ids[1]"},
				{"PUT", "/workspaces/" + ws.ID + "/members/" + bob.ID + "/role", `{"role":"%s"}`, "role"},
				{"POST", "/boot", `{"workspace_id":"` + ws.ID + `","since":"%s"}`, "since"},
				{"POST", "/boot", `{"workspace_id":"` + ws.ID + `","channel_id":"%s"}`, "channel_id"},
				{"POST", "/boot", `{"workspace_id":"%s"}`, "workspace_id"},
				{"POST", "/auth/signup", `{"email":"x@example.com","password":"long enough pw","handle":"h` + uniq() + `","name":"%s"}`, "name"},
				{"POST", "/auth/login", `{"email":"%s","password":"long enough pw"}`, "email"},
				{"POST", "/channels/" + ch.ID + "/read", `{"seq":1,"x":{"deep":[1,{"y":"%s"}]}}`, "x.deep[1].y"},
			}
			for _, bt := range badTexts {
				for _, c := range cases {
					token := owner.Token
					body := strings.Replace(c.body, "%s", bt.lit, 1)
					r := e.call(c.method, c.path, token, body)
					if r.Status != http.StatusBadRequest || r.errCode() != parley.EINVALID ||
						!strings.Contains(string(r.Body), c.field) || !strings.Contains(string(r.Body), bt.why) {
						t.Errorf("%s: %s %s %s: status %d, body %s; want 400 bad_request naming %q",
							bt.name, c.method, c.path, c.body, r.Status, r.Body, c.field)
					}
				}
			}

			// Query parameters are checked the same way.
			for _, q := range []struct{ path, param string }{
				{"/workspaces/" + ws.ID + "/users?q=a%00b", "q"},
				{"/workspaces/" + ws.ID + "/users?q=a%FFb", "q"},
				{"/workspaces/" + ws.ID + "/switcher?q=a%00b", "q"},
				{"/workspaces/" + ws.ID + "/search?q=a%FFb", "q"},
				{"/channels/" + ch.ID + "/members?cursor=%00", "cursor"},
				{"/workspaces/" + ws.ID + "/channels?cursor=%C3", "cursor"},
			} {
				r := e.call("GET", q.path, owner.Token, nil)
				if r.Status != http.StatusBadRequest || r.errCode() != parley.EINVALID || !strings.Contains(string(r.Body), q.param) {
					t.Errorf("GET %s: status %d, body %s; want 400 naming %s", q.path, r.Status, r.Body, q.param)
				}
			}
			// A path holding NUL names nothing: 404, as before.
			if r := e.call("PUT", "/messages/"+root.ID+"/reactions/a%00b", owner.Token, nil); r.Status != http.StatusNotFound {
				t.Errorf("reaction with NUL in the path: status %d, want 404", r.Status)
			}

			// Nothing was stored.
			after, err := e.store.ListMessages(ctx, owner.ID, ch.ID, parley.HistoryQuery{})
			if err != nil {
				t.Fatal(err)
			}
			if len(after.Messages) != len(before.Messages) || after.Messages[0].Text != "root" || after.Messages[0].EditedAt != nil {
				t.Errorf("messages changed: %+v", after.Messages)
			}
			me, err := e.store.GetMe(ctx, owner.ID)
			if err != nil {
				t.Fatal(err)
			}
			if me.Name != owner.Name || me.Title != "" || me.Status != nil {
				t.Errorf("profile changed: %+v", me)
			}
			got, err := e.store.GetChannel(ctx, owner.ID, ch.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != ch.Name || got.Topic != "" || got.Purpose != "" {
				t.Errorf("channel changed: %+v", got)
			}
			chans, err := e.store.ListChannels(ctx, owner.ID, ws.ID, parley.ChannelQuery{})
			if err != nil {
				t.Fatal(err)
			}
			if len(chans.Channels) != 2 { // #general and ch
				t.Errorf("channels: %+v", chans.Channels)
			}
			wss, err := e.store.ListWorkspaces(ctx, owner.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(wss) != 1 {
				t.Errorf("workspaces: %+v", wss)
			}
		})
	}
}

// TestBadTextHonestReplacement: a U+FFFD the client really sent, literally
// or escaped, is text like any other.
func TestBadTextHonestReplacement(t *testing.T) {
	for _, body := range []string{`{"a":"x\ufffdy"}`, "{\"a\":\"x\uFFFDy\"}", `{"a":"\\u0000"}`, `{"a":"\ud83d\ude00"}`} {
		if err := checkJSONText([]byte(body)); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// BenchmarkCheckJSONText measures the check on well-formed bodies (the
// common case: one pass, no walk) and on a body that needs the walk.
func BenchmarkCheckJSONText(b *testing.B) {
	for _, c := range []struct{ name, body string }{
		{"message", `{"text":"Shipping the release notes now, see the thread 🚀","client_msg_id":"c-0123456789"}`},
		{"long", `{"text":"` + strings.Repeat("héllo wörld ", 3000) + `"}`},
		{"walk", `{"text":"fine","ids":["a","b","c\u0000"]}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			body := []byte(c.body)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				checkJSONText(body)
			}
		})
	}
}

// BenchmarkDecodeMessage is the decode the check rides on, for scale.
func BenchmarkDecodeMessage(b *testing.B) {
	body := []byte(`{"text":"` + strings.Repeat("héllo wörld ", 3000) + `"}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var m parley.NewMessage
		json.Unmarshal(body, &m)
	}
}
