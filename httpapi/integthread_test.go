package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"parley"
	"parley/sqlstore"
)

// Slash commands typed in a thread, and the bot_profile of webhook and
// command posts (docs/integrations.md).

// newThreadCommand makes the command /deploy on a signed endpoint.
func newThreadCommand(t *testing.T, e *integEnv) (*cmdEndpoint, parley.Integration) {
	t.Helper()
	ep := newCmdEndpoint(t)
	var cmd parley.Integration
	e.must(201, "POST", "/workspaces/"+e.ws.ID+"/integrations", e.admin.Token,
		map[string]string{"kind": "command", "name": "deploy", "url": ep.srv.URL}, &cmd)
	ep.mu.Lock()
	ep.secret = cmd.SigningSecret
	ep.mu.Unlock()
	return ep, cmd
}

// lastEphemeral is the newest message.ephemeral published to userID.
func (e *integEnv) lastEphemeral(t *testing.T, userID string) parley.EphemeralMessage {
	t.Helper()
	evs := e.rec.OfType(parley.EventMessageEphemeral)
	for i := len(evs) - 1; i >= 0; i-- {
		if len(evs[i].Topics) != 1 || evs[i].Topics[0] != parley.TopicUser(userID) {
			continue
		}
		var d struct {
			Message parley.EphemeralMessage `json:"message"`
		}
		if err := json.Unmarshal(evs[i].Data, &d); err != nil {
			t.Fatal(err)
		}
		return d.Message
	}
	t.Fatalf("no message.ephemeral to %s", userID)
	return parley.EphemeralMessage{}
}

func TestThreadCommands(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) { testThreadCommands(t, d) })
	}
}

func testThreadCommands(t *testing.T, d sqlstore.Dialect) {
	e := newIntegEnv(t, d, func(c *Config) { c.CommandTimeout = 2 * time.Second })
	ep, cmd := newThreadCommand(t, e)
	root := mustPost(t, e.store, e.admin, e.priv, "release thread")
	replies := func() []parley.Message {
		t.Helper()
		var page parley.MessagePage
		e.must(200, "GET", "/messages/"+root.ID+"/replies", e.member.Token, nil, &page)
		return page.Messages
	}
	replyCount := func() int {
		t.Helper()
		var m parley.Message
		e.must(200, "GET", "/messages/"+root.ID, e.member.Token, nil, &m)
		return m.ReplyCount
	}
	run := func(command, text, rootID string) cmdResult {
		t.Helper()
		var res cmdResult
		e.must(200, "POST", "/channels/"+e.priv.ID+"/commands", e.member.Token,
			map[string]string{"command": command, "text": text, "thread_root_id": rootID}, &res)
		return res
	}

	// The signed request names the thread, as Slack's thread_ts; the
	// in_channel answer is a reply in it.
	ep.set(jsonReply(`{"response_type":"in_channel","text":"Deploying *api*"}`))
	res := run("/deploy", "api", root.ID)
	f := ep.last()
	if f.Get("thread_ts") != root.ID || f.Get("thread_root_id") != root.ID || f.Get("channel_id") != e.priv.ID {
		t.Fatalf("signed form: thread_ts %q thread_root_id %q channel %q", f.Get("thread_ts"), f.Get("thread_root_id"), f.Get("channel_id"))
	}
	if res.Message == nil || res.Message.ThreadRootID != root.ID || res.Message.UserID != cmd.BotID {
		t.Fatalf("in_channel answer in thread: %+v", res.Message)
	}
	if n := replyCount(); n != 1 {
		t.Fatalf("reply_count %d after the answer, want 1", n)
	}
	// Not in the channel's history as a top-level message.
	var top parley.Message
	e.must(200, "GET", "/messages/"+res.Message.ID, e.member.Token, nil, &top)
	if top.ThreadRootID != root.ID {
		t.Fatalf("stored answer: %+v", top)
	}
	// Typed in the channel, nothing names a thread.
	ep.set(jsonReply(`{"text":"channel only"}`))
	run("/deploy", "x", "")
	if f := ep.last(); f.Has("thread_ts") || f.Has("thread_root_id") {
		t.Fatalf("channel command sent a thread: %v", f)
	}
	if eph := e.lastEphemeral(t, e.member.ID); eph.ThreadRootID != "" || eph.Text != "channel only" {
		t.Fatalf("channel ephemeral: %+v", eph)
	}

	// An ephemeral answer shows in the thread: in the answer and the event.
	ep.set(jsonReply(`{"text":"3 deploys queued"}`))
	res = run("/deploy", "queue", root.ID)
	if res.Ephemeral == nil || res.Ephemeral.ThreadRootID != root.ID {
		t.Fatalf("ephemeral answer: %+v", res)
	}
	if eph := e.lastEphemeral(t, e.member.ID); eph.ThreadRootID != root.ID || eph.Text != "3 deploys queued" {
		t.Fatalf("ephemeral event: %+v", eph)
	}
	// A failure's notice too.
	ep.set(func(w http.ResponseWriter, _ *http.Request, _ url.Values) { http.Error(w, "down", 503) })
	if res := run("/deploy", "x", root.ID); res.Ephemeral == nil || res.Ephemeral.ThreadRootID != root.ID || !strings.Contains(res.Ephemeral.Text, "HTTP 503") {
		t.Fatalf("failure notice: %+v", res)
	}

	// The delayed answer at response_url lands in the same thread.
	ep.set(jsonReply(``))
	run("/deploy", "later", root.ID)
	responseURL := ep.last().Get("response_url")
	if st, body, _ := postRaw(t, responseURL, "application/json", `{"response_type":"in_channel","text":"Deploy *done*"}`); st != 200 || body != "ok" {
		t.Fatalf("response_url: %d %q", st, body)
	}
	rs := replies()
	if len(rs) != 2 || rs[1].Text != "Deploy **done**" || rs[1].UserID != cmd.BotID || rs[1].ThreadRootID != root.ID {
		t.Fatalf("replies after response_url: %+v", rs)
	}
	postRaw(t, responseURL, "application/json", `{"text":"only you, later"}`)
	if eph := e.lastEphemeral(t, e.member.ID); eph.ThreadRootID != root.ID || eph.Text != "only you, later" {
		t.Fatalf("delayed ephemeral: %+v", eph)
	}

	// Built-ins: /me and /shrug reply in the thread; the others act on the
	// channel and answer in the thread.
	if res := run("/me", "waves", root.ID); res.Message == nil || res.Message.ThreadRootID != root.ID || res.Message.Text != "_waves_" {
		t.Fatalf("/me in thread: %+v", res)
	}
	if res := run("/shrug", "", root.ID); res.Message == nil || res.Message.ThreadRootID != root.ID {
		t.Fatalf("/shrug in thread: %+v", res)
	}
	if n := replyCount(); n != 4 {
		t.Fatalf("reply_count %d, want 4", n)
	}
	if res := run("/topic", "Release week", root.ID); res.Ephemeral == nil || res.Ephemeral.ThreadRootID != root.ID || res.Ephemeral.Text != "Topic set to: Release week" {
		t.Fatalf("/topic in thread: %+v", res)
	}
	if res := run("/invite", "@nobody-here", root.ID); res.Ephemeral == nil || res.Ephemeral.ThreadRootID != root.ID {
		t.Fatalf("/invite in thread: %+v", res)
	}

	// Threads that are not this channel's are refused before any call.
	calls := ep.count()
	reply := replies()[0]
	pub := mustChannel(t, e.store, e.ws, e.admin, parley.KindPublic)
	otherRoot := mustPost(t, e.store, e.admin, pub, "another channel's thread")
	other := mustAccount(t, e.store, "outsider")
	wsB := mustWorkspace(t, e.store, other)
	chB := mustChannel(t, e.store, wsB, other, parley.KindPublic)
	rootB := mustPost(t, e.store, other, chB, "another workspace's thread")
	deleted := mustPost(t, e.store, e.member, e.priv, "soon gone")
	e.must(204, "DELETE", "/messages/"+deleted.ID, e.member.Token, nil, nil)
	for _, id := range map[string]string{
		"another channel":   otherRoot.ID,
		"another workspace": rootB.ID,
		"a reply":           reply.ID,
		"a deleted root":    deleted.ID,
		"no such message":   "M00000000000000000000000000",
	} {
		for _, command := range []string{"/deploy", "/me"} {
			e.must(404, "POST", "/channels/"+e.priv.ID+"/commands", e.member.Token,
				map[string]string{"command": command, "text": "x", "thread_root_id": id}, nil)
		}
	}
	e.must(400, "POST", "/channels/"+e.priv.ID+"/commands", e.member.Token,
		map[string]string{"command": "/deploy", "thread_root_id": "M\x00"}, nil)
	if ep.count() != calls {
		t.Fatalf("refused threads called the URL: %d calls, want %d", ep.count(), calls)
	}
	if n := replyCount(); n != 4 {
		t.Fatalf("reply_count %d after refusals, want 4", n)
	}
	// The thread's root deleted after the command ran: the delayed answer
	// is not posted (the caller hears why).
	ep.set(jsonReply(``))
	doomed := mustPost(t, e.store, e.member, e.priv, "doomed thread")
	run("/deploy", "x", doomed.ID)
	lateURL := ep.last().Get("response_url")
	e.must(204, "DELETE", "/messages/"+doomed.ID, e.member.Token, nil, nil)
	postRaw(t, lateURL, "application/json", `{"response_type":"in_channel","text":"too late"}`)
	if m := e.lastMessage(t, e.priv.ID); m.Text == "too late" {
		t.Fatal("answer posted to a deleted thread")
	}
}

func TestBotProfile(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) { testBotProfile(t, d) })
	}
}

func testBotProfile(t *testing.T, d sqlstore.Dialect) {
	e := newIntegEnv(t, d, func(c *Config) { c.WebhookRate = parley.MustRate("1000/min,burst=1000") })
	var hook parley.Webhook
	e.must(201, "POST", "/channels/"+e.priv.ID+"/webhooks", e.admin.Token, map[string]string{"name": "CI"}, &hook)

	// Slack's overrides are kept and come back with the message.
	body := `{"text":"build *green*","username":"Jenkins","icon_emoji":":robot_face:","icon_url":"https://ci.example/jenkins.png"}`
	if st, got, _ := postRaw(t, hook.URL, "application/json", body); st != 200 || got != "ok" {
		t.Fatalf("post: %d %q", st, got)
	}
	m := e.lastMessage(t, e.priv.ID)
	want := parley.BotProfile{Name: "Jenkins", IconEmoji: "robot_face", IconURL: "https://ci.example/jenkins.png"}
	if m.UserID != hook.BotID || m.BotProfile == nil || *m.BotProfile != want {
		t.Fatalf("message %+v profile %+v", m, m.BotProfile)
	}
	// On the wire, under bot_profile.
	var raw map[string]json.RawMessage
	e.must(200, "GET", "/messages/"+m.ID, e.member.Token, nil, &raw)
	if string(raw["bot_profile"]) != `{"name":"Jenkins","icon_emoji":"robot_face","icon_url":"https://ci.example/jenkins.png"}` {
		t.Fatalf("bot_profile on the wire: %s", raw["bot_profile"])
	}
	// The published event carries it too.
	evs := e.rec.OfType(parley.EventMessageCreated)
	var ev parley.MessageEventData
	if err := json.Unmarshal(evs[len(evs)-1].Data, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Message.BotProfile == nil || *ev.Message.BotProfile != want {
		t.Fatalf("event: %+v", ev.Message)
	}
	// Without overrides, none.
	postRaw(t, hook.URL, "application/json", `{"text":"plain"}`)
	e.must(200, "GET", "/channels/"+e.priv.ID+"/messages?limit=1", e.admin.Token, nil, &raw)
	if strings.Contains(string(raw["messages"]), "bot_profile") {
		t.Fatalf("plain post has a bot_profile: %s", raw["messages"])
	}

	// Hostile overrides: refused whole, nothing posted.
	count := func() int {
		var page parley.MessagePage
		e.must(200, "GET", "/channels/"+e.priv.ID+"/messages?limit=200", e.admin.Token, nil, &page)
		return len(page.Messages)
	}
	n := count()
	for _, p := range []string{
		`{"text":"x","username":"nul\u0000name"}`,
		`{"text":"x","username":"` + strings.Repeat("n", 81) + `"}`,
		`{"text":"x","username":"two\nlines"}`,
		`{"text":"x","icon_emoji":"<img src=x onerror=alert(1)>"}`,
		`{"text":"x","icon_url":"javascript:alert(1)"}`,
		`{"text":"x","icon_url":"data:image/svg+xml,<svg onload=alert(1)>"}`,
		`{"text":"x","icon_url":"https://a:b@evil.example/x.png"}`,
		`{"text":"x","icon_url":"https://evil.example/\"><script>"}`,
		`{"text":"x","icon_url":"https://evil.example/` + strings.Repeat("a", 3000) + `"}`,
	} {
		if st, got, _ := postRaw(t, hook.URL, "application/json", p); st != 400 || got != "invalid_payload" {
			t.Errorf("%.60s: %d %q, want 400 invalid_payload", p, st, got)
		}
	}
	if c := count(); c != n {
		t.Fatalf("hostile posts landed: %d messages, want %d", c, n)
	}

	// A person's post cannot carry one: the field is not read from requests.
	var mine parley.Message
	e.must(201, "POST", "/channels/"+e.priv.ID+"/messages", e.member.Token,
		map[string]any{"text": "I am Jenkins", "client_msg_id": uniq(), "bot_profile": map[string]string{"name": "Jenkins"}}, &mine)
	if mine.BotProfile != nil {
		t.Fatalf("a person's message took a bot_profile: %+v", mine.BotProfile)
	}

	// Command answers: in_channel and ephemeral keep theirs; a bad one is
	// the caller's notice and posts nothing.
	ep, cmd := newThreadCommand(t, e)
	ep.set(jsonReply(`{"response_type":"in_channel","text":"shipped","username":"Release bot","icon_emoji":":rocket:"}`))
	var res cmdResult
	e.must(200, "POST", "/channels/"+e.priv.ID+"/commands", e.member.Token, map[string]string{"command": "/deploy"}, &res)
	if res.Message == nil || res.Message.UserID != cmd.BotID || res.Message.BotProfile == nil ||
		*res.Message.BotProfile != (parley.BotProfile{Name: "Release bot", IconEmoji: "rocket"}) {
		t.Fatalf("in_channel answer: %+v", res.Message)
	}
	ep.set(jsonReply(`{"text":"just you","username":"Helper","icon_url":"http://ci.example/h.png"}`))
	e.must(200, "POST", "/channels/"+e.priv.ID+"/commands", e.member.Token, map[string]string{"command": "/deploy"}, &res)
	if res.Ephemeral == nil || res.Ephemeral.BotProfile == nil || res.Ephemeral.BotProfile.Name != "Helper" {
		t.Fatalf("ephemeral answer: %+v", res.Ephemeral)
	}
	n = count()
	ep.set(jsonReply(`{"response_type":"in_channel","text":"x","icon_url":"javascript:alert(1)"}`))
	res = cmdResult{}
	e.must(200, "POST", "/channels/"+e.priv.ID+"/commands", e.member.Token, map[string]string{"command": "/deploy"}, &res)
	if res.Ephemeral == nil || !strings.Contains(res.Ephemeral.Text, "icon_url must be an http or https URL") || res.Message != nil {
		t.Fatalf("bad answer: %+v", res)
	}
	if c := count(); c != n {
		t.Fatalf("a refused answer posted: %d messages, want %d", c, n)
	}
}
