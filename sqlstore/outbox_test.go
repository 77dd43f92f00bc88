package sqlstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"parley"
	"parley/internal/testpg"
	"parley/sqlstore"
	"parley/storetest"
)

// The outbox relay at the store's level: publishes dropped by the failpoint
// (as if the node had died after each commit) come out of the relay, with
// the topics they were first published on; acknowledged publishes leave no
// outbox row; on PostgreSQL two stores ("nodes") on one database share the
// relaying without a leader.

var fastRelay = sqlstore.RelayConfig{Interval: 20 * time.Millisecond, Grace: 200 * time.Millisecond, AckInterval: 20 * time.Millisecond}

func TestOutboxRelaySQLite(t *testing.T) {
	cfg := sqlstore.Config{Path: filepath.Join(t.TempDir(), "parley.db"), Relay: fastRelay}
	testOutboxRelay(t, cfg, cfg)
}

// The second store opens the same SQLite file: that is not how a node runs
// (one process per file), so on SQLite the test has one store.
func TestOutboxRelayPostgres(t *testing.T) {
	url := testpg.New(t)
	cfg := sqlstore.Config{PostgresURL: url, Relay: fastRelay}
	testOutboxRelay(t, cfg, cfg)
}

func testOutboxRelay(t *testing.T, cfgA, cfgB sqlstore.Config) {
	ctx := context.Background()
	recA, recB := &storetest.Recorder{}, &storetest.Recorder{}
	cfgA.Publisher = recA
	a := mustOpen(t, cfgA)
	var b *sqlstore.Store
	if cfgB.PostgresURL != "" {
		cfgB.Publisher = recB
		b = mustOpen(t, cfgB)
	}
	owner := storetest.MustUser(t, a, "owner")
	joiner := storetest.MustUser(t, a, "joiner")
	ws := storetest.MustWorkspace(t, a, owner)
	storetest.MustJoinWorkspace(t, a, ws, owner, joiner)
	var chans []*parley.Channel
	for i := range 5 {
		chans = append(chans, storetest.MustChannel(t, a, ws, owner, fmt.Sprint("c", i), parley.KindPublic))
	}
	// Everything published normally so far is acknowledged: no backlog.
	waitBacklog(t, a, 0)

	a.SetPublishFailpoint(func(ev parley.Event) bool { return ev.Seq > 0 })
	type key struct {
		ch  string
		seq int64
	}
	lost := map[key]string{} // → type
	for i := range 50 {
		ch := chans[i%len(chans)]
		m := storetest.MustPost(t, a, owner, ch, fmt.Sprint("lost ", i))
		lost[key{ch.ID, m.Seq}] = parley.EventMessageCreated
	}
	j, err := a.JoinChannel(ctx, joiner.ID, chans[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	lost[key{chans[0].ID, j.LastSeq}] = parley.EventMemberJoined
	if b != nil {
		// The other node posts normally meanwhile, in a channel with lost
		// events before: its published tail acknowledges them all.
		storetest.MustPost(t, b, owner, chans[1], "published by b")
	}
	a.SetPublishFailpoint(nil)

	published := func() map[key][]parley.Event {
		out := map[key][]parley.Event{}
		for _, r := range []*storetest.Recorder{recA, recB} {
			for _, ev := range r.Events() {
				if k := (key{ev.ChannelID, ev.Seq}); lost[k] != "" {
					out[k] = append(out[k], ev)
				}
			}
		}
		return out
	}
	// Channel 1's lost events before b's post are revealed by it (the
	// gateways fill the gap); every other lost event must be relayed.
	mustRelay := map[key]bool{}
	for k := range lost {
		if b == nil || k.ch != chans[1].ID {
			mustRelay[k] = true
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := published()
		missing := 0
		for k := range mustRelay {
			if len(got[k]) == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d lost events never published by a relay", missing, len(mustRelay))
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitBacklog(t, a, 0)
	for k, evs := range published() {
		ev := evs[0]
		if ev.Type != lost[k] {
			t.Errorf("%s seq %d relayed as %s, want %s", k.ch, k.seq, ev.Type, lost[k])
		}
		want := []string{parley.TopicChannel(k.ch)}
		if ev.Type == parley.EventMemberJoined {
			want = append(want, parley.TopicUser(joiner.ID), parley.TopicDirectory(ws.ID))
		}
		if !slices.Equal(ev.Topics, want) {
			t.Errorf("%s seq %d relayed on %v, want %v", k.ch, k.seq, ev.Topics, want)
		}
		if len(evs) > 1 {
			t.Logf("%s seq %d published %d times (duplicates are dropped by the gateways)", k.ch, k.seq, len(evs))
		}
	}
}

func waitBacklog(t *testing.T, s *sqlstore.Store, want int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, _, err := s.OutboxBacklog(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("outbox backlog %d, want %d", n, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
