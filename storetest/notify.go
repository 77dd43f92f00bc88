package storetest

import (
	"testing"
	"time"

	"parley"
)

// The notifier's store (parley.NotifyStore, docs/email.md): preferences,
// which users have unread mentions and DM messages that no email covered,
// and the send claim that makes one node the sender.

func notifyStore(t *testing.T, s parley.Store) parley.NotifyStore {
	t.Helper()
	ns, ok := s.(parley.NotifyStore)
	if !ok {
		t.Skipf("%T keeps no notification state", s)
	}
	return ns
}

func recipientIDs(t *testing.T, ns parley.NotifyStore) map[string]parley.NotifyRecipient {
	t.Helper()
	rs, err := ns.NotifyRecipients(ctx(t), 1000)
	NoErr(t, err)
	out := map[string]parley.NotifyRecipient{}
	for _, r := range rs {
		out[r.UserID] = r
	}
	return out
}

func init() {
	register("Notify/Prefs", func(t *testing.T, open Opener) {
		s := open(t, nil)
		ns := notifyStore(t, s)
		u := MustUser(t, s, "ann")
		p, err := ns.NotifyPrefs(ctx(t), u.ID)
		NoErr(t, err)
		if p != parley.DefaultNotifyPrefs() {
			t.Fatalf("default prefs %+v", p)
		}
		_, err = ns.SetNotifyPrefs(ctx(t), u.ID, parley.NotifyPrefs{Mode: "sometimes", IntervalSeconds: 900})
		Code(t, err, parley.EINVALID)
		_, err = ns.SetNotifyPrefs(ctx(t), u.ID, parley.NotifyPrefs{Mode: parley.NotifyOn, IntervalSeconds: 60})
		Code(t, err, parley.EINVALID)
		want := parley.NotifyPrefs{Mode: parley.NotifyOn, IntervalSeconds: 3600}
		_, err = ns.SetNotifyPrefs(ctx(t), u.ID, want)
		NoErr(t, err)
		if p, _ := ns.NotifyPrefs(ctx(t), u.ID); p != want {
			t.Fatalf("prefs %+v, want %+v", p, want)
		}
		want = parley.NotifyPrefs{Mode: parley.NotifyOff, IntervalSeconds: 86400}
		_, err = ns.SetNotifyPrefs(ctx(t), u.ID, want)
		NoErr(t, err)
		if p, _ := ns.NotifyPrefs(ctx(t), u.ID); p != want {
			t.Fatalf("prefs %+v, want %+v", p, want)
		}
	})

	register("Notify/MissedItems", func(t *testing.T, open Opener) {
		s := open(t, nil)
		ns := notifyStore(t, s)
		ann, bob, cat := MustUser(t, s, "ann"), MustUser(t, s, "bob"), MustUser(t, s, "cat")
		ws := MustWorkspace(t, s, ann)
		MustJoinWorkspace(t, s, ws, ann, bob)
		MustJoinWorkspace(t, s, ws, ann, cat)
		ch := MustChannel(t, s, ws, ann, "general-"+itoa(userSeq.Add(1)), parley.KindPublic)
		_, err := s.AddMembers(ctx(t), ann.ID, ch.ID, []string{bob.ID, cat.ID})
		NoErr(t, err)

		if _, ok := recipientIDs(t, ns)[bob.ID]; ok {
			t.Fatal("bob is a recipient with nothing unread")
		}
		m1 := MustPost(t, s, ann, ch, "hi @"+bob.Handle+" <b>look</b>")
		MustPost(t, s, ann, ch, "no mention here")
		dm, _, err := s.OpenDM(ctx(t), cat.ID, ws.ID, []string{bob.ID})
		NoErr(t, err)
		d1 := MustPost(t, s, cat, dm, "a direct word")
		MustPost(t, s, bob, dm, "bob's own reply is not missed")
		d2 := MustPost(t, s, cat, dm, "and @"+bob.Handle+" again")

		r, ok := recipientIDs(t, ns)[bob.ID]
		if !ok || r.Email != bob.Email || r.Prefs != parley.DefaultNotifyPrefs() || !r.LastSentAt.IsZero() {
			t.Fatalf("bob as a recipient: %+v, %v", r, ok)
		}
		items, err := ns.MissedItems(ctx(t), bob.ID, 50)
		NoErr(t, err)
		// bob's reply moved his DM marker past d1: only d2 is unread there.
		if len(items) != 2 || items[0].MessageID != m1.ID || !items[0].Mention ||
			items[1].MessageID != d2.ID || !items[1].Mention || items[1].ChannelKind != parley.KindDM {
			t.Fatalf("bob's items: %+v", items)
		}
		if items[0].WorkspaceName != ws.Name || items[0].AuthorHandle != ann.Handle || items[0].Text != m1.Text {
			t.Fatalf("item fields: %+v", items[0])
		}
		_ = d1

		// The DM, not mentioning cat's other reader, counts as a DM item.
		d3 := MustPost(t, s, cat, dm, "plain DM")
		items, err = ns.MissedItems(ctx(t), bob.ID, 50)
		NoErr(t, err)
		if len(items) != 3 || items[2].MessageID != d3.ID || items[2].Mention {
			t.Fatalf("after a plain DM: %+v", items)
		}

		// Reading the channel drops its mention.
		_, err = s.MarkRead(ctx(t), bob.ID, ch.ID, m1.Seq)
		NoErr(t, err)
		items, err = ns.MissedItems(ctx(t), bob.ID, 50)
		NoErr(t, err)
		if len(items) != 2 || items[0].ChannelID != dm.ID {
			t.Fatalf("after reading the channel: %+v", items)
		}

		// Claims: one holder until it expires or is released.
		now := time.Now()
		ok, last, err := ns.ClaimNotify(ctx(t), bob.ID, "n1", now, now.Add(time.Minute))
		NoErr(t, err)
		if !ok || !last.IsZero() {
			t.Fatalf("first claim: %v %v", ok, last)
		}
		if ok, _, err := ns.ClaimNotify(ctx(t), bob.ID, "n2", now, now.Add(time.Minute)); err != nil || ok {
			t.Fatalf("second claim: %v %v", ok, err)
		}
		if ok, _, err := ns.ClaimNotify(ctx(t), bob.ID, "n2", now.Add(2*time.Minute), now.Add(3*time.Minute)); err != nil || !ok {
			t.Fatalf("claim after expiry: %v %v", ok, err)
		}
		NoErr(t, ns.ReleaseNotify(ctx(t), bob.ID, "n2"))
		ok, _, err = ns.ClaimNotify(ctx(t), bob.ID, "n1", now, now.Add(time.Minute))
		NoErr(t, err)
		if !ok {
			t.Fatal("claim after release refused")
		}

		// Sent: the items are not missed again, and the time is kept.
		sentAt := now.Truncate(time.Microsecond)
		NoErr(t, ns.NotifySent(ctx(t), bob.ID, "n1", items, sentAt))
		items, err = ns.MissedItems(ctx(t), bob.ID, 50)
		NoErr(t, err)
		if len(items) != 0 {
			t.Fatalf("after sending: %+v", items)
		}
		if _, ok := recipientIDs(t, ns)[bob.ID]; ok {
			t.Fatal("bob still a recipient after his email")
		}
		d4 := MustPost(t, s, cat, dm, "one more")
		r, ok = recipientIDs(t, ns)[bob.ID]
		if !ok || !r.LastSentAt.Equal(sentAt) {
			t.Fatalf("after a new DM: %+v %v (sent at %v)", r, ok, sentAt)
		}
		items, err = ns.MissedItems(ctx(t), bob.ID, 50)
		NoErr(t, err)
		if len(items) != 1 || items[0].MessageID != d4.ID {
			t.Fatalf("new DM: %+v", items)
		}
		ok, last, err = ns.ClaimNotify(ctx(t), bob.ID, "n2", now, now.Add(time.Minute))
		NoErr(t, err)
		if !ok || !last.Equal(sentAt) {
			t.Fatalf("claim after sending: %v %v", ok, last)
		}

		// Email off: not a recipient.
		_, err = ns.SetNotifyPrefs(ctx(t), bob.ID, parley.NotifyPrefs{Mode: parley.NotifyOff, IntervalSeconds: 900})
		NoErr(t, err)
		if _, ok := recipientIDs(t, ns)[bob.ID]; ok {
			t.Fatal("bob a recipient with email off")
		}
	})
}
