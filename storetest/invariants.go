package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"parley"
)

// CheckWorkspace asserts the invariants every workspace must keep, live or
// imported, as actor sees them through the Store's read API:
//
//   - each of actor's channels has a gap-free log: seqs 1..last_seq, once
//     each, every payload naming its channel and seq, every
//     message.created carrying its message at the event's seq;
//   - every live message of the history is the message.created event of
//     its seq;
//   - every thread root's reply_count is the number of its live replies
//     and last_reply_at the time of the latest; replies come after their
//     root; the threads list agrees with the roots;
//   - the unread count boot gives is the number of live top-level
//     messages after the read marker, and the mention count is not more.
//
// It returns the messages it read, by channel id, roots and replies in seq
// order, for callers that compare them further.
func CheckWorkspace(tb testing.TB, s parley.Store, actor, workspaceID string) map[string][]parley.Message {
	tb.Helper()
	boot, err := s.Boot(ctx(tb), actor, parley.BootQuery{WorkspaceID: workspaceID})
	NoErr(tb, err)
	out := map[string][]parley.Message{}
	roots := map[string]*parley.Message{}
	for _, bc := range boot.Channels {
		// The log.
		created := map[string]int64{} // message id → seq of its message.created
		var after int64
		for {
			page, err := s.ListEvents(ctx(tb), actor, bc.ID, after, parley.MaxLimit)
			NoErr(tb, err)
			for _, ev := range page.Events {
				if ev.Seq != after+1 {
					tb.Fatalf("#%s: event seq %d after %d: the log has a gap or a repeat", bc.Name, ev.Seq, after)
				}
				after = ev.Seq
				var d struct {
					ChannelID string          `json:"channel_id"`
					Seq       int64           `json:"seq"`
					Message   *parley.Message `json:"message"`
				}
				if err := json.Unmarshal(ev.Data, &d); err != nil {
					tb.Fatalf("#%s: %s payload at seq %d: %v", bc.Name, ev.Type, ev.Seq, err)
				}
				if d.ChannelID != bc.ID || d.Seq != ev.Seq {
					tb.Fatalf("#%s: %s payload says channel %s seq %d, the log %s %d", bc.Name, ev.Type, d.ChannelID, d.Seq, bc.ID, ev.Seq)
				}
				if ev.Type == parley.EventMessageCreated {
					if d.Message == nil || d.Message.Seq != ev.Seq {
						tb.Fatalf("#%s: message.created at seq %d carries another seq", bc.Name, ev.Seq)
					}
					created[d.Message.ID] = ev.Seq
				}
			}
			if len(page.Events) < parley.MaxLimit {
				break
			}
		}
		if after != bc.LastSeq {
			tb.Fatalf("#%s: the log ends at seq %d, the channel's last_seq is %d", bc.Name, after, bc.LastSeq)
		}

		// The history and its threads.
		var msgs []parley.Message // paged back from the latest
		var before int64
		for {
			page, err := s.ListMessages(ctx(tb), actor, bc.ID, parley.HistoryQuery{BeforeSeq: before, Limit: parley.MaxLimit})
			NoErr(tb, err)
			msgs = append(page.Messages, msgs...)
			if len(page.Messages) == 0 || page.NextCursor == "" {
				break
			}
			before = page.Messages[0].Seq
		}
		unread := int64(0)
		var all []parley.Message
		for i := range msgs {
			m := &msgs[i]
			if created[m.ID] != m.Seq {
				tb.Fatalf("#%s: message %s has seq %d, its message.created is at %d", bc.Name, m.ID, m.Seq, created[m.ID])
			}
			if m.ThreadRootID != "" { // collapsed threads off: replies inline
				all = append(all, *m)
				continue
			}
			if m.Seq > bc.LastReadSeq {
				unread++
			}
			all = append(all, *m)
			roots[m.ID] = m
			var replies []parley.Message
			var rs int64
			for {
				page, err := s.ListReplies(ctx(tb), actor, m.ID, rs, parley.MaxLimit)
				NoErr(tb, err)
				replies = append(replies, page.Messages...)
				if page.NextCursor == "" {
					break
				}
				rs = page.Messages[len(page.Messages)-1].Seq
			}
			if len(replies) != m.ReplyCount {
				tb.Fatalf("#%s: root %s says %d replies, %d are listed", bc.Name, m.ID, m.ReplyCount, len(replies))
			}
			var last time.Time
			for _, r := range replies {
				if r.ThreadRootID != m.ID || r.Seq <= m.Seq || created[r.ID] != r.Seq {
					tb.Fatalf("#%s: reply %s (root %s, seq %d) of root %s (seq %d)", bc.Name, r.ID, r.ThreadRootID, r.Seq, m.ID, m.Seq)
				}
				if r.CreatedAt.After(last) {
					last = r.CreatedAt
				}
			}
			if m.ReplyCount > 0 && (m.LastReplyAt == nil || !m.LastReplyAt.Equal(last)) {
				tb.Fatalf("#%s: root %s last_reply_at %v, latest reply at %v", bc.Name, m.ID, m.LastReplyAt, last)
			}
			all = append(all, replies...)
		}
		if bc.UnreadCount != unread || bc.MentionCount > bc.UnreadCount {
			tb.Fatalf("#%s: boot says %d unread (%d mentions), the history after seq %d holds %d",
				bc.Name, bc.UnreadCount, bc.MentionCount, bc.LastReadSeq, unread)
		}
		out[bc.ID] = all
	}
	// The threads list agrees with the roots.
	var cursor string
	for {
		page, err := s.ListThreads(ctx(tb), actor, workspaceID, parley.ThreadQuery{Cursor: cursor, Limit: parley.MaxLimit})
		if parley.ErrorCode(err) == parley.ECONFLICT { // collapsed threads off
			break
		}
		NoErr(tb, err)
		for _, th := range page.Threads {
			r := roots[th.RootID]
			if r == nil {
				continue // a root deleted, or in a channel actor left
			}
			if th.ReplyCount != r.ReplyCount || th.UnreadReplies > th.ReplyCount || !th.LastReplyAt.Equal(*r.LastReplyAt) {
				tb.Fatalf("thread %s: %d replies (%d unread), last %v; its root says %d, last %v",
					th.RootID, th.ReplyCount, th.UnreadReplies, th.LastReplyAt, r.ReplyCount, r.LastReplyAt)
			}
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	return out
}

// CheckLiveWorkspace runs CheckWorkspace over a workspace written through
// the ordinary API, so that the checker itself is known to hold for live
// traffic: posts, replies, reactions, pins, edits, deletes and reads.
func init() {
	register("Invariants/LiveWorkspace", func(t *testing.T, open Opener) {
		s := open(t, nil)
		owner := MustUser(t, s, "inv-owner")
		other := MustUser(t, s, "inv-other")
		ws := MustWorkspace(t, s, owner)
		MustJoinWorkspace(t, s, ws, owner, other)
		ch := MustChannel(t, s, ws, owner, "inv", parley.KindPublic)
		_, err := s.JoinChannel(ctx(t), other.ID, ch.ID)
		NoErr(t, err)
		var roots []*parley.Message
		for i := range 12 {
			u := owner
			if i%3 == 0 {
				u = other
			}
			m := MustPost(t, s, u, ch, "message "+itoa(int64(i)))
			roots = append(roots, m)
		}
		for i, r := range roots[:4] {
			for j := range i + 1 {
				_, _, err := s.PostMessage(ctx(t), other.ID, ch.ID, parley.NewMessage{Text: "reply " + itoa(int64(j)), ThreadRootID: r.ID})
				NoErr(t, err)
			}
		}
		_, err = s.AddReaction(ctx(t), owner.ID, roots[1].ID, "tada")
		NoErr(t, err)
		_, err = s.Pin(ctx(t), owner.ID, roots[2].ID)
		NoErr(t, err)
		_, err = s.EditMessage(ctx(t), owner.ID, roots[4].ID, "edited")
		NoErr(t, err)
		NoErr(t, s.DeleteMessage(ctx(t), other.ID, roots[6].ID))
		CheckWorkspace(t, s, owner.ID, ws.ID)
		CheckWorkspace(t, s, other.ID, ws.ID)
	})
}
