package httpapi

import (
	"context"
	"testing"

	"parley"
	"parley/auditlog"
	"parley/sqlstore"
)

// TestBotAuditQueued: with the queued audit writer (as serve wires it), a
// bot's writes are answered first and all of them are in the audit log once
// the writer is closed (flushed), the refused one included.
func TestBotAuditQueued(t *testing.T) {
	var w *auditlog.Writer
	e := newIntegEnv(t, sqlstore.SQLite, func(c *Config) {
		w = auditlog.New(auditlog.Config{Store: c.Integrations, Logger: quietLogger()})
		c.Audit = w
	})
	wsPath := "/workspaces/" + e.ws.ID
	var bot parley.Bot
	e.must(201, "POST", wsPath+"/bots", e.admin.Token, map[string]string{"name": "CI", "handle": "ci-" + uniq()}, &bot)
	var tok parley.BotToken
	e.must(201, "POST", wsPath+"/bots/"+bot.User.ID+"/tokens", e.admin.Token,
		map[string]any{"label": "ci", "scopes": []string{"channels:read", "chat:write"}}, &tok)
	e.must(200, "POST", "/channels/"+e.priv.ID+"/members", e.admin.Token, map[string][]string{"user_ids": {bot.User.ID}}, nil)
	const posts = 20
	for range posts {
		e.must(201, "POST", "/channels/"+e.priv.ID+"/messages", tok.Token, map[string]string{"text": "build passed", "client_msg_id": uniq()}, nil)
	}
	e.must(403, "POST", "/workspaces", tok.Token, map[string]string{"name": "x", "slug": "x-" + uniq()}, nil)
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var audit parley.AuditPage
	e.must(200, "GET", wsPath+"/bot-audit?bot_id="+bot.User.ID+"&limit=100", e.admin.Token, nil, &audit)
	if len(audit.Entries) != posts+1 || audit.Entries[0].Action != "POST /workspaces" || audit.Entries[0].Status != 403 ||
		audit.Entries[1].Action != "POST /channels/{id}/messages" || audit.Entries[1].Status != 201 {
		t.Fatalf("audit after the flush: %d entries, newest %+v", len(audit.Entries), audit.Entries[:min(2, len(audit.Entries))])
	}
}
