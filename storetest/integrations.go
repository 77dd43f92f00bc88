package storetest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"parley"
)

// The integration store (parley.IntegrationStore, docs/integrations.md):
// bots are guests of their workspace, tokens are scoped sessions that die
// with revocation, webhooks and commands bring their own bots, and
// nothing crosses workspaces.

func integ(t *testing.T, s parley.Store) parley.IntegrationStore {
	t.Helper()
	is, ok := s.(parley.IntegrationStore)
	if !ok {
		t.Skipf("%T keeps no integrations", s)
	}
	return is
}

func init() {
	register("Integrations/BotTokens", func(t *testing.T, open Opener) {
		rec := &Recorder{}
		s := open(t, rec)
		is := integ(t, s)
		owner, member := MustUser(t, s, "owner"), MustUser(t, s, "member")
		ws := MustWorkspace(t, s, owner)
		MustJoinWorkspace(t, s, ws, owner, member)
		_, err := is.CreateBot(ctx(t), member.ID, ws.ID, parley.NewBot{Name: "Bot", Handle: "bot-" + itoa(userSeq.Add(1))})
		Code(t, err, parley.EFORBIDDEN)
		bot, err := is.CreateBot(ctx(t), owner.ID, ws.ID, parley.NewBot{Name: "Bot", Handle: "bot-" + itoa(userSeq.Add(1))})
		NoErr(t, err)
		_, err = is.CreateBot(ctx(t), owner.ID, ws.ID, parley.NewBot{Name: "Bot", Handle: bot.User.Handle})
		Code(t, err, parley.ECONFLICT)
		if !bot.User.IsBot {
			t.Fatal("bot user without is_bot")
		}
		// Its workspace role is guest: it sees only channels it is in.
		pub := MustChannel(t, s, ws, owner, "pub", parley.KindPublic)
		_, err = s.GetChannel(ctx(t), bot.User.ID, pub.ID)
		Code(t, err, parley.ENOTFOUND)
		_, err = is.CreateBotToken(ctx(t), owner.ID, ws.ID, bot.User.ID, parley.NewBotToken{Scopes: []string{"root"}, TokenHash: "h0"})
		Code(t, err, parley.EINVALID)
		tok, err := is.CreateBotToken(ctx(t), owner.ID, ws.ID, bot.User.ID,
			parley.NewBotToken{Label: "ci", Scopes: []string{parley.ScopeChatWrite}, TokenHash: "hash-" + bot.User.ID})
		NoErr(t, err)
		sess, err := s.SessionByToken(ctx(t), "hash-"+bot.User.ID)
		NoErr(t, err)
		if sess.UserID != bot.User.ID || !slices.Equal(sess.Scopes, []string{parley.ScopeChatWrite}) ||
			sess.Allows(parley.ScopeChannelsRead) || !sess.Allows(parley.ScopeChatWrite) {
			t.Fatalf("bot session %+v", sess)
		}
		// A person's login has no scopes and may do everything.
		NoErr(t, s.CreateSession(ctx(t), parley.Session{TokenHash: "person-" + owner.ID, UserID: owner.ID, ExpiresAt: time.Now().Add(time.Hour)}))
		if p, err := s.SessionByToken(ctx(t), "person-"+owner.ID); err != nil || p.Scopes != nil || !p.Allows(parley.ScopeChatWrite) {
			t.Fatalf("person session %+v, %v", p, err)
		}
		// Another workspace's admin cannot touch it.
		other := MustUser(t, s, "other")
		MustWorkspace(t, s, other)
		Code(t, is.RevokeBotToken(ctx(t), other.ID, ws.ID, tok.ID), parley.ENOTFOUND)
		_, err = is.ListBots(ctx(t), other.ID, ws.ID)
		Code(t, err, parley.ENOTFOUND)

		NoErr(t, is.RevokeBotToken(ctx(t), owner.ID, ws.ID, tok.ID))
		_, err = s.SessionByToken(ctx(t), "hash-"+bot.User.ID)
		Code(t, err, parley.EUNAUTHORIZED)
		if n := len(rec.OfType(parley.EventSessionRevoked)); n != 1 {
			t.Fatalf("%d session.revoked events, want 1", n)
		}
		NoErr(t, is.RevokeBot(ctx(t), owner.ID, ws.ID, bot.User.ID))
		NoErr(t, is.RevokeBot(ctx(t), owner.ID, ws.ID, bot.User.ID)) // again: a no-op
		bots, err := is.ListBots(ctx(t), owner.ID, ws.ID)
		NoErr(t, err)
		if len(bots) != 1 || bots[0].RevokedAt == nil || !bots[0].User.Deactivated {
			t.Fatalf("bots after revoke: %+v", bots)
		}
		// Nobody logs in as a bot.
		_, _, err = s.UserCredentials(ctx(t), bots[0].User.ID+"@bots.invalid")
		Code(t, err, parley.ENOTFOUND)
	})

	register("Integrations/WebhooksAndAudit", func(t *testing.T, open Opener) {
		s := open(t, &Recorder{})
		is := integ(t, s)
		owner, member := MustUser(t, s, "owner"), MustUser(t, s, "member")
		ws := MustWorkspace(t, s, owner)
		MustJoinWorkspace(t, s, ws, owner, member)
		ch := MustChannel(t, s, ws, member, "ops", parley.KindPrivate)
		// The channel's creator manages it; the owner is not even in it.
		hook, err := is.CreateWebhook(ctx(t), member.ID, ch.ID, "CI", "secret-hash")
		NoErr(t, err)
		in, err := s.ChannelMember(ctx(t), hook.BotID, ch.ID)
		if err != nil || !in {
			t.Fatalf("webhook bot in channel: %v, %v", in, err)
		}
		got, err := is.WebhookByID(ctx(t), hook.ID)
		NoErr(t, err)
		if got.SecretHash != "secret-hash" || got.ChannelID != ch.ID || got.WorkspaceID != ws.ID {
			t.Fatalf("webhook %+v", got)
		}
		m, _, err := s.PostMessage(ctx(t), hook.BotID, ch.ID, parley.NewMessage{Text: "build passed"})
		NoErr(t, err)
		if m.UserID != hook.BotID {
			t.Fatalf("posted as %s", m.UserID)
		}
		for i := range 3 {
			NoErr(t, is.Audit(ctx(t), ws.ID, parley.AuditEntry{BotID: hook.BotID, Action: "webhook.post", Target: ch.ID, Status: 200 + i}))
		}
		_, err = is.BotAudit(ctx(t), member.ID, ws.ID, "", "", 10)
		Code(t, err, parley.EFORBIDDEN)
		p1, err := is.BotAudit(ctx(t), owner.ID, ws.ID, hook.BotID, "", 2)
		NoErr(t, err)
		p2, err := is.BotAudit(ctx(t), owner.ID, ws.ID, hook.BotID, p1.NextCursor, 2)
		NoErr(t, err)
		if len(p1.Entries) != 2 || p1.Entries[0].Status != 202 || len(p2.Entries) != 1 || p2.Entries[0].Status != 200 || p2.NextCursor != "" {
			t.Fatalf("audit pages %+v then %+v", p1, p2)
		}
		// Entries of several bots in one call, each in its bot's workspace;
		// a user that is not a bot is left out.
		ws2 := MustWorkspace(t, s, member)
		bot2, err := is.CreateBot(ctx(t), member.ID, ws2.ID, parley.NewBot{Name: "Deploy", Handle: "deploy-bot"})
		NoErr(t, err)
		at := time.Now().Add(-time.Minute).UTC().Truncate(time.Microsecond)
		n, err := is.AuditBots(ctx(t), []parley.AuditEntry{
			{BotID: hook.BotID, Action: "POST /channels/{id}/messages", Target: "/a", Status: 201, At: at},
			{BotID: member.ID, Action: "not a bot", Status: 200},
			{BotID: bot2.User.ID, Action: "PUT /messages/{id}/reactions/{emoji}", Target: "/b", Status: 204},
		})
		NoErr(t, err)
		if n != 2 {
			t.Fatalf("AuditBots recorded %d, want 2", n)
		}
		p3, err := is.BotAudit(ctx(t), owner.ID, ws.ID, "", "", 10)
		NoErr(t, err)
		if len(p3.Entries) != 4 || p3.Entries[0].Status != 201 || !p3.Entries[0].At.Equal(at) || p3.Entries[0].Target != "/a" {
			t.Fatalf("audit of ws after AuditBots: %+v", p3.Entries)
		}
		p4, err := is.BotAudit(ctx(t), member.ID, ws2.ID, "", "", 10)
		NoErr(t, err)
		if len(p4.Entries) != 1 || p4.Entries[0].BotID != bot2.User.ID || p4.Entries[0].Status != 204 {
			t.Fatalf("audit of ws2 after AuditBots: %+v", p4.Entries)
		}
		// A batch retried with its ids (the audit writer's retry) is
		// written once.
		again := []parley.AuditEntry{{ID: parley.NewID(parley.PrefixAuditEntry), BotID: bot2.User.ID, Action: "retried", Status: 200}}
		for range 2 {
			_, err = is.AuditBots(ctx(t), again)
			NoErr(t, err)
		}
		p5, err := is.BotAudit(ctx(t), member.ID, ws2.ID, "", "", 10)
		NoErr(t, err)
		if len(p5.Entries) != 2 || p5.Entries[0].Action != "retried" {
			t.Fatalf("audit of ws2 after a retried batch: %+v", p5.Entries)
		}
		// The owner (an admin) may delete it without being in the channel.
		NoErr(t, is.DeleteWebhook(ctx(t), owner.ID, ws.ID, hook.ID))
		_, err = is.WebhookByID(ctx(t), hook.ID)
		Code(t, err, parley.ENOTFOUND)
	})

	register("Integrations/CommandsAndResponses", func(t *testing.T, open Opener) {
		rec := &Recorder{}
		s := open(t, rec)
		is := integ(t, s)
		owner := MustUser(t, s, "owner")
		ws := MustWorkspace(t, s, owner)
		other := MustUser(t, s, "other")
		wsB := MustWorkspace(t, s, other)
		ch := MustChannel(t, s, ws, owner, "ops", parley.KindPublic)
		newCmd := func(actor, wsID, name string) (*parley.Integration, error) {
			return is.CreateIntegration(ctx(t), actor, wsID, parley.NewIntegration{Kind: parley.IntegrationCommand, Name: name,
				URL: "https://example.com/" + name, SigningSecret: "k"})
		}
		cmd, err := newCmd(owner.ID, ws.ID, "/deploy")
		NoErr(t, err)
		_, err = newCmd(owner.ID, ws.ID, "deploy")
		Code(t, err, parley.ECONFLICT)
		_, err = newCmd(owner.ID, ws.ID, "me")
		Code(t, err, parley.ECONFLICT)
		_, err = newCmd(owner.ID, ws.ID, "Not Valid")
		Code(t, err, parley.EINVALID)
		_, err = newCmd(other.ID, ws.ID, "x")
		Code(t, err, parley.ENOTFOUND)
		// The same name in another workspace is another command.
		_, err = newCmd(other.ID, wsB.ID, "deploy")
		NoErr(t, err)
		got, err := is.CommandByName(ctx(t), ws.ID, "deploy")
		NoErr(t, err)
		if got.ID != cmd.ID || got.SigningSecret != "k" || got.URL != "https://example.com//deploy" {
			t.Fatalf("command %+v", got)
		}
		_, err = is.CreateIntegration(ctx(t), owner.ID, ws.ID, parley.NewIntegration{Kind: parley.IntegrationOutgoing, Name: "hook",
			ChannelID: ch.ID, TriggerWords: []string{"deploy", " ", "!ship"}, URL: "ftp://nope", SigningSecret: "k"})
		Code(t, err, parley.EINVALID)
		out, err := is.CreateIntegration(ctx(t), owner.ID, ws.ID, parley.NewIntegration{Kind: parley.IntegrationOutgoing, Name: "hook",
			ChannelID: ch.ID, TriggerWords: []string{"deploy", " ", "!ship"}, URL: "https://example.com/hook", SigningSecret: "k"})
		NoErr(t, err)
		hooks, err := is.OutgoingWebhooks(ctx(t), ws.ID)
		NoErr(t, err)
		if len(hooks) != 1 || !slices.Equal(hooks[0].TriggerWords, []string{"deploy", "!ship"}) || hooks[0].ID != out.ID {
			t.Fatalf("outgoing %+v", hooks)
		}

		// response_url grants: a few uses, then gone.
		grant := parley.CommandResponse{WorkspaceID: ws.ID, IntegrationID: cmd.ID, ChannelID: ch.ID, UserID: owner.ID}
		NoErr(t, is.GrantResponse(ctx(t), "resp", grant, time.Now().Add(time.Hour), 2))
		for range 2 {
			r, err := is.UseResponse(ctx(t), "resp")
			NoErr(t, err)
			if r.BotID != cmd.BotID || r.UserID != owner.ID || r.ChannelID != ch.ID {
				t.Fatalf("grant %+v", r)
			}
		}
		_, err = is.UseResponse(ctx(t), "resp")
		Code(t, err, parley.ENOTFOUND)
		NoErr(t, is.GrantResponse(ctx(t), "old", grant, time.Now().Add(-time.Second), 5))
		_, err = is.UseResponse(ctx(t), "old")
		Code(t, err, parley.ENOTFOUND)

		// Deleting the command ends its name and its grants.
		NoErr(t, is.GrantResponse(ctx(t), "live", grant, time.Now().Add(time.Hour), 5))
		NoErr(t, is.DeleteIntegration(ctx(t), owner.ID, ws.ID, cmd.ID))
		_, err = is.CommandByName(ctx(t), ws.ID, "deploy")
		Code(t, err, parley.ENOTFOUND)
		_, err = is.UseResponse(ctx(t), "live")
		Code(t, err, parley.ENOTFOUND)
		_, err = newCmd(owner.ID, ws.ID, "deploy") // the name is free again
		NoErr(t, err)

		// Ephemeral messages go to the one user's topic, never stored.
		NoErr(t, is.SendEphemeral(ctx(t), ws.ID, owner.ID, parley.EphemeralMessage{ID: "E1", ChannelID: ch.ID, Text: "only you"}))
		evs := rec.OfType(parley.EventMessageEphemeral)
		if len(evs) != 1 || !slices.Equal(evs[0].Topics, []string{parley.TopicUser(owner.ID)}) || evs[0].WorkspaceID != ws.ID || evs[0].Seq != 0 {
			t.Fatalf("ephemeral events %+v", evs)
		}
	})
}

// exportMessages collects the messages of an export.
type exportMessages struct{ msgs []parley.ExportMessage }

func (e *exportMessages) Workspace(*parley.Workspace) error   { return nil }
func (e *exportMessages) Users([]parley.ExportUser) error     { return nil }
func (e *exportMessages) Channel(*parley.ExportChannel) error { return nil }
func (e *exportMessages) Message(m *parley.ExportMessage) error {
	e.msgs = append(e.msgs, *m)
	return nil
}

func init() {
	// A bot's message keeps the name and icon it asked for, in every read:
	// history, replies, the single read, the event log, search, export.
	// Nobody else's message may carry one, and hostile values never land.
	register("Integrations/BotProfile", func(t *testing.T, open Opener) {
		rec := &Recorder{}
		s := open(t, rec)
		is := integ(t, s)
		owner := MustUser(t, s, "owner")
		ws := MustWorkspace(t, s, owner)
		ch := MustChannel(t, s, ws, owner, "alerts", parley.KindPublic)
		bot, err := is.CreateBot(ctx(t), owner.ID, ws.ID, parley.NewBot{Name: "CI", Handle: "ci-" + itoa(userSeq.Add(1))})
		NoErr(t, err)
		_, err = s.AddMembers(ctx(t), owner.ID, ch.ID, []string{bot.User.ID})
		NoErr(t, err)

		in := &parley.BotProfile{Name: "  Grafana  ", IconEmoji: ":chart_with_upwards_trend:", IconURL: "https://grafana.example/icon.png"}
		want := parley.BotProfile{Name: "Grafana", IconEmoji: "chart_with_upwards_trend", IconURL: "https://grafana.example/icon.png"}
		m, _, err := s.PostMessage(ctx(t), bot.User.ID, ch.ID, parley.NewMessage{Text: "profiled zebra alert", BotProfile: in})
		NoErr(t, err)
		check := func(where string, got *parley.BotProfile) {
			t.Helper()
			if got == nil || *got != want {
				t.Errorf("%s: bot_profile %+v, want %+v", where, got, want)
			}
		}
		check("post", m.BotProfile)
		got, err := s.GetMessage(ctx(t), owner.ID, m.ID)
		NoErr(t, err)
		check("get", got.BotProfile)
		page, err := s.ListMessages(ctx(t), owner.ID, ch.ID, parley.HistoryQuery{Limit: 10})
		NoErr(t, err)
		check("history", page.Messages[len(page.Messages)-1].BotProfile)
		reply, _, err := s.PostMessage(ctx(t), bot.User.ID, ch.ID, parley.NewMessage{Text: "in thread", ThreadRootID: m.ID,
			BotProfile: &parley.BotProfile{IconEmoji: "robot_face"}})
		NoErr(t, err)
		replies, err := s.ListReplies(ctx(t), owner.ID, m.ID, 0, 10)
		NoErr(t, err)
		if len(replies.Messages) != 1 || replies.Messages[0].ID != reply.ID || replies.Messages[0].BotProfile == nil ||
			*replies.Messages[0].BotProfile != (parley.BotProfile{IconEmoji: "robot_face"}) {
			t.Errorf("replies: %+v", replies.Messages)
		}
		// An edit keeps it.
		edited, err := s.EditMessage(ctx(t), bot.User.ID, m.ID, "profiled zebra alert, resolved")
		NoErr(t, err)
		check("edit", edited.BotProfile)
		// The event log's message.created and message.updated carry it.
		events, err := s.ListEvents(ctx(t), owner.ID, ch.ID, 0, 100)
		NoErr(t, err)
		seen := 0
		for _, ev := range events.Events {
			if ev.Type != parley.EventMessageCreated && ev.Type != parley.EventMessageUpdated {
				continue
			}
			var d parley.MessageEventData
			NoErr(t, json.Unmarshal(ev.Data, &d))
			if d.Message.ID == m.ID {
				check("event "+ev.Type, d.Message.BotProfile)
				seen++
			}
		}
		if seen != 2 {
			t.Errorf("%d events of the message, want 2", seen)
		}
		if res := searchAll(t, s, owner, ws, "zebra", 10); len(res) != 1 {
			t.Errorf("search: %d results", len(res))
		} else {
			check("search", res[0].Message.BotProfile)
		}
		if ex, ok := s.(parley.Exporter); ok {
			var sink exportMessages
			NoErr(t, ex.ExportWorkspace(ctx(t), owner.ID, ws.ID, parley.ExportOptions{}, &sink))
			found := false
			for _, em := range sink.msgs {
				if em.ID == m.ID {
					found = true
					check("export", em.BotProfile)
				}
			}
			if !found {
				t.Error("export: message missing")
			}
		}

		// A person cannot pass for a bot, nor a bot for anything hostile.
		before, err := s.ListMessages(ctx(t), owner.ID, ch.ID, parley.HistoryQuery{Limit: 100})
		NoErr(t, err)
		_, _, err = s.PostMessage(ctx(t), owner.ID, ch.ID, parley.NewMessage{Text: "hi", BotProfile: &parley.BotProfile{Name: "CI"}})
		Code(t, err, parley.EFORBIDDEN)
		for _, p := range []parley.BotProfile{
			{Name: "nul\x00name"},
			{Name: strings.Repeat("n", parley.MaxBotProfileName+1)},
			{Name: "two\nlines"},
			{Name: "bidi\u2028sep"},
			{Name: "bad utf8 \xff"},
			{IconEmoji: "<script>"},
			{IconEmoji: ":" + strings.Repeat("a", 65) + ":"},
			{IconURL: "javascript:alert(1)"},
			{IconURL: "data:image/png;base64,AAAA"},
			{IconURL: "//evil.example/x.png"},
			{IconURL: "https://user:pw@evil.example/x.png"},
			{IconURL: "https://evil.example/a b.png"},
			{IconURL: "https://evil.example/" + strings.Repeat("a", parley.MaxIconURLLen)},
			{IconURL: "https://evil.example/\x00.png"},
		} {
			_, _, err := s.PostMessage(ctx(t), bot.User.ID, ch.ID, parley.NewMessage{Text: "hostile", BotProfile: &p})
			Code(t, err, parley.EINVALID)
		}
		after, err := s.ListMessages(ctx(t), owner.ID, ch.ID, parley.HistoryQuery{Limit: 100})
		NoErr(t, err)
		if len(after.Messages) != len(before.Messages) {
			t.Fatalf("refused posts landed: %d messages, was %d", len(after.Messages), len(before.Messages))
		}
		// Nothing left after tidying is no profile at all.
		plain, _, err := s.PostMessage(ctx(t), bot.User.ID, ch.ID, parley.NewMessage{Text: "plain", BotProfile: &parley.BotProfile{Name: "  ", IconEmoji: "::"}})
		NoErr(t, err)
		if plain.BotProfile != nil {
			t.Errorf("empty profile stored: %+v", plain.BotProfile)
		}
	})
}
