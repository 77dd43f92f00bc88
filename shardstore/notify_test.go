package shardstore_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/internal/mailtest"
	"parley/notify"
	"parley/storetest"
)

// The notifier's steps (package notify: NotifyRecipients, ClaimNotify,
// MissedItems, NotifySent) on the router, as two nodes would take them.

// mentionAndDM gives bob an unread mention in w1 and an unread DM message
// in w2 (on two shards), the mention first.
func mentionAndDM(t *testing.T, r parley.Store, owner, bob *parley.User, w1, w2 *parley.Workspace) (mention, dm *parley.Message) {
	t.Helper()
	storetest.MustJoinWorkspace(t, r, w1, owner, bob)
	storetest.MustJoinWorkspace(t, r, w2, owner, bob)
	ch := storetest.MustChannel(t, r, w1, owner, "general-"+bob.Handle, parley.KindPublic)
	_, err := r.JoinChannel(bg(), bob.ID, ch.ID)
	storetest.NoErr(t, err)
	mention = storetest.MustPost(t, r, owner, ch, "@"+bob.Handle+" can you look?")
	d, _, err := r.OpenDM(bg(), owner.ID, w2.ID, []string{bob.ID})
	storetest.NoErr(t, err)
	dm = storetest.MustPost(t, r, owner, d, "and this, privately")
	return mention, dm
}

func recipientIDs(rs []parley.NotifyRecipient) []string {
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.UserID)
	}
	return ids
}

func findRecipient(rs []parley.NotifyRecipient, id string) *parley.NotifyRecipient {
	for i := range rs {
		if rs[i].UserID == id {
			return &rs[i]
		}
	}
	return nil
}

// TestNotifyAcrossShards: a mention on one shard and a DM on another make
// one digest for their user, with the preference of the control database;
// one node claims it; once sent, both items are marked on their shards and
// the next scan has nothing for the user.
func TestNotifyAcrossShards(t *testing.T) {
	c, owner, w1, w2 := twoShards(t)
	r := c.r
	bob := storetest.MustUser(t, r, "bob")
	carol := storetest.MustUser(t, r, "carol")
	mention, dm := mentionAndDM(t, r, owner, bob, w1, w2)

	// carol, email off, has a mention on the shard that is not the
	// control database: her preference, read there, keeps her out.
	other := w1
	if c.shardOf(t, w1.ID) == c.shards[0] {
		other = w2
	}
	storetest.MustJoinWorkspace(t, r, other, owner, carol)
	ch := storetest.MustChannel(t, r, other, owner, "carols", parley.KindPublic)
	_, err := r.JoinChannel(bg(), carol.ID, ch.ID)
	storetest.NoErr(t, err)
	storetest.MustPost(t, r, owner, ch, "@"+carol.Handle+" hello")
	_, err = r.SetNotifyPrefs(bg(), carol.ID, parley.NotifyPrefs{Mode: parley.NotifyOff, IntervalSeconds: 900})
	storetest.NoErr(t, err)
	_, err = r.SetNotifyPrefs(bg(), bob.ID, parley.NotifyPrefs{Mode: parley.NotifyOn, IntervalSeconds: 3600})
	storetest.NoErr(t, err)
	// The preference is the control database's alone.
	otherStore, err := r.Shard(bg(), c.shardOf(t, other.ID))
	storetest.NoErr(t, err)
	if p, err := otherStore.NotifyPrefs(bg(), carol.ID); err != nil || p.Mode != parley.NotifyOn {
		t.Fatalf("carol's preference on shard %s = %+v, %v; want the default (none written there)", c.shardOf(t, other.ID), p, err)
	}
	if p, err := r.NotifyPrefs(bg(), carol.ID); err != nil || p.Mode != parley.NotifyOff {
		t.Fatalf("carol's preference = %+v, %v", p, err)
	}

	rs, err := r.NotifyRecipients(bg(), 10)
	storetest.NoErr(t, err)
	got := findRecipient(rs, bob.ID)
	if got == nil || findRecipient(rs, carol.ID) != nil || len(rs) != 1 {
		t.Fatalf("recipients = %v, want bob (%s) alone", recipientIDs(rs), bob.ID)
	}
	if got.Email != bob.Email || got.Prefs.IntervalSeconds != 3600 || !got.LastSentAt.IsZero() {
		t.Fatalf("bob as a recipient = %+v", got)
	}

	// Two nodes: one claim for the user across the cluster.
	now := time.Now()
	ok, last, err := r.ClaimNotify(bg(), bob.ID, "node-1", now, now.Add(time.Minute))
	storetest.NoErr(t, err)
	if !ok || !last.IsZero() {
		t.Fatalf("node-1's claim = %v, %v", ok, last)
	}
	ok, _, err = r.ClaimNotify(bg(), bob.ID, "node-2", now, now.Add(time.Minute))
	storetest.NoErr(t, err)
	if ok {
		t.Fatal("node-2 claimed bob while node-1 holds him")
	}

	items, err := r.MissedItems(bg(), bob.ID, 10)
	storetest.NoErr(t, err)
	if len(items) != 2 {
		t.Fatalf("missed items = %+v, want the mention and the DM", items)
	}
	if it := items[0]; it.MessageID != mention.ID || !it.Mention || it.WorkspaceID != w1.ID {
		t.Fatalf("first item = %+v, want the mention %s in %s", it, mention.ID, w1.ID)
	}
	if it := items[1]; it.MessageID != dm.ID || it.Mention || it.WorkspaceID != w2.ID || it.ChannelKind != parley.KindDM {
		t.Fatalf("second item = %+v, want the DM message %s in %s", it, dm.ID, w2.ID)
	}
	if one, err := r.MissedItems(bg(), bob.ID, 1); err != nil || len(one) != 1 || one[0].MessageID != mention.ID {
		t.Fatalf("missed items, limit 1 = %+v, %v; want the oldest", one, err)
	}

	storetest.NoErr(t, r.NotifySent(bg(), bob.ID, "node-1", items, now))
	items, err = r.MissedItems(bg(), bob.ID, 10)
	storetest.NoErr(t, err)
	if len(items) != 0 {
		t.Fatalf("missed items after the email = %+v", items)
	}
	rs, err = r.NotifyRecipients(bg(), 10)
	storetest.NoErr(t, err)
	if len(rs) != 0 {
		t.Fatalf("recipients after the email = %v", recipientIDs(rs))
	}
	// Each item is marked on its own shard.
	for _, w := range []*parley.Workspace{w1, w2} {
		s, err := r.Shard(bg(), c.shardOf(t, w.ID))
		storetest.NoErr(t, err)
		left, err := s.MissedItems(bg(), bob.ID, 10)
		storetest.NoErr(t, err)
		if len(left) != 0 {
			t.Fatalf("shard %s still has %+v for bob", c.shardOf(t, w.ID), left)
		}
	}
	// The claim was released and the email recorded on the control database.
	ok, last, err = r.ClaimNotify(bg(), bob.ID, "node-2", now, now.Add(time.Minute))
	storetest.NoErr(t, err)
	if !ok || last.UnixMicro() != now.UnixMicro() {
		t.Fatalf("node-2's claim after the email = %v, last sent %v; want true, %v", ok, last, now)
	}
	storetest.NoErr(t, r.ReleaseNotify(bg(), bob.ID, "node-2"))

	// Something new is the next digest's, alone.
	mch, err := r.GetChannel(bg(), owner.ID, mention.ChannelID)
	storetest.NoErr(t, err)
	again := storetest.MustPost(t, r, owner, mch, "@"+bob.Handle+" again")
	items, err = r.MissedItems(bg(), bob.ID, 10)
	storetest.NoErr(t, err)
	if len(items) != 1 || items[0].MessageID != again.ID {
		t.Fatalf("missed items after a new mention = %+v", items)
	}
	rs, err = r.NotifyRecipients(bg(), 10)
	storetest.NoErr(t, err)
	if got := findRecipient(rs, bob.ID); got == nil || got.LastSentAt.UnixMicro() != now.UnixMicro() {
		t.Fatalf("recipients after a new mention = %+v", rs)
	}
}

// TestNotifyShardDown: with a shard down the digest goes out with the
// other shards' items (a partial answer, counted); the down shard's item
// is the next digest's once it is back.
func TestNotifyShardDown(t *testing.T) {
	c, owner, w1, w2 := twoShards(t)
	r := c.r
	bob := storetest.MustUser(t, r, "bob")
	mention, dm := mentionAndDM(t, r, owner, bob, w1, w2)
	downWS, upItem, downItem := w2, mention, dm
	if c.shardOf(t, w2.ID) == c.shards[0] { // keep the control database up
		downWS, upItem, downItem = w1, dm, mention
	}
	dsn := c.dsns[indexOf(c.shards, c.shardOf(t, downWS.ID))]
	partial := counterValue(t, c.reg, "parley_shardstore_partial_total")
	setConnections(t, dsn, false)
	t.Cleanup(func() { setConnections(t, dsn, true) })

	rs, err := r.NotifyRecipients(bg(), 10)
	storetest.NoErr(t, err)
	if findRecipient(rs, bob.ID) == nil {
		t.Fatalf("recipients with a shard down = %v, want bob", recipientIDs(rs))
	}
	now := time.Now()
	ok, _, err := r.ClaimNotify(bg(), bob.ID, "node-1", now, now.Add(time.Minute))
	storetest.NoErr(t, err)
	if !ok {
		t.Fatal("claim refused")
	}
	items, err := r.MissedItems(bg(), bob.ID, 10)
	storetest.NoErr(t, err)
	if len(items) != 1 || items[0].MessageID != upItem.ID {
		t.Fatalf("missed items with a shard down = %+v, want %s alone", items, upItem.ID)
	}
	storetest.NoErr(t, r.NotifySent(bg(), bob.ID, "node-1", items, now))
	if got := counterValue(t, c.reg, "parley_shardstore_partial_total"); got < partial+2 {
		t.Fatalf("partial answers = %v, want at least %v (recipients and items)", got, partial+2)
	}

	setConnections(t, dsn, true)
	var later []parley.MissedItem
	waitFor(t, 30*time.Second, "the down shard's item", func() bool {
		later, err = r.MissedItems(bg(), bob.ID, 10)
		return err == nil && len(later) > 0
	})
	if len(later) != 1 || later[0].MessageID != downItem.ID {
		t.Fatalf("missed items once the shard is back = %+v, want %s alone", later, downItem.ID)
	}
	rs, err = r.NotifyRecipients(bg(), 10)
	storetest.NoErr(t, err)
	if findRecipient(rs, bob.ID) == nil {
		t.Fatalf("recipients once the shard is back = %v, want bob", recipientIDs(rs))
	}
	ok, _, err = r.ClaimNotify(bg(), bob.ID, "node-2", now, now.Add(time.Minute))
	storetest.NoErr(t, err)
	if !ok {
		t.Fatal("claim refused after the first email")
	}
	storetest.NoErr(t, r.NotifySent(bg(), bob.ID, "node-2", later, now.Add(time.Hour)))
	if items, err := r.MissedItems(bg(), bob.ID, 10); err != nil || len(items) != 0 {
		t.Fatalf("missed items after both emails = %+v, %v", items, err)
	}
}

// TestNotifyEmailAcrossShards: the notifier end to end over routers, with
// a real SMTP server (mailpit). bob has an unread mention in a workspace on
// a shard that is not the control database and an unread DM in a
// workspace on another shard; two nodes, each with its own router over the
// shards, scan at once: he gets exactly one email, which lists both. The
// next scans, past his interval, send nothing: both items were marked on
// their shards.
func TestNotifyEmailAcrossShards(t *testing.T) {
	mail := mailtest.Start(t)
	c, owner, w1, w2 := twoShards(t)
	// The mention's workspace off the control database; the DM's on
	// another shard.
	onB, onA := w1, w2
	if c.shardOf(t, w1.ID) == c.shards[0] {
		onB, onA = w2, w1
	}
	bob := storetest.MustUser(t, c.r, "bob")
	mention, dm := mentionAndDM(t, c.r, owner, bob, onB, onA)

	// A second node: its own router over the same shards and directory.
	other := *c
	other.reg = prometheus.NewRegistry()
	other.open(t, &storetest.Recorder{})

	// The clock the notifiers read: the store's time plus an offset the
	// test moves past the interval, never a sleep.
	var off atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(off.Load())) }
	node := func(id string, r parley.NotifyStore) *notify.Notifier {
		n, err := notify.New(notify.Config{Store: r,
			SMTP:    notify.SMTP{Host: mail.SMTPHost, Port: mail.SMTPPort, TLS: notify.TLSNone, From: "Parley <parley@example.com>"},
			BaseURL: "https://chat.example", Secret: []byte("test-email-secret-0123456789"), NodeID: id, Now: now,
			Registerer: prometheus.NewRegistry()})
		storetest.NoErr(t, err)
		return n
	}
	nodes := []*notify.Notifier{node("node-1", c.r), node("node-2", other.r)}
	scan := func() int {
		t.Helper()
		var wg sync.WaitGroup
		sent := make([]int, len(nodes))
		errs := make([]error, len(nodes))
		for i, n := range nodes {
			wg.Go(func() { sent[i], errs[i] = n.RunOnce(context.Background()) })
		}
		wg.Wait()
		for _, err := range errs {
			storetest.NoErr(t, err)
		}
		return sent[0] + sent[1]
	}

	if n := scan(); n != 0 {
		t.Fatalf("%d emails before the interval, want none", n)
	}
	off.Store(int64(16 * time.Minute))
	if n := scan(); n != 1 {
		t.Fatalf("%d emails from two nodes, want exactly 1", n)
	}
	msgs := mail.Messages(t)
	if len(msgs) != 1 {
		t.Fatalf("mailpit has %d emails, want 1: %+v", len(msgs), msgs)
	}
	m := mail.Message(t, msgs[0].ID)
	if len(m.To) != 1 || m.To[0].Address != bob.Email {
		t.Fatalf("email to %+v, want %s", m.To, bob.Email)
	}
	if want := "1 new mention and 1 direct message in " + onB.Name + " and 1 other workspace"; m.Subject != want {
		t.Fatalf("subject %q, want %q", m.Subject, want)
	}
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(m.Text, "\r\n", "\n"), "\n") {
		lines = append(lines, strings.TrimSpace(l))
	}
	for _, want := range []string{"#general-" + bob.Handle + " in " + onB.Name, mention.Text,
		"a direct message in " + onA.Name, dm.Text} {
		if !slices.Contains(lines, want) {
			t.Errorf("the email lacks the line %q:\n%s", want, m.Text)
		}
	}

	// Past bob's interval: nothing is left to send on either shard.
	off.Store(int64(2 * time.Hour))
	if n := scan(); n != 0 {
		t.Fatalf("%d emails on the next scan, want none", n)
	}
	if msgs := mail.Messages(t); len(msgs) != 1 {
		t.Fatalf("mailpit has %d emails after the next scan, want 1", len(msgs))
	}
}
