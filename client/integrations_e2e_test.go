package client

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"parley"
	"parley/integrations"
)

// End to end on one node: a bot's token on the HTTP API and the gateway,
// and a slash command's ephemeral answer delivered over the gateway to the
// caller's sessions only.

func TestE2EBotTokenOnGateway(t *testing.T) {
	e := newNode(t, nil)
	alice := e.mustAccount("alice")
	ws := e.mustWorkspace(alice)
	ch := e.mustChannel(ws, alice, parley.KindPrivate)
	ctx := t.Context()
	bot, err := alice.Client.CreateBot(ctx, ws.ID, parley.NewBot{Name: "Deployer", Handle: "deployer-" + uniq()})
	if err != nil {
		t.Fatal(err)
	}
	full, err := alice.Client.CreateBotToken(ctx, ws.ID, bot.User.ID, "ci", []string{parley.ScopeChannelsRead, parley.ScopeChatWrite})
	if err != nil {
		t.Fatal(err)
	}
	writeOnly, err := alice.Client.CreateBotToken(ctx, ws.ID, bot.User.ID, "post only", []string{parley.ScopeChatWrite})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Client.AddMembers(ctx, ch.ID, []string{bot.User.ID}); err != nil {
		t.Fatal(err)
	}

	// Without channels:read the gateway refuses the token (4004, fatal).
	wo := New(e.srv.URL, WithToken(writeOnly.Token), WithLogger(quietLogger()))
	if r := waitConnect(t, connectAsync(ctx, wo, ws.ID, ConnectOptions{MinBackoff: 20 * time.Millisecond})); r.err == nil {
		t.Fatal("a token without channels:read identified on the gateway")
	}
	// It still posts over HTTP: chat:write is what posting needs.
	if _, err := wo.PostMessage(ctx, ch.ID, parley.NewMessage{Text: "posted with chat:write only"}); err != nil {
		t.Fatalf("post with chat:write: %v", err)
	}

	botClient := New(e.srv.URL, WithToken(full.Token), WithLogger(quietLogger()))
	rec := newRecorder()
	conn := waitConnect(t, connectAsync(ctx, botClient, ws.ID, ConnectOptions{Handler: rec.handle, MinBackoff: 20 * time.Millisecond}))
	if conn.err != nil {
		t.Fatalf("bot identify: %v", conn.err)
	}
	m, err := alice.Client.PostMessage(ctx, ch.ID, parley.NewMessage{Text: "@deployer ship it"})
	if err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "alice's message at the bot", func(evs []Event) bool {
		return slices.ContainsFunc(evs, func(ev Event) bool {
			var d parley.MessageEventData
			return ev.Type == parley.EventMessageCreated && json.Unmarshal(ev.Data, &d) == nil && d.Message.ID == m.ID
		})
	})
	// Revoking the token closes the bot's socket.
	if err := alice.Client.RevokeBotToken(ctx, ws.ID, full.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-conn.conn.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the revoked bot's connection stayed open")
	}
}

func TestE2ESlashCommandEphemeral(t *testing.T) {
	e := newNode(t, nil)
	alice, bob := e.mustAccount("alice"), e.mustAccount("bob")
	ws := e.mustWorkspace(alice, bob)
	ch := e.mustChannel(ws, alice, parley.KindPrivate)
	ctx := t.Context()
	if _, err := alice.Client.AddMembers(ctx, ch.ID, []string{bob.ID}); err != nil {
		t.Fatal(err)
	}
	var secret string
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := integrations.Verify(secret, r.Header.Get(integrations.HeaderTimestamp), r.Header.Get(integrations.HeaderSignature), body, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"response_type":"ephemeral","text":"3 builds queued"}`)
	}))
	t.Cleanup(endpoint.Close)
	cmd, err := alice.Client.CreateIntegration(ctx, ws.ID, parley.NewIntegration{Kind: parley.IntegrationCommand, Name: "builds", URL: endpoint.URL})
	if err != nil {
		t.Fatal(err)
	}
	secret = cmd.SigningSecret

	recA, recB := newRecorder(), newRecorder()
	dial(t, alice, ws, ConnectOptions{Handler: recA.handle})
	dial(t, bob, ws, ConnectOptions{Handler: recB.handle})
	res, err := bob.Client.RunCommand(ctx, ch.ID, "/builds", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if res.ResponseType != "ephemeral" || res.Ephemeral == nil || res.Ephemeral.Text != "3 builds queued" {
		t.Fatalf("result %+v", res)
	}
	isEphemeral := func(ev Event) bool { return ev.Type == parley.EventMessageEphemeral }
	evs := recB.waitFor(t, "message.ephemeral at bob", func(evs []Event) bool { return slices.ContainsFunc(evs, isEphemeral) })
	var d struct {
		Message parley.EphemeralMessage `json:"message"`
	}
	i := slices.IndexFunc(evs, isEphemeral)
	if err := json.Unmarshal(evs[i].Data, &d); err != nil || d.Message.ID != res.Ephemeral.ID || d.Message.UserID != cmd.BotID {
		t.Fatalf("ephemeral event %s: %v", evs[i].Data, err)
	}
	// Alice gets the next message but never bob's ephemeral answer.
	m, err := bob.Client.PostMessage(ctx, ch.ID, parley.NewMessage{Text: "after"})
	if err != nil {
		t.Fatal(err)
	}
	evsA := recA.waitFor(t, "bob's next message at alice", func(evs []Event) bool {
		return slices.ContainsFunc(evs, func(ev Event) bool { return ev.Type == parley.EventMessageCreated && ev.Seq == m.Seq })
	})
	if slices.ContainsFunc(evsA, isEphemeral) {
		t.Fatal("alice got bob's ephemeral answer")
	}
	// Built-ins take the same path: /me posts for the caller.
	if res, err := bob.Client.RunCommand(ctx, ch.ID, "/me", "waves", ""); err != nil || res.Message == nil || res.Message.Text != "_waves_" {
		t.Fatalf("/me: %+v %v", res, err)
	}
}
