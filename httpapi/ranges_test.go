package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"parley"
)

// TestNumberRanges sends negative, huge and out-of-int64 numbers wherever a
// client number becomes a duration, a time, a seq or a page size: each is
// 400 naming the field, or clamped where the contract says so (limit), and
// never wraps around. Before the fix, expires_in_s = 2^40 overflowed into
// an invite that had expired in 1795.
func TestNumberRanges(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			e := newEnvOn(t, d)
			owner := mustAccount(t, e.store, "owner")
			ws := mustWorkspace(t, e.store, owner)
			ch := mustChannel(t, e.store, ws, owner, parley.KindPublic)
			root := mustPost(t, e.store, owner, ch, "root")
			mustPost(t, e.store, owner, ch, "two")

			bad := []struct{ method, path, body, field string }{
				{"POST", "/workspaces/" + ws.ID + "/invites", `{"expires_in_s":1099511627776}`, "expires_in_s"},
				{"POST", "/workspaces/" + ws.ID + "/invites", `{"expires_in_s":4611686018427387904}`, "expires_in_s"},
				{"POST", "/workspaces/" + ws.ID + "/invites", `{"expires_in_s":2592001}`, "expires_in_s"},
				{"POST", "/workspaces/" + ws.ID + "/invites", `{"expires_in_s":-1}`, "expires_in_s"},
				{"POST", "/workspaces/" + ws.ID + "/invites", `{"expires_in_s":9223372036854775808}`, "expires_in_s"},
				{"POST", "/workspaces/" + ws.ID + "/invites", `{"max_uses":-1}`, "max_uses"},
				{"PUT", "/me/status", `{"emoji":"smile","expires_at":"0001-01-01T00:00:00Z"}`, "expires_at"},
				{"GET", "/channels/" + ch.ID + "/messages?before_seq=-1", "", "before_seq"},
				{"GET", "/channels/" + ch.ID + "/messages?after_seq=-9223372036854775808", "", "after_seq"},
				{"GET", "/channels/" + ch.ID + "/messages?before_seq=9223372036854775808", "", "before_seq"},
				{"GET", "/channels/" + ch.ID + "/messages?limit=99999999999999999999", "", "limit"},
				{"GET", "/channels/" + ch.ID + "/events?after_seq=-1", "", "after_seq"},
				{"GET", "/messages/" + root.ID + "/replies?after_seq=-1", "", "after_seq"},
				{"GET", "/messages/" + root.ID + "/replies?cursor=-5", "", "cursor"},
				{"POST", "/channels/" + ch.ID + "/read", `{"seq":-1}`, "seq"},
				{"POST", "/channels/" + ch.ID + "/read", `{"seq":9223372036854775808}`, "seq"},
				{"POST", "/sync", `{"channels":{"` + ch.ID + `":-1}}`, ch.ID},
				{"POST", "/sync", `{"channels":{"` + ch.ID + `":1e30}}`, "channels"},
				{"POST", "/boot", `{"workspace_id":"` + ws.ID + `","limit":9223372036854775808}`, "limit"},
			}
			for _, c := range bad {
				var body any
				if c.body != "" {
					body = c.body
				}
				r := e.call(c.method, c.path, owner.Token, body)
				if r.Status != http.StatusBadRequest || r.errCode() != parley.EINVALID || !strings.Contains(string(r.Body), c.field) {
					t.Errorf("%s %s %s: status %d, body %s; want 400 naming %s", c.method, c.path, c.body, r.Status, r.Body, c.field)
				}
			}

			// In range at the edges: accepted, with the arithmetic right.
			var inv parley.Invite
			e.must(http.StatusCreated, "POST", "/workspaces/"+ws.ID+"/invites", owner.Token, `{"expires_in_s":2592000}`, &inv)
			if want := e.clock.Now().Add(30 * 24 * time.Hour); !inv.ExpiresAt.Equal(want) {
				t.Errorf("invite expires %v, want %v", inv.ExpiresAt, want)
			}
			e.must(http.StatusCreated, "POST", "/workspaces/"+ws.ID+"/invites", owner.Token, `{"expires_in_s":1}`, &inv)
			if want := e.clock.Now().Add(time.Second); !inv.ExpiresAt.Equal(want) {
				t.Errorf("invite expires %v, want %v", inv.ExpiresAt, want)
			}
			// limit is clamped, not refused (the contract: at most 200).
			var page parley.MessagePage
			e.must(http.StatusOK, "GET", "/channels/"+ch.ID+"/messages?limit=9223372036854775807", owner.Token, nil, &page)
			e.must(http.StatusOK, "GET", "/channels/"+ch.ID+"/messages?limit=-9223372036854775808", owner.Token, nil, &page)
			if len(page.Messages) != 2 {
				t.Errorf("negative limit: %d messages, want the default page", len(page.Messages))
			}
			e.must(http.StatusOK, "GET", "/channels/"+ch.ID+"/messages?before_seq=9223372036854775807", owner.Token, nil, &page)
			if len(page.Messages) != 2 {
				t.Errorf("before_seq=max: %d messages, want 2", len(page.Messages))
			}
			e.must(http.StatusOK, "GET", "/channels/"+ch.ID+"/messages?after_seq=9223372036854775807", owner.Token, nil, &page)
			if len(page.Messages) != 0 {
				t.Errorf("after_seq=max: %d messages, want 0", len(page.Messages))
			}
			// A read marker past the end stops at the channel's last seq.
			var rs parley.ReadState
			e.must(http.StatusOK, "POST", "/channels/"+ch.ID+"/read", owner.Token, `{"seq":9223372036854775807}`, &rs)
			if got, _ := e.store.GetChannel(t.Context(), owner.ID, ch.ID); rs.LastReadSeq != got.LastSeq {
				t.Errorf("read marker %d, want the last seq %d", rs.LastReadSeq, got.LastSeq)
			}
			var u parley.User
			e.must(http.StatusOK, "PUT", "/me/status", owner.Token, `{"emoji":"smile","expires_at":"9999-12-31T23:59:59Z"}`, &u)
			if u.Status == nil || u.Status.ExpiresAt == nil || u.Status.ExpiresAt.Year() != 9999 {
				t.Errorf("status %+v", u.Status)
			}
		})
	}
}
