package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"parley"
	"parley/integrations"
	"parley/internal/testpg"
	"parley/sqlstore"
	"parley/storetest"
)

// integEnv is an API on a store whose published events are recorded (for
// message.ephemeral), with workspace A (owner admin, member in it) and a
// private channel priv made by admin with member in it.
type integEnv struct {
	*env
	rec           *storetest.Recorder
	admin, member *account
	ws            *parley.Workspace
	priv          *parley.Channel
}

func newIntegEnv(t *testing.T, d sqlstore.Dialect, adjust ...func(*Config)) *integEnv {
	t.Helper()
	clk := newClock()
	rec := &storetest.Recorder{}
	cfg := sqlstore.Config{Now: clk.Now, Logger: quietLogger(), Publisher: rec}
	if d == sqlstore.Postgres {
		cfg.PostgresURL = testpg.New(t)
	} else {
		cfg.Path = filepath.Join(t.TempDir(), "parley.db")
	}
	st, err := sqlstore.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open %s store: %v", d, err)
	}
	t.Cleanup(func() { st.Close() })
	e := newEnvWithStore(t, st, clk, append([]func(*Config){func(c *Config) { c.Rates = parley.LiveRatesOff() }}, adjust...)...)
	ie := &integEnv{env: e, rec: rec}
	ie.admin = mustAccount(t, st, "admin")
	ie.member = mustAccount(t, st, "member")
	ie.ws = mustWorkspace(t, st, ie.admin)
	mustJoin(t, st, ie.ws, ie.admin, ie.member)
	ie.priv = mustChannel(t, st, ie.ws, ie.admin, parley.KindPrivate)
	if _, err := st.AddMembers(context.Background(), ie.admin.ID, ie.priv.ID, []string{ie.member.ID}); err != nil {
		t.Fatal(err)
	}
	return ie
}

// lastMessage is the newest message of a channel, read as admin.
func (e *integEnv) lastMessage(t *testing.T, channelID string) parley.Message {
	t.Helper()
	var page parley.MessagePage
	e.must(200, "GET", "/channels/"+channelID+"/messages?limit=1", e.admin.Token, nil, &page)
	if len(page.Messages) == 0 {
		t.Fatal("no messages")
	}
	return page.Messages[0]
}

// ephemerals returns the texts of the message.ephemeral events published
// to userID's topic.
func (e *integEnv) ephemerals(t *testing.T, userID string) []string {
	t.Helper()
	var out []string
	for _, ev := range e.rec.OfType(parley.EventMessageEphemeral) {
		if !slices.Contains(ev.Topics, parley.TopicUser(userID)) || len(ev.Topics) != 1 {
			continue
		}
		var d struct {
			Message parley.EphemeralMessage `json:"message"`
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d.Message.Text)
	}
	return out
}

// TestRouteScopes holds the route table's scopes to the table in
// docs/integrations.md: which routes a bot token may call with which scope.
func TestRouteScopes(t *testing.T) {
	want := map[string]string{
		"GET /me":                                 parley.ScopeChannelsRead,
		"POST /users/batch":                       parley.ScopeChannelsRead,
		"GET /workspaces":                         parley.ScopeChannelsRead,
		"GET /workspaces/{ws}":                    parley.ScopeChannelsRead,
		"POST /boot":                              parley.ScopeChannelsRead,
		"GET /workspaces/{ws}/channels":           parley.ScopeChannelsRead,
		"GET /channels/{id}":                      parley.ScopeChannelsRead,
		"POST /channels/{id}/join":                parley.ScopeChannelsJoin,
		"POST /channels/{id}/leave":               parley.ScopeChannelsJoin,
		"GET /channels/{id}/members":              parley.ScopeChannelsRead,
		"GET /channels/{id}/header":               parley.ScopeChannelsRead,
		"POST /channels/{id}/read":                parley.ScopeChannelsRead,
		"POST /channels/{id}/messages":            parley.ScopeChatWrite,
		"GET /channels/{id}/messages":             parley.ScopeChannelsRead,
		"GET /channels/{id}/pins":                 parley.ScopeChannelsRead,
		"GET /messages/{id}":                      parley.ScopeChannelsRead,
		"PATCH /messages/{id}":                    parley.ScopeChatWrite,
		"DELETE /messages/{id}":                   parley.ScopeChatWrite,
		"GET /messages/{root}/replies":            parley.ScopeChannelsRead,
		"PUT /messages/{id}/reactions/{emoji}":    parley.ScopeReactionsWrite,
		"DELETE /messages/{id}/reactions/{emoji}": parley.ScopeReactionsWrite,
		"GET /channels/{id}/events":               parley.ScopeChannelsRead,
		"POST /sync":                              parley.ScopeChannelsRead,
	}
	got := map[string]string{}
	for _, rt := range (&Server{}).routes() {
		if rt.Scope == "" {
			continue
		}
		if !rt.Auth {
			t.Errorf("%s %s: a public route with a scope", rt.Method, rt.Pattern)
		}
		if !parley.ValidScope(rt.Scope) {
			t.Errorf("%s %s: unknown scope %q", rt.Method, rt.Pattern, rt.Scope)
		}
		got[rt.Method+" "+strings.TrimPrefix(rt.Pattern, Prefix)] = rt.Scope
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: scope %q, want %q", k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: scope %q not in the documented table", k, v)
		}
	}
}

func TestBotTokens(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) { testBotTokens(t, d) })
	}
}

func testBotTokens(t *testing.T, d sqlstore.Dialect) {
	e := newIntegEnv(t, d)
	wsPath := "/workspaces/" + e.ws.ID
	// Only admins make bots.
	e.must(403, "POST", wsPath+"/bots", e.member.Token, map[string]string{"name": "Deployer", "handle": "deployer-" + uniq()}, nil)
	var bot parley.Bot
	e.must(201, "POST", wsPath+"/bots", e.admin.Token, map[string]string{"name": "Deployer", "handle": "deployer-" + uniq()}, &bot)
	if !bot.User.IsBot || bot.Kind != "bot" {
		t.Fatalf("bot %+v", bot)
	}
	e.must(400, "POST", wsPath+"/bots/"+bot.User.ID+"/tokens", e.admin.Token, map[string]any{"scopes": []string{"admin:everything"}}, nil)
	var readOnly, writer parley.BotToken
	e.must(201, "POST", wsPath+"/bots/"+bot.User.ID+"/tokens", e.admin.Token,
		map[string]any{"label": "read", "scopes": []string{"channels:read"}}, &readOnly)
	e.must(201, "POST", wsPath+"/bots/"+bot.User.ID+"/tokens", e.admin.Token,
		map[string]any{"label": "ci", "scopes": []string{"channels:read", "chat:write", "reactions:write"}}, &writer)
	if readOnly.Token == "" || writer.Token == "" {
		t.Fatal("tokens not shown on creation")
	}
	// The bot is a guest: it sees the channels it is put in, no others.
	pub := mustChannel(t, e.store, e.ws, e.admin, parley.KindPublic)
	e.must(404, "GET", "/channels/"+pub.ID+"/messages", writer.Token, nil, nil)
	e.must(200, "POST", "/channels/"+e.priv.ID+"/members", e.admin.Token, map[string][]string{"user_ids": {bot.User.ID}}, nil)

	post := map[string]string{"text": "deploying api", "client_msg_id": uniq()}
	r := e.must(403, "POST", "/channels/"+e.priv.ID+"/messages", readOnly.Token, post, nil)
	if !strings.Contains(string(r.Body), "chat:write") {
		t.Errorf("403 does not name the scope: %s", r.Body)
	}
	var m parley.Message
	e.must(201, "POST", "/channels/"+e.priv.ID+"/messages", writer.Token, post, &m)
	if m.UserID != bot.User.ID {
		t.Fatalf("posted as %s, want the bot", m.UserID)
	}
	e.must(200, "GET", "/channels/"+e.priv.ID+"/messages", readOnly.Token, nil, nil)
	e.must(403, "PUT", "/messages/"+m.ID+"/reactions/rocket", readOnly.Token, nil, nil)
	e.must(200, "PUT", "/messages/"+m.ID+"/reactions/rocket", writer.Token, nil, nil)
	// Routes without a scope are for people.
	e.must(403, "POST", "/workspaces", writer.Token, map[string]string{"name": "Bots' own", "slug": "bots-" + uniq()}, nil)
	e.must(403, "GET", wsPath+"/bots", writer.Token, nil, nil)
	e.must(403, "GET", wsPath+"/search?q=api", writer.Token, nil, nil)
	// People see it as a bot.
	var users struct{ Users []parley.User }
	e.must(200, "POST", "/users/batch", e.member.Token, map[string][]string{"ids": {bot.User.ID}}, &users)
	if len(users.Users) != 1 || !users.Users[0].IsBot {
		t.Errorf("users/batch: %+v, want the bot with is_bot", users.Users)
	}

	// The audit log has the bot's writes, refused ones included, newest first.
	e.must(403, "GET", wsPath+"/bot-audit", e.member.Token, nil, nil)
	var audit parley.AuditPage
	e.must(200, "GET", wsPath+"/bot-audit?bot_id="+bot.User.ID, e.admin.Token, nil, &audit)
	var got []string
	for _, a := range audit.Entries {
		got = append(got, a.Action+" "+strconv.Itoa(a.Status))
	}
	wantAudit := []string{
		"POST /workspaces 403",
		"PUT /messages/{id}/reactions/{emoji} 200",
		"PUT /messages/{id}/reactions/{emoji} 403",
		"POST /channels/{id}/messages 201",
		"POST /channels/{id}/messages 403",
	}
	if strings.Join(got, "\n") != strings.Join(wantAudit, "\n") {
		t.Errorf("audit:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantAudit, "\n"))
	}
	var page2 parley.AuditPage
	e.must(200, "GET", wsPath+"/bot-audit?limit=2", e.admin.Token, nil, &audit)
	e.must(200, "GET", wsPath+"/bot-audit?limit=2&cursor="+audit.NextCursor, e.admin.Token, nil, &page2)
	if len(audit.Entries) != 2 || len(page2.Entries) != 2 || page2.Entries[0].ID >= audit.Entries[1].ID {
		t.Errorf("audit paging: %+v then %+v", audit, page2)
	}

	// Revoking a token ends it; revoking the bot ends the rest.
	e.must(204, "DELETE", wsPath+"/bot-tokens/"+writer.ID, e.admin.Token, nil, nil)
	e.must(401, "GET", "/me", writer.Token, nil, nil)
	e.must(200, "GET", "/me", readOnly.Token, nil, nil)
	var tokens struct{ Tokens []parley.BotToken }
	e.must(200, "GET", wsPath+"/bots/"+bot.User.ID+"/tokens", e.admin.Token, nil, &tokens)
	if len(tokens.Tokens) != 2 || tokens.Tokens[1].RevokedAt == nil || tokens.Tokens[0].RevokedAt != nil || tokens.Tokens[0].Token != "" {
		t.Errorf("tokens: %+v", tokens.Tokens)
	}
	e.must(204, "DELETE", wsPath+"/bots/"+bot.User.ID, e.admin.Token, nil, nil)
	e.must(401, "GET", "/me", readOnly.Token, nil, nil)
	// Revocation closes the bot's sockets: session.revoked for each token.
	if n := len(e.rec.OfType(parley.EventSessionRevoked)); n != 2 {
		t.Errorf("%d session.revoked events, want 2", n)
	}
	// A bot cannot log in with a password.
	e.must(401, "POST", "/auth/login", "", map[string]string{"email": strings.ToLower(bot.User.ID) + "@bots.invalid", "password": ""}, nil)
}

// postRaw posts body with a content type to an absolute URL.
func postRaw(t *testing.T, rawURL, contentType, body string) (int, string, http.Header) {
	t.Helper()
	res, err := http.Post(rawURL, contentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

func TestIncomingWebhook(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) { testIncomingWebhook(t, d) })
	}
}

func testIncomingWebhook(t *testing.T, d sqlstore.Dialect) {
	e := newIntegEnv(t, d)
	// member is in priv but did not make it: not a channel manager.
	e.must(403, "POST", "/channels/"+e.priv.ID+"/webhooks", e.member.Token, map[string]string{"name": "CI"}, nil)
	var hook parley.Webhook
	e.must(201, "POST", "/channels/"+e.priv.ID+"/webhooks", e.admin.Token, map[string]string{"name": "CI"}, &hook)
	if !strings.HasPrefix(hook.URL, e.srv.URL+"/api/v1/hooks/"+hook.ID+"/") {
		t.Fatalf("webhook URL %q", hook.URL)
	}
	// Each tool's payload, as it sends it, posts the reviewed rendering.
	for _, name := range []string{"alertmanager", "grafana", "github-actions", "curl"} {
		raw, err := os.ReadFile(filepath.Join("..", "integrations", "testdata", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("..", "integrations", "testdata", name+".md"))
		if err != nil {
			t.Fatal(err)
		}
		ct := "application/json"
		if name == "curl" {
			ct = "application/x-www-form-urlencoded" // what curl -d sends
		}
		if st, body, _ := postRaw(t, hook.URL, ct, string(raw)); st != 200 || body != "ok" {
			t.Fatalf("%s: %d %q", name, st, body)
		}
		m := e.lastMessage(t, e.priv.ID)
		if m.UserID != hook.BotID || m.Text != strings.TrimSuffix(string(want), "\n") {
			t.Errorf("%s: posted %q by %s", name, m.Text, m.UserID)
		}
	}
	form := url.Values{"payload": {`{"text":"from a form", "username":"ignored"}`}}.Encode()
	if st, body, _ := postRaw(t, hook.URL, "application/x-www-form-urlencoded", form); st != 200 || body != "ok" {
		t.Fatalf("form: %d %q", st, body)
	}
	if m := e.lastMessage(t, e.priv.ID); m.Text != "from a form" {
		t.Errorf("form posted %q", m.Text)
	}
	for body, want := range map[string]string{`nope`: "invalid_payload", `{}`: "no_text", `{"text":""}`: "no_text"} {
		if st, got, _ := postRaw(t, hook.URL, "application/json", body); st != 400 || got != want {
			t.Errorf("%s: %d %q, want 400 %s", body, st, got, want)
		}
	}
	if st, got, _ := postRaw(t, e.srv.URL+"/api/v1/hooks/"+hook.ID+"/wrong", "application/json", `{"text":"x"}`); st != 404 || got != "no_service" {
		t.Errorf("wrong secret: %d %q", st, got)
	}
	// Removed from the channel, the webhook cannot post there.
	e.must(204, "DELETE", "/channels/"+e.priv.ID+"/members/"+hook.BotID, e.admin.Token, nil, nil)
	if st, got, _ := postRaw(t, hook.URL, "application/json", `{"text":"x"}`); st != 404 || got != "channel_not_found" {
		t.Errorf("bot removed: %d %q", st, got)
	}
	var audit parley.AuditPage
	e.must(200, "GET", "/workspaces/"+e.ws.ID+"/bot-audit?bot_id="+hook.BotID+"&limit=1", e.admin.Token, nil, &audit)
	if len(audit.Entries) != 1 || audit.Entries[0].Action != "webhook.post" || audit.Entries[0].Status != 404 {
		t.Errorf("audit: %+v", audit.Entries)
	}
	// Deleted, the URL names nothing.
	e.must(403, "DELETE", "/workspaces/"+e.ws.ID+"/webhooks/"+hook.ID, e.member.Token, nil, nil)
	e.must(204, "DELETE", "/workspaces/"+e.ws.ID+"/webhooks/"+hook.ID, e.admin.Token, nil, nil)
	if st, got, _ := postRaw(t, hook.URL, "application/json", `{"text":"x"}`); st != 404 || got != "no_service" {
		t.Errorf("deleted: %d %q", st, got)
	}
}

func TestIncomingWebhookRateLimit(t *testing.T) {
	e := newIntegEnv(t, sqlstore.SQLite, func(c *Config) { c.WebhookRate = parley.MustRate("2/min,burst=2") })
	var a, b parley.Webhook
	e.must(201, "POST", "/channels/"+e.priv.ID+"/webhooks", e.admin.Token, map[string]string{"name": "A"}, &a)
	e.must(201, "POST", "/channels/"+e.priv.ID+"/webhooks", e.admin.Token, map[string]string{"name": "B"}, &b)
	for i := 0; i < 2; i++ {
		if st, _, _ := postRaw(t, a.URL, "application/json", `{"text":"x"}`); st != 200 {
			t.Fatalf("post %d: %d", i, st)
		}
	}
	st, body, h := postRaw(t, a.URL, "application/json", `{"text":"x"}`)
	if st != 429 || body != "rate_limited" || h.Get("Retry-After") == "" {
		t.Fatalf("third post: %d %q Retry-After %q", st, body, h.Get("Retry-After"))
	}
	// Per webhook: the other one still posts.
	if st, _, _ := postRaw(t, b.URL, "application/json", `{"text":"x"}`); st != 200 {
		t.Fatalf("other webhook: %d", st)
	}
	e.clock.Advance(time.Minute)
	if st, _, _ := postRaw(t, a.URL, "application/json", `{"text":"x"}`); st != 200 {
		t.Fatalf("after a minute: %d", st)
	}
}

// cmdEndpoint is a command URL: a real HTTP server that verifies each
// request's signature and answers what the test tells it.
type cmdEndpoint struct {
	srv    *httptest.Server
	secret string // set once the command exists
	mu     sync.Mutex
	forms  []url.Values // guarded by mu
	reply  func(w http.ResponseWriter, r *http.Request, form url.Values)
}

func newCmdEndpoint(t *testing.T) *cmdEndpoint {
	c := &cmdEndpoint{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		secret, reply := c.secret, c.reply
		c.mu.Unlock()
		if err := integrations.Verify(secret, r.Header.Get("X-Parley-Request-Timestamp"), r.Header.Get("X-Parley-Signature"), body, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		form, _ := url.ParseQuery(string(body))
		c.mu.Lock()
		c.forms = append(c.forms, form)
		c.mu.Unlock()
		reply(w, r, form)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *cmdEndpoint) set(reply func(w http.ResponseWriter, r *http.Request, form url.Values)) {
	c.mu.Lock()
	c.reply = reply
	c.mu.Unlock()
}

func (c *cmdEndpoint) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.forms)
}

func (c *cmdEndpoint) last() url.Values {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.forms) == 0 {
		return nil
	}
	return c.forms[len(c.forms)-1]
}

func jsonReply(body string) func(http.ResponseWriter, *http.Request, url.Values) {
	return func(w http.ResponseWriter, _ *http.Request, _ url.Values) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}
}

type cmdResult struct {
	ResponseType string                   `json:"response_type"`
	Message      *parley.Message          `json:"message"`
	Ephemeral    *parley.EphemeralMessage `json:"ephemeral"`
}

func TestSlashCommands(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) { testSlashCommands(t, d) })
	}
}

func testSlashCommands(t *testing.T, d sqlstore.Dialect) {
	e := newIntegEnv(t, d, func(c *Config) { c.CommandTimeout = 300 * time.Millisecond })
	ep := newCmdEndpoint(t)
	var cmd parley.Integration
	e.must(403, "POST", "/workspaces/"+e.ws.ID+"/integrations", e.member.Token,
		map[string]string{"kind": "command", "name": "deploy", "url": ep.srv.URL}, nil)
	e.must(409, "POST", "/workspaces/"+e.ws.ID+"/integrations", e.admin.Token,
		map[string]string{"kind": "command", "name": "me", "url": ep.srv.URL}, nil)
	e.must(201, "POST", "/workspaces/"+e.ws.ID+"/integrations", e.admin.Token,
		map[string]string{"kind": "command", "name": "/deploy", "url": ep.srv.URL, "description": "Ship it"}, &cmd)
	e.must(409, "POST", "/workspaces/"+e.ws.ID+"/integrations", e.admin.Token,
		map[string]string{"kind": "command", "name": "deploy", "url": ep.srv.URL}, nil)
	ep.mu.Lock()
	ep.secret = cmd.SigningSecret
	ep.mu.Unlock()

	// Members see it in the composer's list, after the built-ins.
	var list struct{ Commands []commandInfo }
	e.must(200, "GET", "/workspaces/"+e.ws.ID+"/commands", e.member.Token, nil, &list)
	if n := len(list.Commands); n != len(builtinCommands)+1 || list.Commands[n-1].Name != "deploy" || list.Commands[n-1].Description != "Ship it" {
		t.Fatalf("commands: %+v", list.Commands)
	}

	run := func(text string) cmdResult {
		t.Helper()
		var res cmdResult
		e.must(200, "POST", "/channels/"+e.priv.ID+"/commands", e.member.Token, map[string]string{"command": "/deploy", "text": text}, &res)
		return res
	}
	// in_channel: posted as the command's bot, which joins the channel.
	ep.set(jsonReply(`{"response_type":"in_channel","text":"Deploying *api* to staging"}`))
	res := run("api staging")
	if res.ResponseType != "in_channel" || res.Message == nil || res.Message.UserID != cmd.BotID || res.Message.Text != "Deploying **api** to staging" {
		t.Fatalf("in_channel: %+v", res)
	}
	f := ep.last()
	for k, v := range map[string]string{"command": "/deploy", "text": "api staging", "user_id": e.member.ID, "user_name": e.member.Handle,
		"channel_id": e.priv.ID, "channel_name": e.priv.Name, "team_id": e.ws.ID, "team_domain": e.ws.Slug} {
		if f.Get(k) != v {
			t.Errorf("form %s = %q, want %q", k, f.Get(k), v)
		}
	}
	responseURL := f.Get("response_url")
	if !strings.HasPrefix(responseURL, e.srv.URL+"/api/v1/command-responses/") {
		t.Fatalf("response_url %q", responseURL)
	}
	// ephemeral: to the caller's sessions only.
	ep.set(jsonReply(`{"text":"Only you: 3 deploys queued"}`))
	if res := run("queue"); res.ResponseType != "ephemeral" || res.Ephemeral == nil || res.Ephemeral.Text != "Only you: 3 deploys queued" {
		t.Fatalf("ephemeral: %+v", res)
	}
	if got := e.ephemerals(t, e.member.ID); !slices.Contains(got, "Only you: 3 deploys queued") {
		t.Errorf("ephemeral events to member: %q", got)
	}
	if got := e.ephemerals(t, e.admin.ID); len(got) != 0 {
		t.Errorf("ephemeral events to admin: %q", got)
	}
	// Failures: a clear notice to the caller, never a post.
	for name, c := range map[string]struct {
		reply func(http.ResponseWriter, *http.Request, url.Values)
		want  string
	}{
		"timeout":  {func(w http.ResponseWriter, r *http.Request, _ url.Values) { <-r.Context().Done() }, "/deploy failed: the integration did not answer within 300ms."},
		"5xx":      {func(w http.ResponseWriter, _ *http.Request, _ url.Values) { http.Error(w, "boom", 502) }, "/deploy failed: the integration failed (HTTP 502)."},
		"bad json": {jsonReply(`{"text":`), "/deploy failed: the integration answered with JSON that could not be read."},
	} {
		ep.set(c.reply)
		res := run(name)
		if res.ResponseType != "ephemeral" || res.Ephemeral == nil || res.Ephemeral.Text != c.want {
			t.Errorf("%s: %+v, want notice %q", name, res, c.want)
		}
	}
	// The delayed answer at response_url posts, up to five times.
	if st, body, _ := postRaw(t, responseURL, "application/json", `{"response_type":"in_channel","text":"Deploy *done*"}`); st != 200 || body != "ok" {
		t.Fatalf("response_url: %d %q", st, body)
	}
	if m := e.lastMessage(t, e.priv.ID); m.Text != "Deploy **done**" || m.UserID != cmd.BotID {
		t.Errorf("delayed answer posted %q by %s", m.Text, m.UserID)
	}
	for i := 0; i < 4; i++ {
		postRaw(t, responseURL, "application/json", `{"text":"again"}`)
	}
	if st, body, _ := postRaw(t, responseURL, "application/json", `{"text":"sixth"}`); st != 404 || body != "expired_url" {
		t.Errorf("sixth answer: %d %q", st, body)
	}

	// Across workspaces: B's admin cannot run A's commands, and B's own
	// commands do not exist in A.
	other := mustAccount(t, e.store, "other")
	wsB := mustWorkspace(t, e.store, other)
	e.must(404, "POST", "/channels/"+e.priv.ID+"/commands", other.Token, map[string]string{"command": "/deploy"}, nil)
	var cmdB parley.Integration
	e.must(404, "POST", "/workspaces/"+e.ws.ID+"/integrations", other.Token,
		map[string]string{"kind": "command", "name": "bonly", "url": ep.srv.URL}, nil)
	e.must(201, "POST", "/workspaces/"+wsB.ID+"/integrations", other.Token,
		map[string]string{"kind": "command", "name": "bonly", "url": ep.srv.URL}, &cmdB)
	var r cmdResult
	e.must(200, "POST", "/channels/"+e.priv.ID+"/commands", e.member.Token, map[string]string{"command": "/bonly"}, &r)
	if r.Ephemeral == nil || !strings.Contains(r.Ephemeral.Text, "/bonly is not a command here") {
		t.Errorf("B's command in A: %+v", r)
	}
	e.must(404, "DELETE", "/workspaces/"+e.ws.ID+"/integrations/"+cmdB.ID, e.admin.Token, nil, nil)
	// Deleted, the command is gone and its response_urls with it.
	e.must(204, "DELETE", "/workspaces/"+e.ws.ID+"/integrations/"+cmd.ID, e.admin.Token, nil, nil)
	e.must(200, "POST", "/channels/"+e.priv.ID+"/commands", e.member.Token, map[string]string{"command": "/deploy"}, &r)
	if r.Ephemeral == nil || !strings.Contains(r.Ephemeral.Text, "not a command here") {
		t.Errorf("deleted command: %+v", r)
	}
}

func TestBuiltinCommands(t *testing.T) {
	e := newIntegEnv(t, sqlstore.SQLite)
	extra := mustAccount(t, e.store, "extra")
	mustJoin(t, e.store, e.ws, e.admin, extra)
	run := func(tok, cmd, text string) cmdResult {
		t.Helper()
		var res cmdResult
		e.must(200, "POST", "/channels/"+e.priv.ID+"/commands", tok, map[string]string{"command": cmd, "text": text}, &res)
		return res
	}
	if res := run(e.member.Token, "/me", "waves"); res.Message == nil || res.Message.Text != "_waves_" || res.Message.UserID != e.member.ID {
		t.Errorf("/me: %+v", res)
	}
	if res := run(e.member.Token, "/shrug", "no idea"); res.Message == nil || res.Message.Text != `no idea ¯\_(ツ)_/¯` {
		t.Errorf("/shrug: %+v", res)
	}
	// member may not change the topic of admin's private channel? They
	// may: topics are anyone's in the channel. The store decides.
	run(e.member.Token, "/topic", "Release week")
	var ch parley.Channel
	e.must(200, "GET", "/channels/"+e.priv.ID, e.admin.Token, nil, &ch)
	if ch.Topic != "Release week" {
		t.Errorf("/topic: topic %q", ch.Topic)
	}
	if res := run(e.member.Token, "/invite", "@nobody-here"); res.Ephemeral == nil || !strings.Contains(res.Ephemeral.Text, "Nobody called @nobody-here") {
		t.Errorf("/invite unknown: %+v", res)
	}
	if res := run(e.member.Token, "/invite", "@"+extra.Handle); res.Ephemeral == nil || !strings.Contains(res.Ephemeral.Text, "Added @"+extra.Handle) {
		t.Errorf("/invite: %+v", res)
	}
	e.must(200, "GET", "/channels/"+e.priv.ID+"/messages", extra.Token, nil, nil)
	if res := run(e.member.Token, "/remind", "me tomorrow"); res.Ephemeral == nil || !strings.Contains(res.Ephemeral.Text, "not available yet") {
		t.Errorf("/remind: %+v", res)
	}
	run(extra.Token, "/leave", "")
	e.must(404, "GET", "/channels/"+e.priv.ID+"/messages", extra.Token, nil, nil)
	e.must(400, "POST", "/channels/"+e.priv.ID+"/commands", e.member.Token, map[string]string{"command": ""}, nil)
}

func TestOutgoingWebhook(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) { testOutgoingWebhook(t, d) })
	}
}

func testOutgoingWebhook(t *testing.T, d sqlstore.Dialect) {
	e := newIntegEnv(t, d, func(c *Config) { c.CommandTimeout = 300 * time.Millisecond })
	ep := newCmdEndpoint(t)
	var hook parley.Integration
	e.must(400, "POST", "/workspaces/"+e.ws.ID+"/integrations", e.admin.Token,
		map[string]any{"kind": "outgoing", "name": "Deploy bot", "url": ep.srv.URL, "channel_id": e.priv.ID}, nil)
	e.must(201, "POST", "/workspaces/"+e.ws.ID+"/integrations", e.admin.Token,
		map[string]any{"kind": "outgoing", "name": "Deploy bot", "url": ep.srv.URL, "channel_id": e.priv.ID, "trigger_words": []string{"deploy", "!ship"}}, &hook)
	ep.mu.Lock()
	ep.secret = hook.SigningSecret
	ep.mu.Unlock()
	ep.set(func(w http.ResponseWriter, _ *http.Request, form url.Values) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"text": "On it: " + strings.TrimSpace(strings.TrimPrefix(form.Get("text"), form.Get("trigger_word")))})
	})
	post := func(text string) {
		t.Helper()
		e.must(201, "POST", "/channels/"+e.priv.ID+"/messages", e.member.Token, map[string]string{"text": text, "client_msg_id": uniq()}, nil)
		e.api.integ.wg.Wait() // the calls it started
	}
	post("deployment notes are in the wiki") // not a trigger word
	if ep.last() != nil {
		t.Fatalf("called for a message without a trigger word: %v", ep.last())
	}
	post("deploy api")
	f := ep.last()
	if f == nil || f.Get("trigger_word") != "deploy" || f.Get("user_name") != e.member.Handle || f.Get("channel_id") != e.priv.ID {
		t.Fatalf("outgoing form: %v", f)
	}
	if m := e.lastMessage(t, e.priv.ID); m.Text != "On it: api" || m.UserID != hook.BotID {
		t.Errorf("answer posted %q by %s", m.Text, m.UserID)
	}
	// The bot's own answers never trigger it (no loops).
	n := ep.count()
	e.must(201, "POST", "/channels/"+e.priv.ID+"/messages", e.admin.Token, map[string]string{"text": "!ship it", "client_msg_id": uniq()}, nil)
	e.api.integ.wg.Wait()
	if ep.count() != n+1 {
		t.Fatalf("!ship: %d calls, want %d", ep.count(), n+1)
	}
	// A failing URL tells the poster, privately.
	ep.set(func(w http.ResponseWriter, _ *http.Request, _ url.Values) { http.Error(w, "down", 503) })
	post("deploy web")
	if got := e.ephemerals(t, e.member.ID); len(got) != 1 || got[0] != `The outgoing webhook "Deploy bot" failed: the integration failed (HTTP 503).` {
		t.Errorf("notice: %q", got)
	}
}
