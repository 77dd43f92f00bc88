package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"parley"
)

// newRoom is a team with a private channel that owner, bob and cat are in.
func newRoom(t *testing.T) (*team, *parley.Channel) {
	t.Helper()
	tm := newTeam(t)
	var ch parley.Channel
	tm.e.must(http.StatusCreated, "POST", "/workspaces/"+tm.ws.ID+"/channels", tm.owner.Token,
		map[string]string{"name": "room-" + uniq(), "kind": "private"}, &ch)
	tm.e.must(http.StatusOK, "POST", "/channels/"+ch.ID+"/members", tm.owner.Token,
		map[string][]string{"user_ids": {tm.bob.ID, tm.cat.ID}}, &ch)
	return tm, &ch
}

func TestPostMessage(t *testing.T) {
	tm, ch := newRoom(t)
	e := tm.e
	path := "/channels/" + ch.ID + "/messages"
	var m parley.Message
	r := e.must(http.StatusCreated, "POST", path, tm.bob.Token, map[string]string{"text": "hello @cat", "client_msg_id": "c-1"}, &m)
	if m.ID == "" || m.ChannelID != ch.ID || m.UserID != tm.bob.ID || m.Text != "hello @cat" || m.Seq == 0 {
		t.Fatalf("posted %+v", m)
	}
	if !strings.Contains(string(r.Body), `"reactions":[]`) {
		t.Errorf("reactions not [] in %s", r.Body)
	}
	// The same client_msg_id again returns the first message with 200.
	var again parley.Message
	e.must(http.StatusOK, "POST", path, tm.bob.Token, map[string]string{"text": "different", "client_msg_id": "c-1"}, &again)
	if again.ID != m.ID || again.Text != m.Text {
		t.Errorf("retry returned %+v, want the first message", again)
	}
	// The id is scoped to the sender.
	e.must(http.StatusCreated, "POST", path, tm.cat.Token, map[string]string{"text": "mine", "client_msg_id": "c-1"}, nil)

	e.must(http.StatusRequestEntityTooLarge, "POST", path, tm.bob.Token, map[string]string{"text": strings.Repeat("é", parley.MaxMessageLen+1)}, nil)
	e.must(http.StatusCreated, "POST", path, tm.bob.Token, map[string]string{"text": strings.Repeat("é", parley.MaxMessageLen)}, nil)
	e.must(http.StatusBadRequest, "POST", path, tm.bob.Token, map[string]string{"text": "   "}, nil)
	e.must(http.StatusBadRequest, "POST", path, tm.bob.Token, map[string]any{"text": 42}, nil)
	e.must(http.StatusBadRequest, "POST", path, tm.bob.Token, `{"text": "unterminated`, nil)
	big := `{"text": "x", "pad": "` + strings.Repeat("p", MaxBodyBytes) + `"}`
	e.must(http.StatusRequestEntityTooLarge, "POST", path, tm.bob.Token, big, nil)
	e.must(http.StatusNotFound, "POST", "/channels/Cnosuch/messages", tm.bob.Token, map[string]string{"text": "hi"}, nil)
}

func TestHistoryAndThreads(t *testing.T) {
	tm, ch := newRoom(t)
	e := tm.e
	path := "/channels/" + ch.ID + "/messages"
	var posted []parley.Message
	for i := range 5 {
		var m parley.Message
		e.must(http.StatusCreated, "POST", path, tm.bob.Token, map[string]string{"text": fmt.Sprint("m", i)}, &m)
		posted = append(posted, m)
	}
	var page parley.MessagePage
	e.must(http.StatusOK, "GET", path+"?limit=2", tm.cat.Token, nil, &page)
	if len(page.Messages) != 2 || page.Messages[0].ID != posted[3].ID || page.Messages[1].ID != posted[4].ID {
		t.Errorf("latest 2: %+v", page.Messages)
	}
	e.must(http.StatusOK, "GET", path+fmt.Sprintf("?before_seq=%d&limit=2", posted[3].Seq), tm.cat.Token, nil, &page)
	if len(page.Messages) != 2 || page.Messages[0].ID != posted[1].ID || page.Messages[1].ID != posted[2].ID {
		t.Errorf("before: %+v", page.Messages)
	}
	e.must(http.StatusOK, "GET", path+fmt.Sprintf("?after_seq=%d", posted[3].Seq), tm.cat.Token, nil, &page)
	if len(page.Messages) != 1 || page.Messages[0].ID != posted[4].ID {
		t.Errorf("after: %+v", page.Messages)
	}
	for _, q := range []string{"?before_seq=abc", "?after_seq=1x", "?limit=many", "?after_seq=-1"} {
		e.must(http.StatusBadRequest, "GET", path+q, tm.cat.Token, nil, nil)
	}

	// A thread.
	root := posted[0]
	var reply parley.Message
	e.must(http.StatusCreated, "POST", path, tm.cat.Token, map[string]string{"text": "re", "thread_root_id": root.ID}, &reply)
	if reply.ThreadRootID != root.ID {
		t.Errorf("reply %+v", reply)
	}
	e.must(http.StatusOK, "GET", "/messages/"+root.ID+"/replies", tm.owner.Token, nil, &page)
	if len(page.Messages) != 1 || page.Messages[0].ID != reply.ID {
		t.Errorf("replies %+v", page.Messages)
	}
	var gotRoot parley.Message
	e.must(http.StatusOK, "GET", "/messages/"+root.ID, tm.owner.Token, nil, &gotRoot)
	if gotRoot.ReplyCount != 1 {
		t.Errorf("root reply_count %d", gotRoot.ReplyCount)
	}
	e.must(http.StatusBadRequest, "GET", "/messages/"+root.ID+"/replies?after_seq=x", tm.owner.Token, nil, nil)
	e.must(http.StatusNotFound, "GET", "/messages/Mnosuch/replies", tm.owner.Token, nil, nil)
}

func TestEditDeleteReactPin(t *testing.T) {
	tm, ch := newRoom(t)
	e := tm.e
	var m parley.Message
	e.must(http.StatusCreated, "POST", "/channels/"+ch.ID+"/messages", tm.bob.Token, map[string]string{"text": "first"}, &m)
	base := "/messages/" + m.ID

	e.must(http.StatusForbidden, "PATCH", base, tm.cat.Token, map[string]string{"text": "hijack"}, nil)
	e.must(http.StatusBadRequest, "PATCH", base, tm.bob.Token, map[string]string{}, nil)
	e.must(http.StatusRequestEntityTooLarge, "PATCH", base, tm.bob.Token, map[string]string{"text": strings.Repeat("x", parley.MaxMessageLen+1)}, nil)
	var edited parley.Message
	e.must(http.StatusOK, "PATCH", base, tm.bob.Token, map[string]string{"text": "second"}, &edited)
	if edited.Text != "second" || edited.EditedAt == nil {
		t.Errorf("edited %+v", edited)
	}

	// Reactions: the emoji is a URL-escaped shortcode.
	plusOne := "/reactions/" + url.PathEscape("+1")
	var reacted parley.Message
	e.must(http.StatusOK, "PUT", base+plusOne, tm.cat.Token, nil, &reacted)
	e.must(http.StatusOK, "PUT", base+"/reactions/%2B1", tm.owner.Token, nil, &reacted)
	if len(reacted.Reactions) != 1 || reacted.Reactions[0].Emoji != "+1" || reacted.Reactions[0].Count != 2 || !reacted.Reactions[0].Me {
		t.Errorf("reactions %+v", reacted.Reactions)
	}
	e.must(http.StatusOK, "DELETE", base+plusOne, tm.cat.Token, nil, &reacted)
	if len(reacted.Reactions) != 1 || reacted.Reactions[0].Count != 1 || reacted.Reactions[0].Me {
		t.Errorf("after removal %+v", reacted.Reactions)
	}
	e.must(http.StatusBadRequest, "PUT", base+"/reactions/"+url.PathEscape("no spaces"), tm.cat.Token, nil, nil)

	// Pins.
	var pinned parley.Message
	e.must(http.StatusOK, "PUT", base+"/pin", tm.cat.Token, nil, &pinned)
	if !pinned.Pinned {
		t.Errorf("not pinned after PUT")
	}
	var pins parley.MessagePage
	e.must(http.StatusOK, "GET", "/channels/"+ch.ID+"/pins", tm.owner.Token, nil, &pins)
	if len(pins.Messages) != 1 || pins.Messages[0].ID != m.ID {
		t.Errorf("pins %+v", pins.Messages)
	}
	e.must(http.StatusOK, "DELETE", base+"/pin", tm.cat.Token, nil, &pinned)
	if pinned.Pinned {
		t.Errorf("pinned after DELETE")
	}
	r := e.must(http.StatusOK, "GET", "/channels/"+ch.ID+"/pins", tm.owner.Token, nil, nil)
	if !strings.Contains(string(r.Body), `"messages":[]`) {
		t.Errorf("empty pins %s", r.Body)
	}

	// Delete: the author or an admin; then it is gone.
	e.must(http.StatusForbidden, "DELETE", base, tm.cat.Token, nil, nil)
	e.must(http.StatusNoContent, "DELETE", base, tm.bob.Token, nil, nil)
	e.must(http.StatusNotFound, "GET", base, tm.bob.Token, nil, nil)
	var other parley.Message
	e.must(http.StatusCreated, "POST", "/channels/"+ch.ID+"/messages", tm.cat.Token, map[string]string{"text": "mine"}, &other)
	e.must(http.StatusNoContent, "DELETE", "/messages/"+other.ID, tm.owner.Token, nil, nil)
}

func TestEventsAndSync(t *testing.T) {
	tm, ch := newRoom(t)
	e := tm.e
	start := ch.LastSeq
	var m parley.Message
	e.must(http.StatusCreated, "POST", "/channels/"+ch.ID+"/messages", tm.bob.Token, map[string]string{"text": "one"}, &m)
	e.must(http.StatusOK, "PUT", "/messages/"+m.ID+"/reactions/tada", tm.cat.Token, nil, nil)

	var raw struct {
		Events     []map[string]json.RawMessage `json:"events"`
		NextCursor string                       `json:"next_cursor"`
	}
	e.must(http.StatusOK, "GET", fmt.Sprintf("/channels/%s/events?after_seq=%d", ch.ID, start), tm.cat.Token, nil, &raw)
	if len(raw.Events) < 2 {
		t.Fatalf("events %v", raw.Events)
	}
	for _, ev := range raw.Events {
		for _, k := range []string{"channel_id", "seq", "t", "d", "created_at"} {
			if _, ok := ev[k]; !ok {
				t.Errorf("event lacks %s: %v", k, ev)
			}
		}
		if _, ok := ev["topics"]; ok {
			t.Errorf("event shows its bus topics: %v", ev)
		}
	}
	var events struct{ Events []logEntry }
	e.must(http.StatusOK, "GET", fmt.Sprintf("/channels/%s/events?after_seq=%d", ch.ID, start), tm.cat.Token, nil, &events)
	if events.Events[0].Type != parley.EventMessageCreated || events.Events[0].Seq != m.Seq ||
		events.Events[1].Type != parley.EventReactionAdded || events.Events[1].Seq != m.Seq+1 {
		t.Errorf("events %+v", events.Events)
	}
	var d parley.MessageEventData
	if err := json.Unmarshal(events.Events[0].Data, &d); err != nil || d.Message == nil || d.Message.ID != m.ID || d.Seq != m.Seq || d.ChannelID != ch.ID {
		t.Errorf("message.created d = %s (%v)", events.Events[0].Data, err)
	}
	// Paging with limit.
	var first struct {
		Events     []logEntry
		NextCursor string `json:"next_cursor"`
	}
	e.must(http.StatusOK, "GET", fmt.Sprintf("/channels/%s/events?after_seq=0&limit=1", ch.ID), tm.cat.Token, nil, &first)
	if len(first.Events) != 1 || first.Events[0].Seq != 1 || first.NextCursor == "" {
		t.Errorf("first page %+v", first)
	}
	// Generic cursor paging walks the whole log, gap-free.
	var all []logEntry
	for cursor, pages := "", 0; ; pages++ {
		if pages > 20 {
			t.Fatal("event paging does not end")
		}
		var page struct {
			Events     []logEntry
			NextCursor string `json:"next_cursor"`
		}
		e.must(http.StatusOK, "GET", "/channels/"+ch.ID+"/events?limit=2&cursor="+cursor, tm.cat.Token, nil, &page)
		all = append(all, page.Events...)
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	for i, ev := range all {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, ev.Seq)
		}
	}
	e.must(http.StatusBadRequest, "GET", "/channels/"+ch.ID+"/events?after_seq=z", tm.cat.Token, nil, nil)
	e.must(http.StatusBadRequest, "GET", "/channels/"+ch.ID+"/events?cursor=z", tm.cat.Token, nil, nil)

	// Sync: missed events, nothing missed, and an invisible channel.
	var secret parley.Channel
	e.must(http.StatusCreated, "POST", "/workspaces/"+tm.ws.ID+"/channels", tm.owner.Token,
		map[string]string{"name": "secret-" + uniq(), "kind": "private"}, &secret)
	var latest parley.Channel
	e.must(http.StatusOK, "GET", "/channels/"+ch.ID, tm.cat.Token, nil, &latest)
	var sync struct {
		Channels map[string]json.RawMessage
	}
	e.must(http.StatusOK, "POST", "/sync", tm.cat.Token, map[string]any{"channels": map[string]int64{
		ch.ID: start, secret.ID: 0, "Cnosuch": 3,
	}}, &sync)
	var got struct {
		Events []logEntry
	}
	if err := json.Unmarshal(sync.Channels[ch.ID], &got); err != nil || len(got.Events) != int(latest.LastSeq-start) || got.Events[0].Seq != start+1 {
		t.Errorf("sync of %s: %s", ch.ID, sync.Channels[ch.ID])
	}
	for _, id := range []string{secret.ID, "Cnosuch"} {
		if string(sync.Channels[id]) != `{"error":"not_found"}` {
			t.Errorf("sync of invisible %s: %s", id, sync.Channels[id])
		}
	}
	e.must(http.StatusOK, "POST", "/sync", tm.cat.Token, map[string]any{"channels": map[string]int64{ch.ID: latest.LastSeq}}, &sync)
	if string(sync.Channels[ch.ID]) != `{"events":[]}` {
		t.Errorf("nothing missed: %s", sync.Channels[ch.ID])
	}
	e.must(http.StatusBadRequest, "POST", "/sync", tm.cat.Token, map[string]any{"channels": map[string]string{ch.ID: "x"}}, nil)
	e.must(http.StatusBadRequest, "POST", "/sync", tm.cat.Token, map[string]any{"channels": map[string]int64{ch.ID: -1}}, nil)
}

func TestSyncTooFar(t *testing.T) {
	tm, ch := newRoom(t)
	for i := range parley.MaxSyncEvents + 1 {
		mustPost(t, tm.e.store, tm.bob, ch, fmt.Sprint("flood ", i))
	}
	var latest parley.Channel
	tm.e.must(http.StatusOK, "GET", "/channels/"+ch.ID, tm.cat.Token, nil, &latest)
	var sync struct{ Channels map[string]json.RawMessage }
	tm.e.must(http.StatusOK, "POST", "/sync", tm.cat.Token, map[string]any{"channels": map[string]int64{ch.ID: 0}}, &sync)
	want := fmt.Sprintf(`{"too_far":true,"last_seq":%d}`, latest.LastSeq)
	if string(sync.Channels[ch.ID]) != want {
		t.Errorf("sync: %s, want %s", sync.Channels[ch.ID], want)
	}
}
