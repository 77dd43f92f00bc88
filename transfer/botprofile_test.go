package transfer_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"parley"
	"parley/storetest"
	"parley/transfer"
	"parley/transfer/transfertest"
)

// Bot messages' names and icons (bot_profile) through the imports: the
// Slack shapes (transfertest's bot messages, checked in checkSlackImport,
// and the odd ones below), a Parley export's profiles checked again.

// checkProfile compares a message's bot profile with the export's, field
// by field.
func checkProfile(t *testing.T, where string, got *parley.BotProfile, want *transfertest.Profile) {
	t.Helper()
	if (got == nil) != (want == nil) {
		t.Fatalf("%s: bot profile %+v, want %+v", where, got, want)
	}
	if got == nil {
		return
	}
	if got.Name != want.Name {
		t.Fatalf("%s: bot profile name %q, want %q", where, got.Name, want.Name)
	}
	if got.IconEmoji != want.IconEmoji {
		t.Fatalf("%s: bot profile icon_emoji %q, want %q", where, got.IconEmoji, want.IconEmoji)
	}
	if got.IconURL != want.IconURL {
		t.Fatalf("%s: bot profile icon_url %q, want %q", where, got.IconURL, want.IconURL)
	}
}

func equalProfile(a, b *parley.BotProfile) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

var botSeq atomic.Int64

// postAsBot creates a bot in the workspace, adds it to the channel and
// posts text as it with the profile, as a webhook does.
func postAsBot(t *testing.T, e *env, wsID, channelID, text string, p *parley.BotProfile) *parley.Message {
	t.Helper()
	ctx := context.Background()
	bot, err := e.s.CreateBot(ctx, e.owner.ID, wsID, parley.NewBot{Name: "Hooks", Handle: fmt.Sprintf("hooks-%d", botSeq.Add(1))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.AddMembers(ctx, e.owner.ID, channelID, []string{bot.User.ID}); err != nil {
		t.Fatal(err)
	}
	m, _, err := e.s.PostMessage(ctx, bot.User.ID, channelID, parley.NewMessage{Text: text, BotProfile: p})
	if err != nil {
		t.Fatal(err)
	}
	if !equalProfile(m.BotProfile, p) {
		t.Fatalf("posted profile %+v, want %+v", m.BotProfile, p)
	}
	return m
}

// TestParleyImportBotProfiles: the bot profiles of a Parley export that
// was edited by hand (or by another tool) are checked as a live post's
// are: tidied when they can be, dropped and counted when they cannot,
// never stored invalid; the store refuses an invalid one outright.
func TestParleyImportBotProfiles(t *testing.T) {
	for name, open := range stores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, open)
			ws, err := e.s.CreateWorkspace(ctx, e.owner.ID, "Hooks", "hooks")
			if err != nil {
				t.Fatal(err)
			}
			ch, err := e.s.CreateChannel(ctx, e.owner.ID, ws.ID, parley.NewChannel{Name: "alerts", Kind: parley.KindPublic})
			if err != nil {
				t.Fatal(err)
			}
			good := parley.BotProfile{Name: "Grafana", IconEmoji: "chart_with_upwards_trend", IconURL: "https://grafana.example/icon.png"}
			texts := []string{"tidied", "bad url", "nul name", "long name", "empty", "kept", "plain"}
			for _, text := range texts {
				p := &good
				if text == "plain" {
					p = nil
				}
				postAsBot(t, e, ws.ID, ch.ID, text, p)
			}
			var buf bytes.Buffer
			if _, err := transfer.Export(ctx, e.s, e.owner.ID, ws.ID, parley.ExportOptions{}, &buf); err != nil {
				t.Fatal(err)
			}
			// Edit the channel's lines.
			file := "channels/" + ch.ID + ".jsonl"
			zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
			if err != nil {
				t.Fatal(err)
			}
			var body []byte
			for _, f := range zr.File {
				if f.Name == file {
					rc, err := f.Open()
					if err != nil {
						t.Fatal(err)
					}
					body, _ = io.ReadAll(rc)
					rc.Close()
				}
			}
			edits := map[string]map[string]string{
				"tidied":    {"name": "  Jenkins ", "icon_emoji": ":robot_face:"},
				"bad url":   {"name": "Evil", "icon_url": "javascript:alert(1)"},
				"nul name":  {"name": "Ja\x00ne"},
				"long name": {"name": strings.Repeat("n", parley.MaxBotProfileName+1), "icon_emoji": "ghost"},
				"empty":     {"name": "  ", "icon_emoji": "::"},
			}
			var out []string
			for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
				var m map[string]any
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatal(err)
				}
				if ed, ok := edits[m["text"].(string)]; ok {
					m["bot_profile"] = ed
				}
				b, err := json.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, string(b))
			}
			edited := rezip(t, buf.Bytes(), file, strings.Join(out, "\n")+"\n")
			src, err := transfer.ReadParley(bytes.NewReader(edited), int64(len(edited)))
			if err != nil {
				t.Fatal(err)
			}
			opts := transfer.Options{OwnerID: e.owner.ID, Slug: "hooks-copy"}
			sum, err := transfer.Import(ctx, e.s, src, opts)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Messages != len(texts) || sum.Skipped[transfer.SkipBotProfile] != 3 {
				t.Fatalf("summary: %d messages (want %d), skipped %v (want 3 bot profiles)", sum.Messages, len(texts), sum.Skipped)
			}
			want := map[string]*parley.BotProfile{
				"tidied": {Name: "Jenkins", IconEmoji: "robot_face"},
				"kept":   &good,
			}
			read := storetest.CheckWorkspace(t, e.s, e.owner.ID, sum.WorkspaceID)
			seen := 0
			for _, ms := range read {
				for _, m := range ms {
					if _, ok := edits[m.Text]; !ok && m.Text != "kept" && m.Text != "plain" {
						continue
					}
					seen++
					if !equalProfile(m.BotProfile, want[m.Text]) {
						t.Errorf("%q: bot profile %+v, want %+v", m.Text, m.BotProfile, want[m.Text])
					}
				}
			}
			if seen != len(texts) {
				t.Fatalf("%d of the %d messages read back", seen, len(texts))
			}

			// Again: nothing twice, nothing changed.
			before, err := e.s.Boot(ctx, e.owner.ID, parley.BootQuery{WorkspaceID: sum.WorkspaceID})
			if err != nil {
				t.Fatal(err)
			}
			src, err = transfer.ReadParley(bytes.NewReader(edited), int64(len(edited)))
			if err != nil {
				t.Fatal(err)
			}
			again, err := transfer.Import(ctx, e.s, src, opts)
			if err != nil {
				t.Fatal(err)
			}
			after, err := e.s.Boot(ctx, e.owner.ID, parley.BootQuery{WorkspaceID: sum.WorkspaceID})
			if err != nil {
				t.Fatal(err)
			}
			if again.Messages != 0 || again.AlreadyImported != len(texts) || again.Skipped[transfer.SkipBotProfile] != 0 {
				t.Fatalf("second run: %+v", again)
			}
			for i := range before.Channels {
				if before.Channels[i].LastSeq != after.Channels[i].LastSeq {
					t.Fatalf("second run changed %s: seq %d → %d", before.Channels[i].Name, before.Channels[i].LastSeq, after.Channels[i].LastSeq)
				}
			}

			// The store itself refuses an invalid profile, the whole batch.
			var copyCh string
			for _, c := range after.Channels {
				if c.Name == "alerts" {
					copyCh = c.ID
				}
			}
			at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
			for _, bad := range []parley.BotProfile{
				{IconURL: "javascript:alert(1)"}, {Name: "a\nb"}, {IconEmoji: "Not An Emoji"}, {Name: "x\x00"},
				{IconURL: "https://u:p@x.example/i.png"}, {IconURL: "https://x.example/" + strings.Repeat("a", parley.MaxIconURLLen)},
			} {
				batch := []parley.ImportMessage{
					{ExtID: "direct-ok", UserID: e.owner.ID, Text: "ok", CreatedAt: at},
					{ExtID: "direct-bad", UserID: e.owner.ID, Text: "bad", CreatedAt: at, BotProfile: &bad},
				}
				if _, err := e.s.ImportMessages(ctx, sum.WorkspaceID, parley.ImportParley, copyCh, batch); parley.ErrorCode(err) != parley.EINVALID {
					t.Fatalf("ImportMessages with profile %+v: %v, want invalid", bad, err)
				}
			}
			have, err := e.s.ImportedMessages(ctx, sum.WorkspaceID, parley.ImportParley, copyCh)
			if err != nil {
				t.Fatal(err)
			}
			if have["direct-ok"] || have["direct-bad"] {
				t.Fatalf("a refused batch was written: %v", have)
			}
		})
	}
}

// TestSlackBotProfileShapes reads bot messages of odd shapes: icons that
// are not an object, values that are not strings, a refused name, a
// person's message. A malformed icon loses the icon, never the message.
func TestSlackBotProfileShapes(t *testing.T) {
	long := strings.Repeat("n", parley.MaxBotProfileName+1)
	msgs := []map[string]any{
		{"ts": "1700000001.000001", "subtype": "bot_message", "bot_id": "B1", "username": "ci", "icons": "not an object"},
		{"ts": "1700000002.000001", "subtype": "bot_message", "bot_id": "B1", "username": "ci",
			"icons": map[string]any{"emoji": 7, "image_72": []int{1}, "image_48": "https://x.example/48.png", "image_x": "https://x.example/x.png"}},
		{"ts": "1700000003.000001", "subtype": "bot_message", "bot_id": "B1", "username": long,
			"bot_profile": map[string]any{"name": "ci", "icons": "nope"}},
		{"ts": "1700000004.000001", "subtype": "bot_message", "bot_id": "B1", "username": "  ",
			"bot_profile": map[string]any{"name": "App", "icons": map[string]any{"image_36": "https://x.example/36.png", "image_72": "https://x.example/72.png"}}},
		{"ts": "1700000005.000001", "user": "U1", "text": "a person", "username": "Not Me", "icons": map[string]any{"emoji": ":ghost:"}},
		{"ts": "1700000006.000001", "bot_id": "B1", "text": "an app's message, no subtype", "icons": map[string]any{"emoji": ":tada:"}},
		{"ts": "1700000007.000001", "subtype": "bot_message", "bot_id": "B1", "username": "ci",
			"icons": map[string]any{"image_512": "ftp://x.example/512.png", "image_0": "https://x.example/0.png", "image_-5": "https://x.example/neg.png"}},
	}
	want := []*parley.BotProfile{
		{Name: "ci"},
		{Name: "ci", IconURL: "https://x.example/48.png"},
		nil, // the name refused, and nothing else
		{Name: "App", IconURL: "https://x.example/72.png"},
		nil,
		{IconEmoji: "tada"},
		{Name: "ci"}, // the one image_* with a size is refused
	}
	const wantBad = 2 // the long name, the ftp image
	for _, m := range msgs {
		m["type"] = "message"
		if m["text"] == nil {
			m["text"] = "hi"
		}
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, v := range map[string]any{
		"users.json":              []map[string]any{{"id": "U1", "name": "u1", "profile": map[string]any{"email": "u1@x.example"}}},
		"channels.json":           []map[string]any{{"id": "C1", "name": "general", "created": 1700000000, "members": []string{"U1"}}},
		"general/2023-11-14.json": msgs,
	} {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.NewEncoder(w).Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	src, err := transfer.ReadSlack(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	got, err := src.Channels[0].Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(msgs) || len(src.Problems) != 0 {
		t.Fatalf("%d messages read of %d, problems %q", len(got), len(msgs), src.Problems)
	}
	for i, m := range got {
		if !equalProfile(m.BotProfile, want[i]) {
			t.Errorf("message %d: bot profile %+v, want %+v", i, m.BotProfile, want[i])
		}
	}
	if n := src.Skipped[transfer.SkipSlackProfile]; n != wantBad {
		t.Errorf("%d parts counted as dropped, want %d (%v)", n, wantBad, src.Skipped)
	}
}
