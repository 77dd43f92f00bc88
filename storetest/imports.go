package storetest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"parley"
)

// The importer's writes (parley.Importer, docs/import.md), where they meet
// what a live post is held to; the import as a whole (Slack and Parley
// exports, idempotency, the invariants) is tested in transfer/.

func init() {
	register("Import/BotProfile", func(t *testing.T, open Opener) {
		s := open(t, &Recorder{})
		im, ok := s.(parley.Importer)
		if !ok {
			t.Skipf("%T imports nothing", s)
		}
		owner := MustUser(t, s, "owner")
		ws := MustWorkspace(t, s, owner)
		ch := MustChannel(t, s, ws, owner, "imported", parley.KindPublic)
		at := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
		src := parley.ImportParley

		// Refused: any invalid profile refuses the whole batch, as a live
		// post is refused, and writes nothing.
		for _, bad := range []parley.BotProfile{
			{IconURL: "javascript:alert(1)"}, {IconURL: "https://u:p@x.example/a.png"}, {IconURL: "https://x.example/a b.png"},
			{IconURL: "https://x.example/" + strings.Repeat("a", parley.MaxIconURLLen)},
			{Name: "two\nlines"}, {Name: "nul\x00"}, {Name: strings.Repeat("é", parley.MaxBotProfileName+1)},
			{IconEmoji: "Not An Emoji"}, {IconEmoji: "\xff"},
		} {
			_, err := im.ImportMessages(ctx(t), ws.ID, src, ch.ID, []parley.ImportMessage{
				{ExtID: "ok", UserID: owner.ID, Text: "ok", CreatedAt: at},
				{ExtID: "bad", UserID: owner.ID, Text: "bad", CreatedAt: at.Add(time.Second), BotProfile: &bad},
			})
			Code(t, err, parley.EINVALID)
		}
		have, err := im.ImportedMessages(ctx(t), ws.ID, src, ch.ID)
		NoErr(t, err)
		if len(have) != 0 {
			t.Fatalf("refused batches wrote %v", have)
		}

		// Accepted: tidied as a live post's, on every read path; an
		// emptied profile and a deleted message's are none. The caller's
		// batch is left as it came.
		in := &parley.BotProfile{Name: "  Jenkins ", IconEmoji: ":robot_face:", IconURL: " https://ci.example/j.png "}
		want := parley.BotProfile{Name: "Jenkins", IconEmoji: "robot_face", IconURL: "https://ci.example/j.png"}
		batch := []parley.ImportMessage{
			{ExtID: "m1", UserID: owner.ID, Text: "build green", CreatedAt: at, BotProfile: in},
			{ExtID: "m2", UserID: owner.ID, Text: "blank profile", CreatedAt: at.Add(time.Second), BotProfile: &parley.BotProfile{Name: " ", IconEmoji: "::"}},
			{ExtID: "m3", UserID: owner.ID, Text: "gone", CreatedAt: at.Add(2 * time.Second), Deleted: true, BotProfile: in},
			{ExtID: "m4", UserID: owner.ID, Text: "reply", ThreadExtID: "m1", CreatedAt: at.Add(3 * time.Second), BotProfile: &parley.BotProfile{IconEmoji: "ghost"}},
		}
		res, err := im.ImportMessages(ctx(t), ws.ID, src, ch.ID, batch)
		NoErr(t, err)
		if res.Messages != 4 || res.Replies != 1 {
			t.Fatalf("import: %+v", res)
		}
		if *batch[0].BotProfile != *in || in.Name != "  Jenkins " {
			t.Fatalf("the caller's profile was changed: %+v", batch[0].BotProfile)
		}
		page, err := s.ListMessages(ctx(t), owner.ID, ch.ID, parley.HistoryQuery{Limit: 10})
		NoErr(t, err)
		byText := map[string]parley.Message{}
		for _, m := range page.Messages {
			byText[m.Text] = m
		}
		root, ok := byText["build green"]
		if !ok || root.BotProfile == nil || *root.BotProfile != want {
			t.Fatalf("history: %+v, want profile %+v", root, want)
		}
		if m := byText["blank profile"]; m.BotProfile != nil {
			t.Errorf("an empty profile was stored: %+v", m.BotProfile)
		}
		got, err := s.GetMessage(ctx(t), owner.ID, root.ID)
		NoErr(t, err)
		if got.BotProfile == nil || *got.BotProfile != want {
			t.Errorf("get: %+v", got.BotProfile)
		}
		replies, err := s.ListReplies(ctx(t), owner.ID, root.ID, 0, 10)
		NoErr(t, err)
		if len(replies.Messages) != 1 || replies.Messages[0].BotProfile == nil ||
			*replies.Messages[0].BotProfile != (parley.BotProfile{IconEmoji: "ghost"}) {
			t.Errorf("replies: %+v", replies.Messages)
		}
		// The log's message.created events carry what the rows hold.
		events, err := s.ListEvents(ctx(t), owner.ID, ch.ID, 0, 100)
		NoErr(t, err)
		created := map[string]*parley.BotProfile{}
		for _, ev := range events.Events {
			if ev.Type != parley.EventMessageCreated {
				continue
			}
			var d parley.MessageEventData
			NoErr(t, json.Unmarshal(ev.Data, &d))
			created[d.Message.Text] = d.Message.BotProfile
		}
		if p := created["build green"]; p == nil || *p != want {
			t.Errorf("event: %+v", p)
		}
		if p, ok := created[""]; !ok || p != nil {
			t.Errorf("the deleted message's event: present %v, profile %+v", ok, p)
		}
		if ex, ok := s.(parley.Exporter); ok {
			var sink exportMessages
			NoErr(t, ex.ExportWorkspace(ctx(t), owner.ID, ws.ID, parley.ExportOptions{}, &sink))
			for _, em := range sink.msgs {
				switch {
				case em.Text == "build green" && (em.BotProfile == nil || *em.BotProfile != want):
					t.Errorf("export: %+v", em.BotProfile)
				case em.Deleted && em.BotProfile != nil:
					t.Errorf("export of the deleted message: %+v", em.BotProfile)
				}
			}
		}
		// Again: nothing written twice.
		res, err = im.ImportMessages(ctx(t), ws.ID, src, ch.ID, batch)
		NoErr(t, err)
		if res.Messages != 0 || res.Skipped != 4 {
			t.Fatalf("second run: %+v", res)
		}
	})
}
