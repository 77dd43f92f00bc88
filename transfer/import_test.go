package transfer_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"parley"
	"parley/internal/testpg"
	"parley/sqlstore"
	"parley/storetest"
	"parley/transfer"
	"parley/transfer/transfertest"
)

// The import and export against both real stores: a generated Slack
// export of realistic shape is imported and then read back through the
// Store's API, field by field, and through storetest.CheckWorkspace, the
// invariants a live workspace keeps.

type opener func(tb testing.TB) *sqlstore.Store

func openSQLite(tb testing.TB) *sqlstore.Store {
	return mustOpen(tb, sqlstore.Config{Path: filepath.Join(tb.TempDir(), "parley.db")})
}

func openPostgres(tb testing.TB) *sqlstore.Store {
	return mustOpen(tb, sqlstore.Config{PostgresURL: testpg.New(tb)})
}

func mustOpen(tb testing.TB, cfg sqlstore.Config) *sqlstore.Store {
	tb.Helper()
	s, err := sqlstore.Open(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func stores() map[string]opener {
	return map[string]opener{"SQLite": openSQLite, "Postgres": openPostgres}
}

// env is a store with the import's owner and an account Ada's Slack user
// matches by email.
type env struct {
	s     *sqlstore.Store
	owner *parley.User
	ada   *parley.User
}

func newEnv(t testing.TB, open opener) *env {
	t.Helper()
	s := open(t)
	mk := func(email, handle string) *parley.User {
		u, err := s.CreateUser(context.Background(), parley.NewUser{Email: email, Handle: handle, Name: handle, PasswordHash: "x"})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	return &env{s: s, owner: mk("owner@example.com", "owner"), ada: mk("ADA@example.com", "ada")}
}

func readSlack(t testing.TB, ex *transfertest.Export) *transfer.Source {
	t.Helper()
	src, err := transfer.ReadSlack(bytes.NewReader(ex.Zip), int64(len(ex.Zip)))
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// extUsers maps every user the export names to its account here, by
// asking the store again: an idempotent ImportUsers answers from the map.
func extUsers(t *testing.T, s *sqlstore.Store, wsID string, ex *transfertest.Export) (ids, handles map[string]string) {
	t.Helper()
	var in []parley.ImportUser
	for _, u := range ex.Users {
		in = append(in, parley.ImportUser{ExtID: u.ID})
	}
	in = append(in, parley.ImportUser{ExtID: ex.Bot})
	if ex.Ghost != "" {
		in = append(in, parley.ImportUser{ExtID: ex.Ghost}, parley.ImportUser{ExtID: "USLACKBOT"})
	}
	out, err := s.ImportUsers(context.Background(), wsID, parley.ImportSlack, in)
	if err != nil {
		t.Fatal(err)
	}
	ids, handles = map[string]string{}, map[string]string{}
	for _, r := range out {
		if !r.Mapped {
			t.Fatalf("user %s was not imported", r.ExtID)
		}
		ids[r.ExtID], handles[r.ExtID] = r.UserID, r.Handle
	}
	return ids, handles
}

// checkSlackImport compares the workspace with the export, field by field,
// and checks the invariants. It returns the channels' ids by ext id.
func checkSlackImport(t *testing.T, e *env, wsID string, ex *transfertest.Export) map[string]string {
	t.Helper()
	ctx := context.Background()
	ids, handles := extUsers(t, e.s, wsID, ex)
	if ids["U0ADA"] != e.ada.ID {
		t.Fatalf("Ada's Slack user maps to %s, not her account %s (same email)", ids["U0ADA"], e.ada.ID)
	}
	if handles["U0DUP"] != "ada-2" {
		t.Fatalf("a second Slack 'ada' got handle %q, want ada-2", handles["U0DUP"])
	}
	read := storetest.CheckWorkspace(t, e.s, e.owner.ID, wsID)
	boot, err := e.s.Boot(ctx, e.owner.ID, parley.BootQuery{WorkspaceID: wsID})
	if err != nil {
		t.Fatal(err)
	}
	chIDs := map[string]string{}
	for _, c := range ex.Channels {
		var bc *parley.BootChannel
		for i := range boot.Channels {
			if boot.Channels[i].Name == c.Want {
				bc = &boot.Channels[i]
			}
		}
		if bc == nil {
			t.Fatalf("channel %s (%s) not imported", c.Want, c.ID)
		}
		chIDs[c.ID] = bc.ID
		ch, err := e.s.GetChannel(ctx, e.owner.ID, bc.ID)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Topic != "Topic of "+c.Name || ch.Purpose != "Purpose of "+c.Name || (ch.ArchivedAt != nil) != c.Archived ||
			ch.MemberCount != int64(len(c.Members)+1) {
			t.Fatalf("channel %s: topic %q purpose %q archived %v members %d; want %d members",
				c.Want, ch.Topic, ch.Purpose, ch.ArchivedAt, ch.MemberCount, len(c.Members)+1)
		}
		if bc.UnreadCount != 0 || bc.MentionCount != 0 || bc.LastReadSeq != bc.LastSeq {
			t.Fatalf("channel %s: imported history is unread: %+v", c.Want, bc)
		}

		// Expected: top-level messages in ts order, each followed by its
		// replies (what CheckWorkspace returns). Replies of a deleted
		// root are not readable, like the root.
		want := ex.Messages[c.ID]
		deleted := map[string]bool{}
		replies := map[string][]transfertest.Message{}
		for _, m := range want {
			if m.Deleted {
				deleted[m.ExtID] = true
			}
			if m.Root != "" {
				replies[m.Root] = append(replies[m.Root], m)
			}
		}
		var flat []transfertest.Message
		for _, m := range want {
			if m.Root == "" && !m.Deleted {
				flat = append(flat, m)
				flat = append(flat, replies[m.ExtID]...)
			}
		}
		got := read[bc.ID]
		if len(got) != len(flat) {
			t.Fatalf("channel %s: %d messages readable, want %d", c.Want, len(got), len(flat))
		}
		byExt := map[string]string{}
		for i, w := range flat {
			g := got[i]
			byExt[w.ExtID] = g.ID
			text := w.Want
			for ext, h := range handles {
				text = strings.ReplaceAll(text, "{{"+ext+"}}", h)
			}
			where := fmt.Sprintf("channel %s message %d (%s)", c.Want, i, w.ExtID)
			if g.Text != text {
				t.Fatalf("%s: text %.200q, want %.200q", where, g.Text, text)
			}
			if g.UserID != ids[w.User] {
				t.Fatalf("%s: user %s, want %s (%s)", where, g.UserID, ids[w.User], w.User)
			}
			if !g.CreatedAt.Equal(w.At) {
				t.Fatalf("%s: created %v, want %v", where, g.CreatedAt, w.At)
			}
			if (g.EditedAt == nil) != (w.EditedAt == nil) || (g.EditedAt != nil && !g.EditedAt.Equal(*w.EditedAt)) {
				t.Fatalf("%s: edited %v, want %v", where, g.EditedAt, w.EditedAt)
			}
			wantRoot := ""
			if w.Root != "" {
				wantRoot = byExt[w.Root]
			}
			if g.ThreadRootID != wantRoot {
				t.Fatalf("%s: thread root %q, want %q", where, g.ThreadRootID, wantRoot)
			}
			if rs := replies[w.ExtID]; w.Root == "" && (g.ReplyCount != len(rs) ||
				(len(rs) > 0 && !g.LastReplyAt.Equal(rs[len(rs)-1].At))) {
				t.Fatalf("%s: %d replies, last %v; want %d", where, g.ReplyCount, g.LastReplyAt, len(rs))
			}
			if g.Pinned != (w.PinnedBy != "") {
				t.Fatalf("%s: pinned %v, want %v", where, g.Pinned, w.PinnedBy != "")
			}
			checkProfile(t, where, g.BotProfile, w.Profile)
			if len(g.Reactions) != len(w.Reactions) {
				t.Fatalf("%s: reactions %+v, want %+v", where, g.Reactions, w.Reactions)
			}
			for k, r := range w.Reactions {
				if g.Reactions[k].Emoji != r.Emoji || g.Reactions[k].Count != len(r.Users) {
					t.Fatalf("%s: reactions %+v, want %+v", where, g.Reactions, w.Reactions)
				}
			}
		}
		// Seq in time order, over roots and replies together.
		bySeq := slices.Clone(got)
		slices.SortFunc(bySeq, func(a, b parley.Message) int { return int(a.Seq - b.Seq) })
		for i := 1; i < len(bySeq); i++ {
			if bySeq[i].CreatedAt.Before(bySeq[i-1].CreatedAt) {
				t.Fatalf("channel %s: seq %d is older than seq %d", c.Want, bySeq[i].Seq, bySeq[i-1].Seq)
			}
		}
		checkMemberships(t, e, bc.ID, c, ex, ids)
		pins, err := e.s.ListPins(ctx, e.owner.ID, bc.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantPins := 0
		for _, w := range flat {
			if w.PinnedBy != "" {
				wantPins++
			}
		}
		if len(pins.Messages) != wantPins {
			t.Fatalf("channel %s: %d pins, want %d", c.Want, len(pins.Messages), wantPins)
		}
	}
	return chIDs
}

// wantCounts is what a first import of ex must report.
func checkSummary(t *testing.T, sum *transfer.Summary, ex *transfertest.Export) {
	t.Helper()
	var msgs, repl, files, pins, reacts, orphans int
	for _, ms := range ex.Messages {
		for _, m := range ms {
			msgs++
			files += m.Files
			if m.Root != "" {
				repl++
			}
			if m.PinnedBy != "" {
				pins++
			}
			if m.Orphan {
				orphans++
			}
			for _, r := range m.Reactions {
				reacts += len(r.Users)
			}
		}
	}
	placeholders := 2 // the ghost and USLACKBOT
	if ex.Ghost == "" {
		placeholders = 0
	}
	if sum.Notices != ex.Joins {
		t.Errorf("summary: %d membership notices, want %d", sum.Notices, ex.Joins)
	}
	if sum.Messages != msgs || sum.Replies != repl || sum.Files != files || sum.Pins != pins || sum.Reactions != reacts ||
		sum.UsersMatched != 1 || sum.UsersCreated != len(ex.Users)-1+placeholders+1 || sum.Bots != 1 ||
		sum.ChannelsCreated != len(ex.Channels)-1 || sum.ChannelsKnown != 1 {
		t.Fatalf("summary %+v; want %d messages, %d replies, %d files, %d pins, %d reactions", sum, msgs, repl, files, pins, reacts)
	}
	want := map[string]int{
		"join and leave notices": 0, // imported now
		"channel notices (topic, purpose, name, archive, pins, integrations)": ex.Notices,
		"private channels (groups.json)":                                      ex.Private,
		"direct messages (dms.json)":                                          ex.DMs,
		"group direct messages (mpims.json)":                                  ex.MPIMs,
		transfer.SkipSlackProfile:                                             ex.BadProfileParts,
	}
	if ex.Ghost != "" {
		want["messages with NUL characters (removed)"] = 1
		want["messages longer than 40,000 characters (cut)"] = 1
		want["reactions with an emoji name Parley does not take"] = ex.BadEmoji
		want["replies whose thread root is missing (imported as top-level messages)"] = orphans
		want["users named by messages but missing from the users list (imported as placeholders)"] = placeholders
	}
	for k, n := range want {
		if sum.Skipped[k] != n {
			t.Errorf("skipped %q: %d, want %d (all: %v)", k, sum.Skipped[k], n, sum.Skipped)
		}
	}
	for _, f := range ex.Malformed {
		if !slices.ContainsFunc(sum.Problems, func(p string) bool { return strings.Contains(p, f) }) {
			t.Errorf("malformed %s not reported: %q", f, sum.Problems)
		}
	}
	if len(sum.Problems) != len(ex.Malformed)+ex.BadEntries {
		t.Errorf("problems %q, want %d", sum.Problems, len(ex.Malformed)+ex.BadEntries)
	}
}

func TestSlackImport(t *testing.T) {
	for name, open := range stores() {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, open)
			ex := transfertest.Generate(transfertest.Config{Seed: 1})
			opts := transfer.Options{OwnerID: e.owner.ID, Slug: "acme", Batch: 400}
			sum, err := transfer.Import(context.Background(), e.s, readSlack(t, ex), opts)
			if err != nil {
				t.Fatal(err)
			}
			checkSummary(t, sum, ex)
			checkSlackImport(t, e, sum.WorkspaceID, ex)
			before, err := e.s.Boot(context.Background(), e.owner.ID, parley.BootQuery{WorkspaceID: sum.WorkspaceID})
			if err != nil {
				t.Fatal(err)
			}

			// Again: nothing twice.
			again, err := transfer.Import(context.Background(), e.s, readSlack(t, ex), opts)
			if err != nil {
				t.Fatal(err)
			}
			if again.Messages != 0 || again.AlreadyImported != sum.Messages || again.Notices != 0 || again.NoticesKnown != ex.Joins ||
				again.UsersCreated+again.UsersMatched != 0 ||
				again.ChannelsCreated != 0 || again.WorkspaceCreated {
				t.Fatalf("second run: %+v", again)
			}
			after, err := e.s.Boot(context.Background(), e.owner.ID, parley.BootQuery{WorkspaceID: sum.WorkspaceID})
			if err != nil {
				t.Fatal(err)
			}
			for i := range before.Channels {
				if before.Channels[i].LastSeq != after.Channels[i].LastSeq || before.Channels[i].MemberCount != after.Channels[i].MemberCount {
					t.Fatalf("second run changed %s: %+v → %+v", before.Channels[i].Name, before.Channels[i], after.Channels[i])
				}
			}
			checkSlackImport(t, e, sum.WorkspaceID, ex)
		})
	}
}

// TestSlackImportResume cuts an import off between two batches, as a
// crash would (each batch is one transaction: a crash inside one leaves
// nothing of it), and runs it again: the result is the whole import, once.
func TestSlackImportResume(t *testing.T) {
	for name, open := range stores() {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, open)
			ex := transfertest.Generate(transfertest.Config{Seed: 2, Messages: 1500})
			ctx, cancel := context.WithCancel(context.Background())
			batches := 0
			opts := transfer.Options{OwnerID: e.owner.ID, Slug: "acme", Batch: 100, Progress: func(p transfer.Progress) {
				if p.ChannelsDone < 2 {
					batches++
				}
				if batches == 5 {
					cancel()
				}
			}}
			first, err := transfer.Import(ctx, e.s, readSlack(t, ex), opts)
			if !errors.Is(err, context.Canceled) || first != nil {
				t.Fatalf("cut-off import: %+v, %v", first, err)
			}
			opts.Progress = nil
			sum, err := transfer.Import(context.Background(), e.s, readSlack(t, ex), opts)
			if err != nil {
				t.Fatal(err)
			}
			if sum.AlreadyImported == 0 || sum.Messages == 0 {
				t.Fatalf("the rerun did not pick up where the first run stopped: %+v", sum)
			}
			total := 0
			for _, ms := range ex.Messages {
				total += len(ms)
			}
			if sum.Messages+sum.AlreadyImported != total {
				t.Fatalf("rerun: %d new + %d already = %d, want %d", sum.Messages, sum.AlreadyImported,
					sum.Messages+sum.AlreadyImported, total)
			}
			if sum.Notices+sum.NoticesKnown != ex.Joins {
				t.Fatalf("rerun: %d new + %d already imported membership notices, want %d", sum.Notices, sum.NoticesKnown, ex.Joins)
			}
			checkSlackImport(t, e, sum.WorkspaceID, ex)
		})
	}
}

// TestClaimImportedAccount: signing up with the email of an account the
// import created takes it over, history and memberships included.
func TestClaimImportedAccount(t *testing.T) {
	for name, open := range stores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, open)
			ex := transfertest.Generate(transfertest.Config{Seed: 3, Messages: 400, NoEdge: true})
			sum, err := transfer.Import(ctx, e.s, readSlack(t, ex), transfer.Options{OwnerID: e.owner.ID, Slug: "acme"})
			if err != nil {
				t.Fatal(err)
			}
			ids, _ := extUsers(t, e.s, sum.WorkspaceID, ex)
			id := ids["U0001"] // user00@corp.example
			before, _, err := e.s.UserCredentials(ctx, "user00@corp.example")
			if err != nil || before.ID != id || !before.Deactivated {
				t.Fatalf("imported account before the claim: %+v, %v", before, err)
			}
			if err := e.s.CreateSession(ctx, parley.Session{TokenHash: "t1", UserID: id, ExpiresAt: time.Now().Add(time.Hour)}); parley.ErrorCode(err) != parley.EUNAUTHORIZED {
				t.Fatalf("a session for an unclaimed imported account: %v", err)
			}
			// Ada's account existed: her email is simply taken.
			if _, err := e.s.CreateUser(ctx, parley.NewUser{Email: "ada@example.com", Handle: "ada-x", Name: "Ada", PasswordHash: "h"}); parley.ErrorCode(err) != parley.ECONFLICT {
				t.Fatalf("signing up with a matched account's email: %v", err)
			}
			// Another account's handle: refused, nothing claimed.
			if _, err := e.s.CreateUser(ctx, parley.NewUser{Email: "user00@corp.example", Handle: "owner", Name: "U", PasswordHash: "h"}); parley.ErrorCode(err) != parley.ECONFLICT {
				t.Fatalf("claim with a taken handle: %v", err)
			}
			u, err := e.s.CreateUser(ctx, parley.NewUser{Email: "User00@Corp.example", Handle: "zero", Name: "User Zero", PasswordHash: "h"})
			if err != nil {
				t.Fatal(err)
			}
			if u.ID != id || u.Deactivated || u.Handle != "zero" || u.Name != "User Zero" {
				t.Fatalf("claimed account: %+v, want id %s active", u, id)
			}
			if err := e.s.CreateSession(ctx, parley.Session{TokenHash: "t2", UserID: id, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
				t.Fatalf("a session for the claimed account: %v", err)
			}
			_, hash, err := e.s.UserCredentials(ctx, "user00@corp.example")
			if err != nil || hash != "h" {
				t.Fatalf("claimed account's password hash %q, %v", hash, err)
			}
			// Their history is theirs, and they see the workspace.
			read := storetest.CheckWorkspace(t, e.s, id, sum.WorkspaceID)
			mine := 0
			for _, ms := range read {
				for _, m := range ms {
					if m.UserID == id {
						mine++
					}
				}
			}
			if mine == 0 {
				t.Fatal("the claimed account has no messages")
			}
			if _, err := e.s.CreateUser(ctx, parley.NewUser{Email: "user00@corp.example", Handle: "zero2", Name: "Z", PasswordHash: "h"}); parley.ErrorCode(err) != parley.ECONFLICT {
				t.Fatalf("a second claim: %v", err)
			}
		})
	}
}

// TestExportRoundTrip exports an imported workspace, imports the export
// into a new workspace and compares the two field by field.
func TestExportRoundTrip(t *testing.T) {
	for name, open := range stores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, open)
			ex := transfertest.Generate(transfertest.Config{Seed: 4, Messages: 1200})
			sum, err := transfer.Import(ctx, e.s, readSlack(t, ex), transfer.Options{OwnerID: e.owner.ID, Slug: "acme"})
			if err != nil {
				t.Fatal(err)
			}
			// A private channel made live, exported with Private.
			priv, err := e.s.CreateChannel(ctx, e.owner.ID, sum.WorkspaceID, parley.NewChannel{Name: "secret", Kind: parley.KindPrivate})
			if err != nil {
				t.Fatal(err)
			}
			root, _, err := e.s.PostMessage(ctx, e.owner.ID, priv.ID, parley.NewMessage{Text: "live root"})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := e.s.PostMessage(ctx, e.owner.ID, priv.ID, parley.NewMessage{Text: "live reply", ThreadRootID: root.ID}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.s.AddReaction(ctx, e.owner.ID, root.ID, "tada"); err != nil {
				t.Fatal(err)
			}
			// A webhook's message with a profile, posted live by its bot.
			hookProfile := parley.BotProfile{Name: "Grafana", IconEmoji: "chart_with_upwards_trend", IconURL: "https://grafana.example/icon.png"}
			hook := postAsBot(t, e, sum.WorkspaceID, priv.ID, "Disk 91% on db-1", &hookProfile)

			// Only the owner exports.
			var buf bytes.Buffer
			if _, err := transfer.Export(ctx, e.s, e.ada.ID, sum.WorkspaceID, parley.ExportOptions{}, &buf); parley.ErrorCode(err) != parley.EFORBIDDEN {
				t.Fatalf("export by an admin: %v", err)
			}
			buf.Reset()
			man, err := transfer.Export(ctx, e.s, e.owner.ID, sum.WorkspaceID, parley.ExportOptions{Private: true}, &buf)
			if err != nil {
				t.Fatal(err)
			}
			if man.Channels != len(ex.Channels)+1 || man.Messages == 0 {
				t.Fatalf("manifest %+v", man)
			}
			src, err := transfer.ReadParley(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
			if err != nil {
				t.Fatal(err)
			}
			back, err := transfer.Import(ctx, e.s, src, transfer.Options{OwnerID: e.owner.ID, Slug: "acme-copy"})
			if err != nil {
				t.Fatal(err)
			}
			if back.UsersCreated != 0 || back.Messages != man.Messages || len(back.Problems) != 0 {
				t.Fatalf("round trip import: %+v (manifest %+v)", back, man)
			}
			if back.Skipped[transfer.SkipBotProfile] != 0 {
				t.Fatalf("round trip dropped bot profiles: %v", back.Skipped)
			}
			a := storetest.CheckWorkspace(t, e.s, e.owner.ID, sum.WorkspaceID)
			b := storetest.CheckWorkspace(t, e.s, e.owner.ID, back.WorkspaceID)
			compareWorkspaces(t, e.s, e.owner.ID, sum.WorkspaceID, back.WorkspaceID, a, b)
			// The webhook's message, and the Slack bot messages, kept their
			// profiles in the copy (compareWorkspaces compared them all).
			profiles, hookCopied := 0, false
			for _, ms := range b {
				for _, m := range ms {
					if m.BotProfile != nil {
						profiles++
						hookCopied = hookCopied || (m.Text == hook.Text && *m.BotProfile == hookProfile)
					}
				}
			}
			if !hookCopied || profiles < 10 {
				t.Fatalf("the copy has %d messages with a bot profile; the webhook's among them: %v", profiles, hookCopied)
			}
		})
	}
}

// compareWorkspaces checks that two workspaces hold the same channels and
// messages, field by field, but for ids and seqs.
func compareWorkspaces(t *testing.T, s parley.Store, actor, wsA, wsB string, a, b map[string][]parley.Message) {
	t.Helper()
	ctx := context.Background()
	bootA, err := s.Boot(ctx, actor, parley.BootQuery{WorkspaceID: wsA})
	if err != nil {
		t.Fatal(err)
	}
	bootB, err := s.Boot(ctx, actor, parley.BootQuery{WorkspaceID: wsB})
	if err != nil {
		t.Fatal(err)
	}
	if len(bootA.Channels) != len(bootB.Channels) {
		t.Fatalf("%d channels, the copy has %d", len(bootA.Channels), len(bootB.Channels))
	}
	for i, ca := range bootA.Channels {
		cb := bootB.Channels[i]
		if ca.Name != cb.Name || ca.Kind != cb.Kind || ca.Topic != cb.Topic || ca.MemberCount != cb.MemberCount ||
			(ca.ArchivedAt == nil) != (cb.ArchivedAt == nil) || cb.UnreadCount != 0 {
			t.Fatalf("channel %+v, the copy %+v", ca, cb)
		}
		ma, mb := a[ca.ID], b[cb.ID]
		if len(ma) != len(mb) {
			t.Fatalf("#%s: %d messages, the copy %d", ca.Name, len(ma), len(mb))
		}
		pos := map[string]int{}
		for j, x := range ma {
			y := mb[j]
			pos[x.ID] = j
			rootA, rootB := -1, -1
			if x.ThreadRootID != "" {
				rootA = pos[x.ThreadRootID]
			}
			if y.ThreadRootID != "" {
				rootB = slices.IndexFunc(mb, func(m parley.Message) bool { return m.ID == y.ThreadRootID })
			}
			same := x.Text == y.Text && x.UserID == y.UserID && x.CreatedAt.Equal(y.CreatedAt) &&
				equalTime(x.EditedAt, y.EditedAt) && rootA == rootB && x.ReplyCount == y.ReplyCount &&
				equalTime(x.LastReplyAt, y.LastReplyAt) && x.Pinned == y.Pinned && slices.Equal(x.Reactions, y.Reactions) &&
				equalProfile(x.BotProfile, y.BotProfile)
			if !same {
				t.Fatalf("#%s message %d:\n %+v\n copy %+v", ca.Name, j, x, y)
			}
		}
	}
}

func equalTime(a, b *time.Time) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Equal(*b))
}

func TestReadSlackMalformed(t *testing.T) {
	if _, err := transfer.ReadSlack(bytes.NewReader([]byte("not a zip")), 9); err == nil {
		t.Fatal("garbage read as an export")
	}
	ex := transfertest.Generate(transfertest.Config{Seed: 5, Messages: 50, NoEdge: true})
	src := readSlack(t, ex)
	if len(src.Users) != len(ex.Users) || len(src.Channels) != len(ex.Channels) {
		t.Fatalf("%d users, %d channels", len(src.Users), len(src.Channels))
	}
	for _, c := range []struct{ file, body, want string }{
		{"users.json", "{", "users.json"},
		{"channels.json", `[{"id": 1}]`, "channels.json"},
	} {
		z := rezip(t, ex.Zip, c.file, c.body)
		if _, err := transfer.ReadSlack(bytes.NewReader(z), int64(len(z))); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("malformed %s: %v", c.file, err)
		}
	}
}

func TestSlackText(t *testing.T) {
	handles := map[string]string{"U1": "alice", "U2": "bob"}
	chans := map[string]string{"C1": "general"}
	for _, c := range []struct{ in, want string }{
		{"hi <@U1>", "hi @alice"},
		{"hi <@U1|Alice A>", "hi @alice"},
		{"hi <@U9|carol>", "hi @carol"},
		{"see <#C1> and <#C1|gen> and <#C9|other>", "see #general and #general and #other"},
		{"<!here> <!channel|@channel> <!everyone>", "@here @channel @everyone"},
		{"<!subteam^S1|@devs> <!date^1392734382^{date}|Feb 18, 2014>", "@devs Feb 18, 2014"},
		{"<https://x.example/a?b=1&amp;c=2|the [doc]>", "[the (doc)](https://x.example/a?b=1&c=2)"},
		{"<https://x.example>", "https://x.example"},
		{"<mailto:a@b.example|a@b.example>", "a@b.example"},
		{"a &lt;b&gt; &amp; c", "a <b> & c"},
		{"*bold* and 2*3*4 and * not *", "**bold** and 2*3*4 and * not *"},
		{"`<@U1> &lt;` ```<#C1>``` <@U2>", "`<@U1> <` ```<#C1>``` @bob"},
		{"unclosed <@U1", "unclosed <@U1"},
		{"", ""},
	} {
		if got := transfer.SlackText(c.in, handles, chans); got != c.want {
			t.Errorf("SlackText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	for _, c := range []struct {
		in, want string
		ok       bool
	}{{"thumbsup::skin-tone-2", "thumbsup", true}, {"+1", "+1", true}, {"Tada", "tada", true}, {"bad name!", "bad name!", false}} {
		if got, ok := transfer.CleanEmoji(c.in); got != c.want || ok != c.ok {
			t.Errorf("CleanEmoji(%q) = %q %v", c.in, got, ok)
		}
	}
	if ts, err := transfer.SlackTS("1700000000.000123"); err != nil || ts.UnixMicro() != 1700000000000123 {
		t.Errorf("SlackTS: %v %v", ts, err)
	}
	for _, bad := range []string{"", "x.1", "1.x", "-1.0"} {
		if _, err := transfer.SlackTS(bad); err == nil {
			t.Errorf("SlackTS(%q) accepted", bad)
		}
	}
}

// rezip returns the zip with one file's body replaced.
func rezip(t *testing.T, in []byte, name, body string) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(in), int64(len(in)))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, f := range zr.File {
		w, err := zw.Create(f.Name)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name == name {
			io.WriteString(w, body)
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(w, rc)
		rc.Close()
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// checkMemberships: the channel's joins and leaves are member.joined and
// member.left events of the right users at the right times, in the order
// of the export, and the log (messages and memberships) is in time order.
func checkMemberships(t *testing.T, e *env, channelID string, c transfertest.Channel, ex *transfertest.Export, ids map[string]string) {
	t.Helper()
	var log []parley.Event
	for after := int64(0); ; {
		evs, err := e.s.ChannelLog(context.Background(), channelID, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		log = append(log, evs...)
		after = evs[len(evs)-1].Seq
	}
	var got []transfertest.Membership
	var last time.Time
	for _, ev := range log {
		switch ev.Type {
		case parley.EventMemberJoined, parley.EventMemberLeft:
			var d parley.MemberEventData
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			if d.ChannelID != channelID || d.Seq != ev.Seq || d.MemberCount <= 0 {
				t.Fatalf("channel %s: %s at seq %d: %+v", c.Want, ev.Type, ev.Seq, d)
			}
			got = append(got, transfertest.Membership{User: d.UserID, Type: ev.Type, At: ev.CreatedAt})
		case parley.EventMessageCreated:
		default:
			continue
		}
		if ev.CreatedAt.Before(last) {
			t.Fatalf("channel %s: %s at seq %d (%v) is older than the event before it (%v)", c.Want, ev.Type, ev.Seq, ev.CreatedAt, last)
		}
		last = ev.CreatedAt
	}
	want := ex.Memberships[c.ID]
	if len(got) != len(want) {
		t.Fatalf("channel %s: %d membership events, want %d", c.Want, len(got), len(want))
	}
	for i, w := range want {
		if g := got[i]; g.User != ids[w.User] || g.Type != w.Type || !g.At.Equal(w.At) {
			t.Fatalf("channel %s: membership %d is %+v, want %s of %s (%s) at %v", c.Want, i, g, w.Type, ids[w.User], w.User, w.At)
		}
	}
}
