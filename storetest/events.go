package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"parley"
)

// Contract tests of the durable event log: paging it, /sync, and the
// promise under concurrent writers — per channel, seqs 1..last_seq with no
// gaps and no duplicates, each event published exactly once.

func init() {
	register("Events/List", testListEvents)
	register("Events/ConcurrentPosts", testConcurrentPosts)
	register("Events/Sync", testSync)
	register("Events/SyncTooFar", testSyncTooFar)
}

// evAll pages through a channel's whole log after afterSeq as u, checking
// the cursor of every page.
func evAll(t *testing.T, s parley.Store, u *parley.User, chID string, afterSeq int64, limit int) []parley.Event {
	t.Helper()
	var all []parley.Event
	for {
		page, err := s.ListEvents(ctx(t), u.ID, chID, afterSeq, limit)
		NoErr(t, err)
		all = append(all, page.Events...)
		if len(page.Events) < limit {
			if page.NextCursor != "" {
				t.Fatalf("short page of %d has next_cursor %q", len(page.Events), page.NextCursor)
			}
			return all
		}
		afterSeq = page.Events[len(page.Events)-1].Seq
		if page.NextCursor != itoa(afterSeq) {
			t.Fatalf("full page's next_cursor = %q, want %d", page.NextCursor, afterSeq)
		}
	}
}

// evCheck asserts that evs are exactly the seqs from..to of channel ch, in
// order, with well-formed payloads: channel_id and seq equal to the log's,
// and for message events d.message.seq equal to the event's own seq on
// message.created.
func evCheck(t *testing.T, evs []parley.Event, ch *parley.Channel, from, to int64) {
	t.Helper()
	if int64(len(evs)) != to-from+1 {
		t.Fatalf("%d events, want seqs %d..%d", len(evs), from, to)
	}
	for i, ev := range evs {
		if ev.Seq != from+int64(i) {
			t.Fatalf("event %d has seq %d, want %d", i, ev.Seq, from+int64(i))
		}
		if ev.WorkspaceID != ch.WorkspaceID || ev.ChannelID != ch.ID || ev.Type == "" || ev.CreatedAt.IsZero() || ev.Topics != nil {
			t.Fatalf("event %+v", ev)
		}
		var d struct {
			ChannelID string          `json:"channel_id"`
			Seq       int64           `json:"seq"`
			Message   *parley.Message `json:"message"`
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatalf("decode %s payload %s: %v", ev.Type, ev.Data, err)
		}
		if d.ChannelID != ch.ID || d.Seq != ev.Seq {
			t.Fatalf("%s payload has channel_id %q seq %d, want %q %d", ev.Type, d.ChannelID, d.Seq, ch.ID, ev.Seq)
		}
		switch ev.Type {
		case parley.EventMessageCreated:
			if d.Message == nil || d.Message.Seq != ev.Seq || d.Message.ChannelID != ch.ID {
				t.Fatalf("message.created payload %s: message seq is not the event's", ev.Data)
			}
		case parley.EventMessageUpdated:
			if d.Message == nil || d.Message.Seq >= ev.Seq {
				t.Fatalf("message.updated payload %s", ev.Data)
			}
		}
	}
}

// postConcurrently has writers goroutines post n messages each into ch,
// taking turns among users; every tenth post of a writer also gets a
// reaction, so that other events interleave. It returns every message.
func postConcurrently(t *testing.T, s parley.Store, users []*parley.User, ch *parley.Channel, writers, n int) []*parley.Message {
	t.Helper()
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		all  []*parley.Message
		errs = make([]error, writers)
	)
	for w := range writers {
		u := users[w%len(users)]
		wg.Go(func() {
			for i := range n {
				m, created, err := s.PostMessage(c, u.ID, ch.ID, parley.NewMessage{
					Text: fmt.Sprintf("writer %d post %d", w, i), ClientMsgID: fmt.Sprintf("w%d-%d", w, i)})
				if err == nil && !created {
					err = fmt.Errorf("post %d of writer %d not created", i, w)
				}
				if err == nil && i%10 == 9 {
					_, err = s.AddReaction(c, u.ID, m.ID, "w"+itoa(int64(w)))
				}
				if err != nil {
					errs[w] = err
					cancel()
					return
				}
				mu.Lock()
				all = append(all, m)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", w, err)
		}
	}
	return all
}

func testListEvents(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	m := MustPost(t, e.s, e.alice, e.ch, "hello")
	e.reply(t, e.bob, m, "hi")
	_, err := e.s.AddReaction(ctx(t), e.bob.ID, m.ID, "wave")
	NoErr(t, err)
	_, err = e.s.Pin(ctx(t), e.bob.ID, m.ID)
	NoErr(t, err)
	_, err = e.s.EditMessage(ctx(t), e.alice.ID, m.ID, "hello!")
	NoErr(t, err)
	NoErr(t, e.s.DeleteMessage(ctx(t), e.alice.ID, MustPost(t, e.s, e.alice, e.ch, "oops").ID))
	last := e.lastSeq(t, e.ch)

	// A workspace member reads a public channel's log without joining; the
	// entries are the published events, byte for byte.
	for _, limit := range []int{1, 3, int(last), 0} {
		evs := evAll(t, e.s, e.carol, e.ch.ID, 0, parley.ClampLimit(limit))
		evCheck(t, evs, e.ch, 1, last)
		pub := e.rec.LogOf(e.ch.ID)
		if len(pub) != len(evs) {
			t.Fatalf("%d events in the log, %d seqs published", len(evs), len(pub))
		}
		for i, ev := range evs {
			if pub[i].Type != ev.Type || !bytes.Equal(pub[i].Data, ev.Data) || !pub[i].CreatedAt.Truncate(time.Microsecond).Equal(ev.CreatedAt) {
				t.Fatalf("log entry %d = %s %s, published %s %s", ev.Seq, ev.Type, ev.Data, pub[i].Type, pub[i].Data)
			}
		}
	}
	page, err := e.s.ListEvents(ctx(t), e.alice.ID, e.ch.ID, last-2, 0)
	NoErr(t, err)
	evCheck(t, page.Events, e.ch, last-1, last)
	if page.Events[1].Type != parley.EventMessageDeleted {
		t.Fatalf("last event is %s, want message.deleted", page.Events[1].Type)
	}
	for _, after := range []int64{last, last + 100} {
		page, err := e.s.ListEvents(ctx(t), e.alice.ID, e.ch.ID, after, 10)
		NoErr(t, err)
		if page.Events == nil || len(page.Events) != 0 || page.NextCursor != "" {
			t.Fatalf("events after %d = %+v", after, page)
		}
	}

	_, err = e.s.ListEvents(ctx(t), e.alice.ID, e.ch.ID, -1, 10)
	Code(t, err, parley.EINVALID)
	_, err = e.s.ListEvents(ctx(t), e.outsider.ID, e.ch.ID, 0, 10)
	Code(t, err, parley.ENOTFOUND)
	priv := e.channel(t, "private", parley.KindPrivate, e.bob)
	_, err = e.s.ListEvents(ctx(t), e.alice.ID, priv.ID, 0, 10)
	Code(t, err, parley.ENOTFOUND)
	_, err = e.s.ListEvents(ctx(t), e.alice.ID, "Cnope", 0, 10)
	Code(t, err, parley.ENOTFOUND)
}

func testConcurrentPosts(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	const writers, each = 8, 50
	posted := postConcurrently(t, e.s, []*parley.User{e.alice, e.bob}, e.ch, writers, each)
	if len(posted) != writers*each {
		t.Fatalf("%d posts, want %d", len(posted), writers*each)
	}
	postSeqs := make([]int64, len(posted))
	for i, m := range posted {
		postSeqs[i] = m.Seq
	}
	slices.Sort(postSeqs)
	if len(slices.Compact(slices.Clone(postSeqs))) != len(postSeqs) {
		t.Fatal("two messages share a seq")
	}

	// The log is 1..last_seq with no gaps and no duplicates, and its
	// message.created events are exactly the posts.
	last := e.lastSeq(t, e.ch)
	evs := evAll(t, e.s, e.alice, e.ch.ID, 0, parley.MaxLimit)
	evCheck(t, evs, e.ch, 1, last)
	var createdSeqs []int64
	reactions := 0
	for _, ev := range evs {
		switch ev.Type {
		case parley.EventMessageCreated:
			createdSeqs = append(createdSeqs, ev.Seq)
		case parley.EventReactionAdded:
			reactions++
		}
	}
	if !slices.Equal(createdSeqs, postSeqs) {
		t.Fatalf("message.created seqs differ from the posts' seqs")
	}
	if reactions != writers*each/10 {
		t.Fatalf("%d reaction.added events, want %d", reactions, writers*each/10)
	}

	// Every event was published exactly once; SQLite-like stores publish in
	// seq order.
	pub := e.rec.OfChannel(e.ch.ID)
	if int64(len(pub)) != last {
		t.Fatalf("%d events published, want %d", len(pub), last)
	}
	seen := make(map[int64]bool, len(pub))
	for _, ev := range pub {
		if ev.Seq < 1 || ev.Seq > last || seen[ev.Seq] {
			t.Fatalf("published seq %d is out of range or a duplicate", ev.Seq)
		}
		seen[ev.Seq] = true
	}
	if o, ok := e.s.(interface{ PublishesInSeqOrder() bool }); ok && o.PublishesInSeqOrder() {
		for i, ev := range pub {
			if ev.Seq != int64(i+1) {
				t.Fatalf("published event %d has seq %d: not in seq order", i, ev.Seq)
			}
		}
	}

	// And history holds all of them.
	var hist []int64
	for after := int64(1); ; {
		page, err := e.s.ListMessages(ctx(t), e.alice.ID, e.ch.ID, parley.HistoryQuery{AfterSeq: after, Limit: parley.MaxLimit})
		NoErr(t, err)
		hist = append(hist, msgSeqs(page.Messages)...)
		if page.NextCursor == "" {
			break
		}
		after = page.Messages[len(page.Messages)-1].Seq
	}
	if !slices.Equal(hist, postSeqs) {
		t.Fatalf("history has %d messages, want the %d posts", len(hist), len(postSeqs))
	}
}

func testSync(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	for range 3 {
		MustPost(t, e.s, e.alice, e.ch, "public")
	}
	mine := e.channel(t, "mine", parley.KindPrivate, e.alice)
	for range 3 {
		MustPost(t, e.s, e.alice, mine, "private")
	}
	theirs := e.channel(t, "theirs", parley.KindPrivate, e.bob)
	readable := e.channel(t, "readable", parley.KindPublic)
	chLast, mineLast, readLast := e.lastSeq(t, e.ch), e.lastSeq(t, mine), e.lastSeq(t, readable)

	res, err := e.s.Sync(ctx(t), e.alice.ID, map[string]int64{
		e.ch.ID:     chLast,       // nothing missed
		mine.ID:     mineLast - 2, // two missed
		theirs.ID:   0,            // not visible
		"Cnope":     0,            // unknown
		readable.ID: 0,            // public, not joined: visible
	})
	NoErr(t, err)
	if len(res) != 5 {
		t.Fatalf("sync answered %d channels, want 5", len(res))
	}
	if r := res[e.ch.ID]; r.Events == nil || len(r.Events) != 0 || r.TooFar || r.Error != "" {
		t.Fatalf("nothing missed = %+v", r)
	}
	if raw, _ := json.Marshal(res[e.ch.ID]); string(raw) != `{"events":[]}` {
		t.Fatalf("nothing missed encodes as %s", raw)
	}
	if r := res[mine.ID]; r.TooFar || r.Error != "" {
		t.Fatalf("two missed = %+v", r)
	}
	evCheck(t, res[mine.ID].Events, mine, mineLast-1, mineLast)
	evCheck(t, res[readable.ID].Events, readable, 1, readLast)
	for _, id := range []string{theirs.ID, "Cnope"} {
		if r := res[id]; r.Error != parley.ENOTFOUND || r.Events != nil || r.TooFar {
			t.Fatalf("sync of invisible channel %s = %+v", id, r)
		}
		if raw, _ := json.Marshal(res[id]); string(raw) != `{"error":"not_found"}` {
			t.Fatalf("invisible channel encodes as %s", raw)
		}
	}
	// A seq from the future misses nothing.
	res, err = e.s.Sync(ctx(t), e.alice.ID, map[string]int64{e.ch.ID: chLast + 10})
	NoErr(t, err)
	if r := res[e.ch.ID]; r.Events == nil || len(r.Events) != 0 {
		t.Fatalf("sync from the future = %+v", r)
	}

	// Many channels in one call.
	want := map[string]int64{}
	var many []*parley.Channel
	for i := range 70 {
		ch := MustChannel(t, e.s, e.ws, e.alice, "many-"+itoa(int64(i)), parley.KindPublic)
		if i%3 == 0 {
			MustPost(t, e.s, e.alice, ch, "hello")
		}
		many = append(many, ch)
		want[ch.ID] = 0
	}
	res, err = e.s.Sync(ctx(t), e.alice.ID, want)
	NoErr(t, err)
	for _, ch := range many {
		evCheck(t, res[ch.ID].Events, ch, 1, e.lastSeq(t, ch))
	}

	// Rules.
	res, err = e.s.Sync(ctx(t), e.alice.ID, map[string]int64{})
	NoErr(t, err)
	if len(res) != 0 {
		t.Fatalf("empty sync = %+v", res)
	}
	_, err = e.s.Sync(ctx(t), e.alice.ID, map[string]int64{e.ch.ID: -1})
	Code(t, err, parley.EINVALID)
	tooMany := map[string]int64{}
	for i := range parley.MaxSyncChannels + 1 {
		tooMany["C"+itoa(int64(i))] = 0
	}
	_, err = e.s.Sync(ctx(t), e.alice.ID, tooMany)
	Code(t, err, parley.EINVALID)
}

func testSyncTooFar(t *testing.T, open Opener) {
	e := newMsgEnv(t, open)
	postConcurrently(t, e.s, []*parley.User{e.alice, e.bob}, e.ch, 8, (parley.MaxSyncEvents+80)/8)
	last := e.lastSeq(t, e.ch)
	if last <= parley.MaxSyncEvents+1 {
		t.Fatalf("only %d events", last)
	}
	syncFrom := func(seq int64) parley.SyncResult {
		t.Helper()
		res, err := e.s.Sync(ctx(t), e.carol.ID, map[string]int64{e.ch.ID: seq})
		NoErr(t, err)
		return res[e.ch.ID]
	}
	for _, seq := range []int64{0, last - parley.MaxSyncEvents - 1} {
		if r := syncFrom(seq); !r.TooFar || r.LastSeq != last || r.Events != nil || r.Error != "" {
			t.Fatalf("sync from %d of %d = %+v", seq, last, r)
		}
	}
	if raw, _ := json.Marshal(syncFrom(0)); string(raw) != fmt.Sprintf(`{"too_far":true,"last_seq":%d}`, last) {
		t.Fatalf("too far encodes as %s", raw)
	}
	// Exactly MaxSyncEvents missed is still answered with the events.
	r := syncFrom(last - parley.MaxSyncEvents)
	if r.TooFar {
		t.Fatalf("sync of exactly %d missed events is too_far", parley.MaxSyncEvents)
	}
	evCheck(t, r.Events, e.ch, last-parley.MaxSyncEvents+1, last)
}
