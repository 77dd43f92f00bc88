package client

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"parley"
	"parley/integrations"
)

// A slash command typed in a thread answers in it, over HTTP and the
// gateway, with the name and icon its answer asked for; a webhook's
// overrides come back through the client's reads.

func TestE2EThreadCommandBotProfile(t *testing.T) {
	e := newNode(t, nil)
	alice, bob := e.mustAccount("alice"), e.mustAccount("bob")
	ws := e.mustWorkspace(alice, bob)
	ch := e.mustChannel(ws, alice, parley.KindPrivate)
	ctx := t.Context()
	if _, err := alice.Client.AddMembers(ctx, ch.ID, []string{bob.ID}); err != nil {
		t.Fatal(err)
	}
	var secret string
	forms := make(chan string, 4)
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := integrations.Verify(secret, r.Header.Get(integrations.HeaderTimestamp), r.Header.Get(integrations.HeaderSignature), body, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		forms <- string(body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"response_type":"in_channel","text":"deployed","username":"Release bot","icon_emoji":":rocket:"}`)
	}))
	t.Cleanup(endpoint.Close)
	cmd, err := alice.Client.CreateIntegration(ctx, ws.ID, parley.NewIntegration{Kind: parley.IntegrationCommand, Name: "ship", URL: endpoint.URL})
	if err != nil {
		t.Fatal(err)
	}
	secret = cmd.SigningSecret
	root, err := alice.Client.PostMessage(ctx, ch.ID, parley.NewMessage{Text: "release 1.4"})
	if err != nil {
		t.Fatal(err)
	}
	recA := newRecorder()
	dial(t, alice, ws, ConnectOptions{Handler: recA.handle})

	res, err := bob.Client.RunCommand(ctx, ch.ID, "/ship", "api", root.ID)
	if err != nil {
		t.Fatal(err)
	}
	if form := <-forms; !strings.Contains(form, "thread_ts="+root.ID) {
		t.Fatalf("signed form without thread_ts: %s", form)
	}
	want := parley.BotProfile{Name: "Release bot", IconEmoji: "rocket"}
	if res.Message == nil || res.Message.ThreadRootID != root.ID || res.Message.BotProfile == nil || *res.Message.BotProfile != want {
		t.Fatalf("result %+v", res.Message)
	}
	// Alice's session gets the reply, thread and profile included.
	evs := recA.waitFor(t, "the answer at alice", func(evs []Event) bool {
		return slices.ContainsFunc(evs, func(ev Event) bool { return ev.Type == parley.EventMessageCreated && ev.Seq == res.Message.Seq })
	})
	i := slices.IndexFunc(evs, func(ev Event) bool { return ev.Type == parley.EventMessageCreated && ev.Seq == res.Message.Seq })
	var d parley.MessageEventData
	if err := json.Unmarshal(evs[i].Data, &d); err != nil || d.Message.ThreadRootID != root.ID || d.Message.BotProfile == nil || *d.Message.BotProfile != want {
		t.Fatalf("event %s: %v", evs[i].Data, err)
	}
	replies, err := alice.Client.ListReplies(ctx, root.ID, 0, 10)
	if err != nil || len(replies.Messages) != 1 || replies.Messages[0].BotProfile == nil {
		t.Fatalf("replies %+v %v", replies, err)
	}
	got, err := alice.Client.GetMessage(ctx, root.ID)
	if err != nil || got.ReplyCount != 1 {
		t.Fatalf("root %+v %v", got, err)
	}
	// A thread of another channel is refused.
	other := e.mustChannel(ws, alice, parley.KindPublic)
	elsewhere, err := alice.Client.PostMessage(ctx, other.ID, parley.NewMessage{Text: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Client.RunCommand(ctx, ch.ID, "/ship", "api", elsewhere.ID); ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("another channel's thread: %v", err)
	}

	// A webhook's overrides read back through the client.
	hook, err := alice.Client.CreateWebhook(ctx, ch.ID, "CI")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(hook.URL, "application/json", strings.NewReader(`{"text":"green","username":"Jenkins","icon_url":"https://ci.example/j.png"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("webhook: %d", resp.StatusCode)
	}
	page, err := alice.Client.ListMessages(ctx, ch.ID, parley.HistoryQuery{Limit: 1})
	if err != nil || len(page.Messages) != 1 {
		t.Fatalf("history %+v %v", page, err)
	}
	if p := page.Messages[0].BotProfile; p == nil || *p != (parley.BotProfile{Name: "Jenkins", IconURL: "https://ci.example/j.png"}) {
		t.Fatalf("webhook message profile %+v", p)
	}
}
