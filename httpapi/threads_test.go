package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"parley"
	"parley/internal/testpg"
	"parley/sqlstore"
	"parley/storetest"
)

// newLiveTeam is newTeam on a store of dialect d whose live configuration
// the test changes at run time, with a private room that all three are in.
func newLiveTeam(t *testing.T, d sqlstore.Dialect) (*team, *parley.Channel, *storetest.LiveSwitch) {
	t.Helper()
	live := storetest.NewLiveSwitch(parley.DefaultLiveConfig())
	clk := newClock()
	cfg := sqlstore.Config{Now: clk.Now, Logger: quietLogger(), LiveConfig: live}
	if d == sqlstore.Postgres {
		cfg.PostgresURL = testpg.New(t)
	} else {
		cfg.Path = filepath.Join(t.TempDir(), "parley.db")
	}
	st, err := sqlstore.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open %s store: %v", d, err)
	}
	t.Cleanup(func() { st.Close() })
	e := newEnvWithStore(t, st, clk)
	tm := &team{e: e, owner: mustAccount(t, st, "owner"), bob: mustAccount(t, st, "bob"), cat: mustAccount(t, st, "cat")}
	tm.ws = mustWorkspace(t, st, tm.owner)
	mustJoin(t, st, tm.ws, tm.owner, tm.bob, tm.cat)
	var ch parley.Channel
	e.must(http.StatusCreated, "POST", "/workspaces/"+tm.ws.ID+"/channels", tm.owner.Token,
		map[string]string{"name": "room-" + uniq(), "kind": "private"}, &ch)
	e.must(http.StatusOK, "POST", "/channels/"+ch.ID+"/members", tm.owner.Token,
		map[string][]string{"user_ids": {tm.bob.ID, tm.cat.ID}}, &ch)
	return tm, &ch, live
}

// TestThreadsEndToEnd drives collapsed threads through HTTP on both
// databases, turning the live flag off and on again within the test.
func TestThreadsEndToEnd(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			tm, ch, live := newLiveTeam(t, d)
			e := tm.e
			msgs := "/channels/" + ch.ID + "/messages"
			threadsPath := "/workspaces/" + tm.ws.ID + "/threads"
			post := func(u *account, text, root string) parley.Message {
				var m parley.Message
				e.must(http.StatusCreated, "POST", msgs, u.Token, map[string]string{"text": text, "thread_root_id": root}, &m)
				return m
			}
			unreadThreads := func(u *account) []parley.Thread {
				var page parley.ThreadPage
				e.must(http.StatusOK, "GET", threadsPath+"?unread=true", u.Token, nil, &page)
				return page.Threads
			}
			history := func() []parley.Message {
				var page parley.MessagePage
				e.must(http.StatusOK, "GET", msgs, tm.bob.Token, nil, &page)
				return page.Messages
			}
			channelUnread := func(u *account) int64 {
				var c parley.Channel
				e.must(http.StatusOK, "GET", "/channels/"+ch.ID, u.Token, nil, &c)
				return c.UnreadCount
			}

			// On (the default): a reply counts in bob's thread, not his channel.
			root := post(tm.bob, "root", "")
			reply := post(tm.cat, "a reply", root.ID)
			r := e.must(http.StatusOK, "GET", threadsPath+"?unread=true", tm.bob.Token, nil, nil)
			var raw struct {
				Threads []map[string]json.RawMessage `json:"threads"`
			}
			r.decode(t, &raw)
			if len(raw.Threads) != 1 {
				t.Fatalf("threads = %s", r.Body)
			}
			for _, k := range []string{"root_id", "channel_id", "reply_count", "last_reply_at", "unread_replies", "unread_mentions", "root"} {
				if _, ok := raw.Threads[0][k]; !ok {
					t.Errorf("thread entry lacks %q: %s", k, r.Body)
				}
			}
			th := unreadThreads(tm.bob)[0]
			if th.RootID != root.ID || th.UnreadReplies != 1 || th.Root == nil || th.Root.Text != "root" || th.ReplyCount != 1 {
				t.Fatalf("bob's thread = %+v", th)
			}
			if h := history(); len(h) != 1 || h[0].ID != root.ID {
				t.Fatalf("history with collapsed threads on = %+v", h)
			}
			if n := channelUnread(tm.bob); n != 0 {
				t.Fatalf("bob's channel unread = %d, want 0 (the reply is in the thread)", n)
			}
			var boot parley.Boot
			e.must(http.StatusOK, "POST", "/boot", tm.bob.Token, map[string]string{"workspace_id": tm.ws.ID}, &boot)
			if boot.Threads == nil || boot.Threads.UnreadThreads != 1 {
				t.Fatalf("boot threads = %+v", boot.Threads)
			}
			// Reading the channel reads its threads.
			e.must(http.StatusOK, "POST", "/channels/"+ch.ID+"/read", tm.bob.Token, map[string]int64{"seq": reply.Seq}, nil)
			if got := unreadThreads(tm.bob); len(got) != 0 {
				t.Fatalf("unread threads after reading the channel: %+v", got)
			}
			// A mention in a reply; reading the thread clears it.
			post(tm.cat, "@"+tm.bob.Handle+" see this", root.ID)
			if got := unreadThreads(tm.bob); len(got) != 1 || got[0].UnreadMentions != 1 {
				t.Fatalf("after a mention: %+v", got)
			}
			var read parley.Thread
			e.must(http.StatusOK, "POST", "/threads/"+root.ID+"/read", tm.bob.Token, nil, &read)
			if read.UnreadReplies != 0 || read.UnreadMentions != 0 || !read.Following {
				t.Fatalf("thread read = %+v", read)
			}
			var f parley.Thread
			e.must(http.StatusOK, "PUT", "/threads/"+root.ID+"/follow", tm.owner.Token, nil, &f)
			if !f.Following || f.Root == nil || f.Root.ID != root.ID || f.Participants == nil {
				t.Fatalf("follow = %+v", f)
			}
			e.must(http.StatusOK, "DELETE", "/threads/"+root.ID+"/follow", tm.owner.Token, nil, &f)
			if f.Following {
				t.Fatalf("unfollow = %+v", f)
			}
			e.must(http.StatusBadRequest, "PUT", "/threads/"+reply.ID+"/follow", tm.owner.Token, nil, nil)
			e.must(http.StatusNotFound, "PUT", "/threads/Mnosuch/follow", tm.owner.Token, nil, nil)
			e.must(http.StatusBadRequest, "GET", threadsPath+"?unread=maybe", tm.bob.Token, nil, nil)
			e.must(http.StatusBadRequest, "GET", threadsPath+"?cursor=%21%21", tm.bob.Token, nil, nil)

			// Off, at run time: replies show inline and count in the channel;
			// the thread operations say why they cannot run.
			live.Collapsed(false)
			inline := post(tm.cat, "inline @"+tm.bob.Handle, root.ID)
			if h := history(); len(h) != 4 || h[len(h)-1].ID != inline.ID {
				t.Fatalf("history with collapsed threads off has %d messages, want the root and 3 replies", len(h))
			}
			var c parley.Channel
			e.must(http.StatusOK, "GET", "/channels/"+ch.ID, tm.bob.Token, nil, &c)
			if c.UnreadCount != 1 || c.MentionCount != 1 {
				t.Fatalf("bob's channel with collapsed threads off: unread %d, mentions %d; want 1, 1", c.UnreadCount, c.MentionCount)
			}
			if got := unreadThreads(tm.bob); len(got) != 0 {
				t.Fatalf("a reply made with collapsed threads off reached the threads list: %+v", got)
			}
			r = e.must(http.StatusConflict, "PUT", "/threads/"+root.ID+"/follow", tm.cat.Token, nil, nil)
			if !strings.Contains(string(r.Body), "collapsed") {
				t.Errorf("409 body does not say why: %s", r.Body)
			}
			e.must(http.StatusConflict, "POST", "/threads/"+root.ID+"/read", tm.bob.Token, nil, nil)
			e.must(http.StatusOK, "POST", "/channels/"+ch.ID+"/read", tm.bob.Token, map[string]int64{"seq": inline.Seq}, nil)

			// On again: back to threads.
			live.Collapsed(true)
			post(tm.cat, "threaded again", root.ID)
			if got := unreadThreads(tm.bob); len(got) != 1 || got[0].UnreadReplies != 1 {
				t.Fatalf("after turning collapsed threads back on: %+v", got)
			}
			if n := channelUnread(tm.bob); n != 0 {
				t.Fatalf("bob's channel unread = %d, want 0", n)
			}
			if h := history(); len(h) != 1 {
				t.Fatalf("history with collapsed threads on again has %d messages, want the root", len(h))
			}
		})
	}
}

// TestChannelMentionCap: @channel, @here and @everyone above the live
// member cap need an admin, through HTTP.
func TestChannelMentionCap(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			tm, ch, live := newLiveTeam(t, d) // three members
			e := tm.e
			msgs := "/channels/" + ch.ID + "/messages"
			live.Set(parley.LiveConfig{CollapsedThreads: true, ChannelMentionMaxMembers: 2})
			r := e.must(http.StatusForbidden, "POST", msgs, tm.bob.Token, map[string]string{"text": "@here lunch?"}, nil)
			if code := r.errCode(); code != parley.EFORBIDDEN || !strings.Contains(string(r.Body), "more than 2 members") {
				t.Errorf("refusal = %s", r.Body)
			}
			e.must(http.StatusCreated, "POST", msgs, tm.owner.Token, map[string]string{"text": "@channel from the admin"}, nil)
			e.must(http.StatusCreated, "POST", msgs, tm.bob.Token, map[string]string{"text": "just @" + tm.cat.Handle}, nil)
			live.Set(parley.LiveConfig{CollapsedThreads: true, ChannelMentionMaxMembers: 3})
			e.must(http.StatusCreated, "POST", msgs, tm.bob.Token, map[string]string{"text": "@everyone at the cap"}, nil)
			live.Set(parley.LiveConfig{CollapsedThreads: true})
			e.must(http.StatusCreated, "POST", msgs, tm.bob.Token, map[string]string{"text": "@channel with no cap"}, nil)
		})
	}
}

// TestThreadPathBytes: a path id holding bytes no id can hold (invalid
// UTF-8, NUL) is an unknown object, 404, on both databases (PostgreSQL's
// text refused it with a 500).
func TestThreadPathBytes(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			tm, _, _ := newLiveTeam(t, d)
			for _, c := range []struct{ method, path string }{
				{"PUT", "/threads/msg_%FF/follow"},
				{"DELETE", "/threads/msg_%00/follow"},
				{"POST", "/threads/%FF/read"},
				{"GET", "/workspaces/%FF/threads"},
				{"GET", "/workspaces/%00/search?q=x"},
				{"GET", "/messages/%FF/replies"},
			} {
				if r := tm.e.call(c.method, c.path, tm.bob.Token, nil); r.Status != http.StatusNotFound {
					t.Errorf("%s %s = %d %s, want 404", c.method, c.path, r.Status, r.Body)
				}
			}
		})
	}
}
