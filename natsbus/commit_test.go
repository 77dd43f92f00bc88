package natsbus_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"parley"
	"parley/internal/testpg"
	"parley/natsbus"
	"parley/sqlstore"
	"parley/storetest"
)

// The store publishes a transaction's events only after it commits; these
// tests put the real bus behind the real store and check that a subscriber
// to a channel's topic sees every committed event of that channel exactly
// once while several writers post concurrently.

func TestPublishAfterCommitSQLite(t *testing.T) {
	testPublishAfterCommit(t, sqlstore.Config{Path: filepath.Join(t.TempDir(), "parley.db")}, true)
}

func TestPublishAfterCommitPostgres(t *testing.T) {
	testPublishAfterCommit(t, sqlstore.Config{PostgresURL: testpg.New(t)}, false)
}

type seqRecorder struct {
	mu     sync.Mutex
	events []parley.Event // guarded by mu
}

func (r *seqRecorder) add(ev parley.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

func (r *seqRecorder) snapshot() []parley.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func testPublishAfterCommit(t *testing.T, cfg sqlstore.Config, ordered bool) {
	const (
		writers    = 4
		perWriter  = 50
		totalPosts = writers * perWriter
	)
	ctx := context.Background()
	bus, err := natsbus.Start(natsbus.Config{})
	if err != nil {
		t.Fatalf("start bus: %v", err)
	}
	t.Cleanup(func() { bus.Close() })
	cfg.Publisher = bus
	store, err := sqlstore.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { store.Close() })

	owner := storetest.MustUser(t, store, "owner")
	ws := storetest.MustWorkspace(t, store, owner)
	ch := storetest.MustChannel(t, store, ws, owner, "busy", parley.KindPublic)
	users := []*parley.User{owner}
	for i := 1; i < writers; i++ {
		u := storetest.MustUser(t, store, fmt.Sprintf("writer%d", i))
		storetest.MustJoinWorkspace(t, store, ws, owner, u)
		if _, err := store.JoinChannel(ctx, u.ID, ch.ID); err != nil {
			t.Fatalf("join: %v", err)
		}
		users = append(users, u)
	}

	// Everything before this point is already committed and published; the
	// subscription starts at the channel's current last seq.
	var got seqRecorder
	unsub, err := bus.Subscribe(parley.TopicChannel(ch.ID), got.add)
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	defer unsub()
	if err := bus.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	cur, err := store.GetChannel(ctx, owner.ID, ch.ID)
	if err != nil {
		t.Fatalf("get channel: %v", err)
	}
	base := cur.LastSeq

	var wg sync.WaitGroup
	errs := make(chan error, totalPosts)
	for w, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				_, _, err := store.PostMessage(ctx, u.ID, ch.ID, parley.NewMessage{
					Text:        fmt.Sprintf("writer %d message %d", w, i),
					ClientMsgID: fmt.Sprintf("w%d-%d", w, i),
				})
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("post: %v", err)
	}

	// The committed events after base, from the store's own log.
	var committed []parley.Event
	after := base
	for {
		page, err := store.ListEvents(ctx, owner.ID, ch.ID, after, parley.MaxLimit)
		if err != nil {
			t.Fatalf("list events: %v", err)
		}
		if len(page.Events) == 0 {
			break
		}
		committed = append(committed, page.Events...)
		after = page.Events[len(page.Events)-1].Seq
	}
	if len(committed) != totalPosts {
		t.Fatalf("log holds %d events after seq %d, want %d", len(committed), base, totalPosts)
	}

	deadline := time.Now().Add(20 * time.Second)
	for len(got.snapshot()) < len(committed) {
		if time.Now().After(deadline) {
			t.Fatalf("subscriber got %d of %d committed events", len(got.snapshot()), len(committed))
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Anything still in flight (a duplicate) arrives before a round trip
	// through the server completes.
	if err := bus.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	received := got.snapshot()

	bySeq := map[int64]parley.Event{}
	for _, ev := range received {
		if ev.ChannelID != ch.ID {
			t.Fatalf("event of channel %s on the topic of %s", ev.ChannelID, ch.ID)
		}
		if _, dup := bySeq[ev.Seq]; dup {
			t.Fatalf("seq %d delivered twice", ev.Seq)
		}
		bySeq[ev.Seq] = ev
	}
	for _, want := range committed {
		ev, ok := bySeq[want.Seq]
		if !ok {
			t.Fatalf("committed seq %d never delivered", want.Seq)
		}
		if ev.Type != want.Type || string(ev.Data) != string(want.Data) {
			t.Fatalf("seq %d delivered as %s %s, committed as %s %s", want.Seq, ev.Type, ev.Data, want.Type, want.Data)
		}
	}
	if len(received) != len(committed) {
		t.Fatalf("received %d events, committed %d", len(received), len(committed))
	}
	if ordered {
		for i := 1; i < len(received); i++ {
			if received[i].Seq != received[i-1].Seq+1 {
				t.Fatalf("delivery %d has seq %d after %d: not in gap-free seq order", i, received[i].Seq, received[i-1].Seq)
			}
		}
	}
}
