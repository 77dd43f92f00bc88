package shardstore_test

import (
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/auth"
	"parley/httpapi"
	"parley/shardstore"
	"parley/storetest"
)

// Integrations routed: bots, tokens, webhooks, commands and the audit log
// of a workspace on a shard other than the default one, through the HTTP
// API over the router (the node's wiring), and the router's own calls.

// integAPI serves the HTTP API over c's router, integrations included.
func integAPI(t *testing.T, c *cluster) *httptest.Server {
	t.Helper()
	api := httptest.NewServer(httpapi.New(httpapi.Config{Store: c.r, Integrations: c.r, Directory: c.dirQueries(t),
		Rates: parley.LiveRatesOff()}).Handler())
	t.Cleanup(api.Close)
	return api
}

type signedUp struct {
	User  parley.User `json:"user"`
	Token string      `json:"token"`
}

func signup(t *testing.T, api *httptest.Server, handle string) signedUp {
	t.Helper()
	var s signedUp
	call(t, api.URL, "", "POST", "/auth/signup", map[string]string{"email": handle + "@example.com",
		"password": "correct horse battery", "name": handle, "handle": handle}, http.StatusCreated, &s)
	return s
}

// wsOffDefault creates owner's workspaces until one is placed on a shard
// other than the default (the control database), and returns it.
func wsOffDefault(t *testing.T, c *cluster, owner *parley.User) *parley.Workspace {
	t.Helper()
	for range len(c.shards) + 1 {
		w := storetest.MustWorkspace(t, c.r, owner)
		if c.shardOf(t, w.ID) != c.shards[0] {
			return w
		}
	}
	t.Fatal("no workspace placed off the default shard")
	return nil
}

// countIn runs a COUNT(*) query on one shard's database.
func countIn(t *testing.T, dsn, q string, args ...any) int {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(bg(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func (c *cluster) dsnOf(t *testing.T, ws string) string {
	t.Helper()
	return c.dsns[indexOf(c.shards, c.shardOf(t, ws))]
}

// TestBotOnOtherShard: a bot of a workspace on a shard other than the
// control database is made there, authenticates with its token (its row
// and session copied to the control database), posts into its workspace,
// is audited there; a handle the control database has is refused; a
// revoked token and a revoked bot's token are refused.
func TestBotOnOtherShard(t *testing.T) {
	c := newCluster(t, &storetest.Recorder{})
	api := integAPI(t, c)
	owner := signup(t, api, "botowner")
	ws := wsOffDefault(t, c, &owner.User)
	dsn, control := c.dsnOf(t, ws.ID), c.dsns[0]
	ch := storetest.MustChannel(t, c.r, ws, &owner.User, "deploys", parley.KindPublic)

	// A handle only the control database has (a person with no workspace
	// on this shard) is refused before any bot is made.
	loner := storetest.MustUser(t, c.r, "loner")
	call(t, api.URL, owner.Token, "POST", "/workspaces/"+ws.ID+"/bots", map[string]string{"name": "Loner", "handle": loner.Handle},
		http.StatusConflict, nil)
	if n := countIn(t, dsn, `SELECT COUNT(*) FROM users WHERE handle = $1`, loner.Handle); n != 0 {
		t.Fatalf("a bot with a taken handle was made on the shard (%d)", n)
	}

	var bot parley.Bot
	call(t, api.URL, owner.Token, "POST", "/workspaces/"+ws.ID+"/bots", map[string]string{"name": "Deploy", "handle": "deploybot"},
		http.StatusCreated, &bot)
	if n := countIn(t, dsn, `SELECT COUNT(*) FROM bots WHERE user_id = $1`, bot.User.ID); n != 1 {
		t.Fatalf("bots rows on the workspace's shard = %d", n)
	}
	if n := countIn(t, control, `SELECT COUNT(*) FROM bots WHERE user_id = $1`, bot.User.ID); n != 0 {
		t.Fatalf("bots rows in the control database = %d", n)
	}
	if n := countIn(t, control, `SELECT COUNT(*) FROM users WHERE id = $1 AND is_bot`, bot.User.ID); n != 1 {
		t.Fatalf("the bot's row is not in the control database (%d)", n)
	}
	var tok parley.BotToken
	call(t, api.URL, owner.Token, "POST", "/workspaces/"+ws.ID+"/bots/"+bot.User.ID+"/tokens",
		map[string]any{"label": "ci", "scopes": []string{parley.ScopeChatWrite, parley.ScopeChannelsRead}}, http.StatusCreated, &tok)
	if n := countIn(t, control, `SELECT COUNT(*) FROM sessions WHERE token_hash = $1 AND scopes IS NOT NULL`, auth.HashToken(tok.Token)); n != 1 {
		t.Fatalf("the token's session is not in the control database (%d)", n)
	}
	_, err := c.r.AddMembers(bg(), owner.User.ID, ch.ID, []string{bot.User.ID})
	storetest.NoErr(t, err)

	var me parley.User
	call(t, api.URL, tok.Token, "GET", "/me", nil, http.StatusOK, &me)
	if me.ID != bot.User.ID || !me.IsBot {
		t.Fatalf("the bot's /me = %+v", me)
	}
	call(t, api.URL, tok.Token, "POST", "/channels/"+ch.ID+"/messages", map[string]string{"text": "shipped"}, http.StatusCreated, nil)
	if n := countIn(t, dsn, `SELECT COUNT(*) FROM messages WHERE channel_id = $1 AND user_id = $2 AND text = 'shipped'`, ch.ID, bot.User.ID); n != 1 {
		t.Fatalf("the bot's post on its shard = %d", n)
	}
	// Its write is in its workspace's audit log (written after the answer).
	waitFor(t, 10*time.Second, "the bot's post in the audit log", func() bool {
		var page parley.AuditPage
		call(t, api.URL, owner.Token, "GET", "/workspaces/"+ws.ID+"/bot-audit?bot_id="+bot.User.ID, nil, http.StatusOK, &page)
		return len(page.Entries) == 1 && page.Entries[0].Status == http.StatusCreated
	})
	if n := countIn(t, control, `SELECT COUNT(*) FROM bot_audit`); n != 0 {
		t.Fatalf("audit entries in the control database = %d", n)
	}

	// A revoked token is refused; the bot's other token still works.
	var tok2 parley.BotToken
	call(t, api.URL, owner.Token, "POST", "/workspaces/"+ws.ID+"/bots/"+bot.User.ID+"/tokens",
		map[string]any{"scopes": []string{parley.ScopeChannelsRead}}, http.StatusCreated, &tok2)
	call(t, api.URL, owner.Token, "DELETE", "/workspaces/"+ws.ID+"/bot-tokens/"+tok.ID, nil, http.StatusNoContent, nil)
	call(t, api.URL, tok.Token, "POST", "/channels/"+ch.ID+"/messages", map[string]string{"text": "revoked"}, http.StatusUnauthorized, nil)
	call(t, api.URL, tok2.Token, "GET", "/me", nil, http.StatusOK, nil)
	var toks struct{ Tokens []parley.BotToken }
	call(t, api.URL, owner.Token, "GET", "/workspaces/"+ws.ID+"/bots/"+bot.User.ID+"/tokens", nil, http.StatusOK, &toks)
	if len(toks.Tokens) != 2 || toks.Tokens[0].RevokedAt == nil || toks.Tokens[1].RevokedAt != nil {
		t.Fatalf("tokens = %+v", toks.Tokens)
	}

	// A revoked bot's tokens are all refused.
	call(t, api.URL, owner.Token, "DELETE", "/workspaces/"+ws.ID+"/bots/"+bot.User.ID, nil, http.StatusNoContent, nil)
	call(t, api.URL, tok2.Token, "GET", "/me", nil, http.StatusUnauthorized, nil)
	if n := countIn(t, control, `SELECT COUNT(*) FROM users WHERE id = $1 AND deactivated_at IS NOT NULL`, bot.User.ID); n != 1 {
		t.Fatalf("the revoked bot's copy is not deactivated (%d)", n)
	}
}

// cmdEndpoint is a slash command's URL: it answers in the channel and
// keeps the last form it was sent.
type cmdEndpoint struct {
	srv  *httptest.Server
	mu   sync.Mutex
	form url.Values
}

func newCmdEndpoint(t *testing.T, answer string) *cmdEndpoint {
	t.Helper()
	ep := &cmdEndpoint{}
	ep.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		ep.mu.Lock()
		ep.form = r.PostForm
		ep.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"response_type": "in_channel", "text": answer})
	}))
	t.Cleanup(ep.srv.Close)
	return ep
}

func postJSON(t *testing.T, u, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(u, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// TestWebhookAndCommandOnOtherShard: an incoming webhook, a slash command
// and its response_url, of a workspace on a shard other than the control
// database, post into that shard (never the control database), also
// through a node whose router has never seen them (every shard asked for
// the webhook's workspace); a deleted webhook is 404.
func TestWebhookAndCommandOnOtherShard(t *testing.T) {
	rec := &storetest.Recorder{}
	c := newCluster(t, rec)
	api := integAPI(t, c)
	owner := signup(t, api, "hookowner")
	ws := wsOffDefault(t, c, &owner.User)
	dsn, control := c.dsnOf(t, ws.ID), c.dsns[0]
	ch := storetest.MustChannel(t, c.r, ws, &owner.User, "builds", parley.KindPublic)

	// Another node: its own router over the same shards and directory.
	other := *c
	other.reg = prometheus.NewRegistry()
	other.open(t, rec)
	api2 := integAPI(t, &other)

	var hook parley.Webhook
	call(t, api.URL, owner.Token, "POST", "/channels/"+ch.ID+"/webhooks", map[string]string{"name": "CI"}, http.StatusCreated, &hook)
	if st, body := postJSON(t, hook.URL, `{"text":"build green"}`); st != http.StatusOK || body != "ok" {
		t.Fatalf("webhook post: %d %q", st, body)
	}
	other2 := strings.Replace(hook.URL, api.URL, api2.URL, 1)
	if st, body := postJSON(t, other2, `{"text":"build green again"}`); st != http.StatusOK || body != "ok" {
		t.Fatalf("webhook post through the other node: %d %q", st, body)
	}
	if n := countIn(t, dsn, `SELECT COUNT(*) FROM messages WHERE channel_id = $1 AND user_id = $2`, ch.ID, hook.BotID); n != 2 {
		t.Fatalf("webhook posts on the workspace's shard = %d", n)
	}
	if n := countIn(t, control, `SELECT COUNT(*) FROM messages WHERE channel_id = $1`, ch.ID); n != 0 {
		t.Fatalf("messages in the control database = %d", n)
	}
	if st, _ := postJSON(t, hook.URL+"x", `{"text":"wrong secret"}`); st != http.StatusNotFound {
		t.Fatalf("wrong secret: %d", st)
	}

	ep := newCmdEndpoint(t, "deployed")
	var cmd parley.Integration
	call(t, api.URL, owner.Token, "POST", "/workspaces/"+ws.ID+"/integrations",
		map[string]string{"kind": "command", "name": "deploy", "url": ep.srv.URL}, http.StatusCreated, &cmd)
	var res struct {
		ResponseType string          `json:"response_type"`
		Message      *parley.Message `json:"message"`
	}
	call(t, api2.URL, owner.Token, "POST", "/channels/"+ch.ID+"/commands", map[string]string{"command": "/deploy", "text": "api"},
		http.StatusOK, &res)
	if res.ResponseType != "in_channel" || res.Message == nil || res.Message.UserID != cmd.BotID {
		t.Fatalf("command: %+v", res)
	}
	ep.mu.Lock()
	responseURL := ep.form.Get("response_url")
	ep.mu.Unlock()
	if st, body := postJSON(t, responseURL, `{"response_type":"in_channel","text":"deploy done"}`); st != http.StatusOK || body != "ok" {
		t.Fatalf("response_url: %d %q", st, body)
	}
	if n := countIn(t, dsn, `SELECT COUNT(*) FROM messages WHERE channel_id = $1 AND user_id = $2 AND text IN ('deployed', 'deploy done')`,
		ch.ID, cmd.BotID); n != 2 {
		t.Fatalf("command posts on the workspace's shard = %d", n)
	}
	if n := countIn(t, control, `SELECT COUNT(*) FROM command_responses`); n != 0 {
		t.Fatalf("response_url grants in the control database = %d", n)
	}

	call(t, api.URL, owner.Token, "DELETE", "/workspaces/"+ws.ID+"/webhooks/"+hook.ID, nil, http.StatusNoContent, nil)
	if st, _ := postJSON(t, other2, `{"text":"after delete"}`); st != http.StatusNotFound {
		t.Fatalf("deleted webhook through the other node: %d", st)
	}
	call(t, api.URL, owner.Token, "DELETE", "/workspaces/"+ws.ID+"/integrations/"+cmd.ID, nil, http.StatusNoContent, nil)
	if st, _ := postJSON(t, responseURL, `{"text":"after delete"}`); st != http.StatusNotFound {
		t.Fatalf("response_url of a deleted command: %d", st)
	}
	if n := countIn(t, control, `SELECT COUNT(*) FROM users WHERE id IN ($1, $2) AND deactivated_at IS NOT NULL`, hook.BotID, cmd.BotID); n != 2 {
		t.Fatalf("deleted integrations' bots deactivated in the control database = %d", n)
	}
}

// TestIntegrationsCrossWorkspaceAcrossShards: the admin of W1 on one shard
// can neither manage W2's bots, tokens, webhooks and commands on another
// shard, nor reach them through W1's id; W2's integrations keep working.
func TestIntegrationsCrossWorkspaceAcrossShards(t *testing.T) {
	c := newCluster(t, &storetest.Recorder{})
	r := c.r
	a1, a2 := storetest.MustUser(t, r, "admin1"), storetest.MustUser(t, r, "admin2")
	w1 := storetest.MustWorkspace(t, r, a1)
	w2 := storetest.MustWorkspace(t, r, a2)
	for c.shardOf(t, w2.ID) == c.shardOf(t, w1.ID) {
		w2 = storetest.MustWorkspace(t, r, a2)
	}
	ch2 := storetest.MustChannel(t, r, w2, a2, "two", parley.KindPublic)
	bot2, err := r.CreateBot(bg(), a2.ID, w2.ID, parley.NewBot{Name: "Two", Handle: "bot-two"})
	storetest.NoErr(t, err)
	tok2, err := r.CreateBotToken(bg(), a2.ID, w2.ID, bot2.User.ID, parley.NewBotToken{Scopes: []string{parley.ScopeChatWrite}, TokenHash: "hash-two"})
	storetest.NoErr(t, err)
	hook2, err := r.CreateWebhook(bg(), a2.ID, ch2.ID, "Two", "secret-two")
	storetest.NoErr(t, err)
	cmd2, err := r.CreateIntegration(bg(), a2.ID, w2.ID, parley.NewIntegration{Kind: parley.IntegrationCommand, Name: "two",
		URL: "https://example.com/two", SigningSecret: "s"})
	storetest.NoErr(t, err)

	_, err = r.CreateBot(bg(), a1.ID, w2.ID, parley.NewBot{Name: "Mine", Handle: "bot-mine"})
	storetest.Code(t, err, parley.ENOTFOUND)
	_, err = r.ListBots(bg(), a1.ID, w2.ID)
	storetest.Code(t, err, parley.ENOTFOUND)
	storetest.Code(t, r.RevokeBot(bg(), a1.ID, w2.ID, bot2.User.ID), parley.ENOTFOUND)
	storetest.Code(t, r.RevokeBot(bg(), a1.ID, w1.ID, bot2.User.ID), parley.ENOTFOUND)
	_, err = r.CreateBotToken(bg(), a1.ID, w1.ID, bot2.User.ID, parley.NewBotToken{Scopes: []string{parley.ScopeChatWrite}, TokenHash: "hash-mine"})
	storetest.Code(t, err, parley.ENOTFOUND)
	_, err = r.ListBotTokens(bg(), a1.ID, w2.ID, bot2.User.ID)
	storetest.Code(t, err, parley.ENOTFOUND)
	storetest.Code(t, r.RevokeBotToken(bg(), a1.ID, w1.ID, tok2.ID), parley.ENOTFOUND)
	storetest.Code(t, r.RevokeBotToken(bg(), a1.ID, w2.ID, tok2.ID), parley.ENOTFOUND)
	_, err = r.CreateWebhook(bg(), a1.ID, ch2.ID, "Mine", "secret-mine")
	storetest.Code(t, err, parley.ENOTFOUND)
	storetest.Code(t, r.DeleteWebhook(bg(), a1.ID, w1.ID, hook2.ID), parley.ENOTFOUND)
	storetest.Code(t, r.DeleteWebhook(bg(), a1.ID, w2.ID, hook2.ID), parley.ENOTFOUND)
	storetest.Code(t, r.DeleteIntegration(bg(), a1.ID, w1.ID, cmd2.ID), parley.ENOTFOUND)
	_, err = r.ListIntegrations(bg(), a1.ID, w2.ID)
	storetest.Code(t, err, parley.ENOTFOUND)
	_, err = r.BotAudit(bg(), a1.ID, w2.ID, "", "", 10)
	storetest.Code(t, err, parley.ENOTFOUND)
	_, err = r.CommandByName(bg(), w1.ID, "two")
	storetest.Code(t, err, parley.ENOTFOUND)

	// Nothing of W2's was touched.
	sess, err := r.SessionByToken(bg(), "hash-two")
	storetest.NoErr(t, err)
	if sess.UserID != bot2.User.ID {
		t.Fatalf("session of %s", sess.UserID)
	}
	_, err = r.WebhookByID(bg(), hook2.ID)
	storetest.NoErr(t, err)
	_, err = r.CommandByName(bg(), w2.ID, "two")
	storetest.NoErr(t, err)
	ws, err := r.BotWorkspace(bg(), bot2.User.ID)
	storetest.NoErr(t, err)
	if ws != w2.ID {
		t.Fatalf("bot's workspace %s, want %s", ws, w2.ID)
	}
	_, err = r.BotWorkspace(bg(), a1.ID)
	storetest.Code(t, err, parley.ENOTFOUND)
}

// TestIntegrationsShardDown: with one shard's database refusing
// connections, its workspace's integrations fail with 503 while the other
// shard's work; the audit entries of bots on both shards are written for
// the shard that is up, and retried, the rest once the shard is back
// (each entry once).
func TestIntegrationsShardDown(t *testing.T) {
	c := newCluster(t, &storetest.Recorder{})
	r := c.r
	owner := storetest.MustUser(t, r, "owner")
	up := storetest.MustWorkspace(t, r, owner)
	down := wsOffDefault(t, c, owner) // the control database stays up
	for c.shardOf(t, up.ID) == c.shardOf(t, down.ID) {
		up = storetest.MustWorkspace(t, r, owner)
	}
	upCh := storetest.MustChannel(t, r, up, owner, "up", parley.KindPublic)
	downCh := storetest.MustChannel(t, r, down, owner, "down", parley.KindPublic)
	upBot, err := r.CreateBot(bg(), owner.ID, up.ID, parley.NewBot{Name: "Up", Handle: "bot-up"})
	storetest.NoErr(t, err)
	downBot, err := r.CreateBot(bg(), owner.ID, down.ID, parley.NewBot{Name: "Down", Handle: "bot-down"})
	storetest.NoErr(t, err)
	upHook, err := r.CreateWebhook(bg(), owner.ID, upCh.ID, "Up", "secret-up")
	storetest.NoErr(t, err)
	downHook, err := r.CreateWebhook(bg(), owner.ID, downCh.ID, "Down", "secret-down")
	storetest.NoErr(t, err)

	dsn := c.dsnOf(t, down.ID)
	setConnections(t, dsn, false)
	t.Cleanup(func() { setConnections(t, dsn, true) })

	_, err = r.CreateBot(bg(), owner.ID, down.ID, parley.NewBot{Name: "More", Handle: "bot-more"})
	storetest.Code(t, err, parley.EUNAVAILABLE)
	_, err = r.WebhookByID(bg(), downHook.ID)
	storetest.Code(t, err, parley.EUNAVAILABLE)
	_, err = r.ListBots(bg(), owner.ID, down.ID)
	storetest.Code(t, err, parley.EUNAVAILABLE)

	_, err = r.CreateBot(bg(), owner.ID, up.ID, parley.NewBot{Name: "More", Handle: "bot-more"})
	storetest.NoErr(t, err)
	_, err = r.WebhookByID(bg(), upHook.ID)
	storetest.NoErr(t, err)
	_, err = r.CreateBotToken(bg(), owner.ID, up.ID, upBot.User.ID, parley.NewBotToken{Scopes: []string{parley.ScopeChatWrite}, TokenHash: "hash-up"})
	storetest.NoErr(t, err)
	_, err = r.SessionByToken(bg(), "hash-up")
	storetest.NoErr(t, err)

	entries := []parley.AuditEntry{
		{ID: parley.NewID(parley.PrefixAuditEntry), BotID: upBot.User.ID, Action: "test", Status: 200},
		{ID: parley.NewID(parley.PrefixAuditEntry), BotID: downBot.User.ID, Action: "test", Status: 200},
		{ID: parley.NewID(parley.PrefixAuditEntry), BotID: owner.ID, Action: "not a bot", Status: 200},
	}
	n, err := r.AuditBots(bg(), entries)
	storetest.Code(t, err, parley.EUNAVAILABLE)
	if n != 1 {
		t.Fatalf("AuditBots with a shard down wrote %d, want 1", n)
	}

	setConnections(t, dsn, true)
	waitFor(t, 30*time.Second, "the shard to serve again", func() bool {
		_, err := r.ListBots(bg(), owner.ID, down.ID)
		return err == nil
	})
	n, err = r.AuditBots(bg(), entries) // the writer's retry: the same entries
	storetest.NoErr(t, err)
	if n != 1 {
		t.Fatalf("retried AuditBots wrote %d, want 1 (the down shard's)", n)
	}
	for _, w := range []*parley.Workspace{up, down} {
		page, err := r.BotAudit(bg(), owner.ID, w.ID, "", "", 10)
		storetest.NoErr(t, err)
		if len(page.Entries) != 1 {
			t.Fatalf("audit of %s = %+v, want one entry", w.ID, page.Entries)
		}
	}
}

// TestIntegrationsReadOnly: while a workspace is read-only, its
// integrations' writes are 503 (ReadOnlyError) and their reads work.
func TestIntegrationsReadOnly(t *testing.T) {
	c := newCluster(t, &storetest.Recorder{})
	r := c.r
	owner := storetest.MustUser(t, r, "owner")
	ws := wsOffDefault(t, c, owner)
	ch := storetest.MustChannel(t, r, ws, owner, "frozen", parley.KindPublic)
	bot, err := r.CreateBot(bg(), owner.ID, ws.ID, parley.NewBot{Name: "Bot", Handle: "bot-frozen"})
	storetest.NoErr(t, err)
	hook, err := r.CreateWebhook(bg(), owner.ID, ch.ID, "Hook", "secret")
	storetest.NoErr(t, err)

	rec, err := c.dir.cat.Freeze(bg(), ws.ID)
	storetest.NoErr(t, err)
	t.Cleanup(func() { c.dir.cat.Unfreeze(bg(), ws.ID) })
	waitFor(t, 10*time.Second, "the client to hear read_only", func() bool {
		got, err := c.dir.client.Lookup(bg(), ws.ID)
		return err == nil && got.Version >= rec.Version
	})

	readOnly := func(what string, err error) {
		t.Helper()
		var ro *shardstore.ReadOnlyError
		if !errors.As(err, &ro) || parley.ErrorCode(err) != parley.EUNAVAILABLE {
			t.Fatalf("%s on a read-only workspace: %v", what, err)
		}
	}
	_, err = r.CreateBot(bg(), owner.ID, ws.ID, parley.NewBot{Name: "More", Handle: "bot-more"})
	readOnly("CreateBot", err)
	_, err = r.CreateBotToken(bg(), owner.ID, ws.ID, bot.User.ID, parley.NewBotToken{Scopes: []string{parley.ScopeChatWrite}, TokenHash: "h"})
	readOnly("CreateBotToken", err)
	readOnly("RevokeBot", r.RevokeBot(bg(), owner.ID, ws.ID, bot.User.ID))
	_, err = r.CreateWebhook(bg(), owner.ID, ch.ID, "More", "secret2")
	readOnly("CreateWebhook", err)
	readOnly("GrantResponse", r.GrantResponse(bg(), "grant", parley.CommandResponse{WorkspaceID: ws.ID, ChannelID: ch.ID, UserID: owner.ID},
		time.Now().Add(time.Minute), 1))
	_, err = r.AuditBots(bg(), []parley.AuditEntry{{BotID: bot.User.ID, Action: "test"}})
	readOnly("AuditBots", err)

	bots, err := r.ListBots(bg(), owner.ID, ws.ID)
	storetest.NoErr(t, err)
	if len(bots) != 2 { // the bot and the webhook's
		t.Fatalf("bots = %+v", bots)
	}
	_, err = r.WebhookByID(bg(), hook.ID)
	storetest.NoErr(t, err)
}
