package httpapi

import (
	"net/http"
	"testing"

	"parley"
)

// team is a workspace with an owner and two members, each with a token.
type team struct {
	e          *env
	ws         *parley.Workspace
	owner, bob *account
	cat        *account
}

func newTeam(t *testing.T) *team {
	t.Helper()
	e := newEnv(t)
	tm := &team{e: e, owner: mustAccount(t, e.store, "owner"), bob: mustAccount(t, e.store, "bob"), cat: mustAccount(t, e.store, "cat")}
	tm.ws = mustWorkspace(t, e.store, tm.owner)
	mustJoin(t, e.store, tm.ws, tm.owner, tm.bob, tm.cat)
	return tm
}

func TestChannelLifecycle(t *testing.T) {
	tm := newTeam(t)
	e := tm.e
	name := "plans-" + uniq()
	var ch parley.Channel
	e.must(http.StatusCreated, "POST", "/workspaces/"+tm.ws.ID+"/channels", tm.bob.Token,
		map[string]string{"name": name, "kind": "public", "topic": "the plans"}, &ch)
	if ch.Name != name || ch.Kind != parley.KindPublic || ch.Topic != "the plans" || !ch.IsMember || ch.MemberCount != 1 {
		t.Fatalf("created %+v", ch)
	}
	e.must(http.StatusConflict, "POST", "/workspaces/"+tm.ws.ID+"/channels", tm.cat.Token,
		map[string]string{"name": name, "kind": "private"}, nil)
	e.must(http.StatusBadRequest, "POST", "/workspaces/"+tm.ws.ID+"/channels", tm.cat.Token,
		map[string]string{"name": "Bad Name", "kind": "public"}, nil)
	e.must(http.StatusBadRequest, "POST", "/workspaces/"+tm.ws.ID+"/channels", tm.cat.Token,
		map[string]any{"name": 7, "kind": "public"}, nil)

	base := "/channels/" + ch.ID
	// cat reads without joining, but may not post until joined.
	var got parley.Channel
	e.must(http.StatusOK, "GET", base, tm.cat.Token, nil, &got)
	if got.IsMember {
		t.Errorf("cat is a member before joining")
	}
	e.must(http.StatusForbidden, "POST", base+"/messages", tm.cat.Token, map[string]string{"text": "hi"}, nil)
	e.must(http.StatusOK, "POST", base+"/join", tm.cat.Token, nil, &got)
	if !got.IsMember || got.MemberCount != 2 || got.LastReadSeq != got.LastSeq {
		t.Errorf("after join %+v", got)
	}
	e.must(http.StatusCreated, "POST", base+"/messages", tm.cat.Token, map[string]string{"text": "hi"}, nil)

	// Only the creator (or an admin) renames; members set the topic.
	e.must(http.StatusForbidden, "PATCH", base, tm.cat.Token, map[string]string{"name": "mine"}, nil)
	e.must(http.StatusOK, "PATCH", base, tm.cat.Token, map[string]string{"topic": "new topic"}, &got)
	if got.Topic != "new topic" {
		t.Errorf("topic %q", got.Topic)
	}
	e.must(http.StatusOK, "PATCH", base, tm.bob.Token, map[string]string{"name": name + "-v2"}, &got)
	if got.Name != name+"-v2" {
		t.Errorf("name %q", got.Name)
	}

	// Members: list, add, remove.
	var page parley.MemberPage
	e.must(http.StatusOK, "GET", base+"/members", tm.owner.Token, nil, &page)
	if len(page.Members) != 2 {
		t.Errorf("members %+v", page.Members)
	}
	e.must(http.StatusBadRequest, "GET", base+"/members?limit=x", tm.owner.Token, nil, nil)
	e.must(http.StatusOK, "POST", base+"/members", tm.bob.Token, map[string][]string{"user_ids": {tm.owner.ID}}, &got)
	if got.MemberCount != 3 {
		t.Errorf("member count after add: %d", got.MemberCount)
	}
	e.must(http.StatusForbidden, "DELETE", base+"/members/"+tm.owner.ID, tm.cat.Token, nil, nil)
	e.must(http.StatusNoContent, "DELETE", base+"/members/"+tm.cat.ID, tm.bob.Token, nil, nil)
	e.must(http.StatusNoContent, "POST", base+"/leave", tm.owner.Token, nil, nil)
	e.must(http.StatusOK, "GET", base, tm.bob.Token, nil, &got)
	if got.MemberCount != 1 {
		t.Errorf("member count after remove and leave: %d", got.MemberCount)
	}

	// Read marker.
	var rs parley.ReadState
	e.must(http.StatusOK, "POST", base+"/read", tm.bob.Token, map[string]int64{"seq": got.LastSeq}, &rs)
	if rs.ChannelID != ch.ID || rs.LastReadSeq != got.LastSeq {
		t.Errorf("read state %+v", rs)
	}
	e.must(http.StatusBadRequest, "POST", base+"/read", tm.bob.Token, map[string]string{"seq": "latest"}, nil)
	e.must(http.StatusBadRequest, "POST", base+"/read", tm.bob.Token, map[string]int{}, nil)

	// Archive: no more writes.
	e.must(http.StatusForbidden, "POST", base+"/archive", tm.cat.Token, nil, nil)
	e.must(http.StatusOK, "POST", base+"/archive", tm.bob.Token, nil, &got)
	if got.ArchivedAt == nil {
		t.Errorf("archived channel without archived_at")
	}
	e.must(http.StatusConflict, "POST", base+"/messages", tm.bob.Token, map[string]string{"text": "late"}, nil)
}

func TestPrivateChannelsAndWorkspacesAreInvisible(t *testing.T) {
	tm := newTeam(t)
	e := tm.e
	var secret parley.Channel
	e.must(http.StatusCreated, "POST", "/workspaces/"+tm.ws.ID+"/channels", tm.bob.Token,
		map[string]string{"name": "secret-" + uniq(), "kind": "private"}, &secret)
	for _, path := range []string{"", "/members", "/messages", "/events", "/pins"} {
		e.must(http.StatusNotFound, "GET", "/channels/"+secret.ID+path, tm.cat.Token, nil, nil)
	}
	e.must(http.StatusNotFound, "POST", "/channels/"+secret.ID+"/join", tm.cat.Token, nil, nil)

	// Another workspace's owner sees nothing of this one.
	stranger := mustAccount(t, e.store, "stranger")
	mustWorkspace(t, e.store, stranger)
	general := mustChannel(t, e.store, tm.ws, tm.owner, parley.KindPublic)
	e.must(http.StatusNotFound, "GET", "/channels/"+general.ID, stranger.Token, nil, nil)
	e.must(http.StatusNotFound, "POST", "/workspaces/"+tm.ws.ID+"/channels", stranger.Token,
		map[string]string{"name": "intruder", "kind": "public"}, nil)
	e.must(http.StatusNotFound, "POST", "/channels/"+general.ID+"/join", stranger.Token, nil, nil)
}

func TestDirectMessages(t *testing.T) {
	tm := newTeam(t)
	e := tm.e
	body := map[string]any{"workspace_id": tm.ws.ID, "user_ids": []string{tm.cat.ID}}
	var dm parley.Channel
	e.must(http.StatusCreated, "POST", "/dms", tm.bob.Token, body, &dm)
	if dm.Kind != parley.KindDM || len(dm.DMUserIDs) != 2 {
		t.Fatalf("dm %+v", dm)
	}
	var again parley.Channel
	e.must(http.StatusOK, "POST", "/dms", tm.bob.Token, body, &again)
	if again.ID != dm.ID {
		t.Errorf("second open made %s, want %s", again.ID, dm.ID)
	}
	// From the other side, with the caller listed too: the same DM.
	e.must(http.StatusOK, "POST", "/dms", tm.cat.Token,
		map[string]any{"workspace_id": tm.ws.ID, "user_ids": []string{tm.bob.ID, tm.cat.ID}}, &again)
	if again.ID != dm.ID {
		t.Errorf("cat opened %s, want %s", again.ID, dm.ID)
	}
	var group parley.Channel
	e.must(http.StatusCreated, "POST", "/dms", tm.bob.Token,
		map[string]any{"workspace_id": tm.ws.ID, "user_ids": []string{tm.cat.ID, tm.owner.ID}}, &group)
	if group.Kind != parley.KindGroupDM {
		t.Errorf("kind %s, want group_dm", group.Kind)
	}
	e.must(http.StatusNotFound, "GET", "/channels/"+dm.ID, tm.owner.Token, nil, nil)

	many := []string{}
	for range parley.MaxGroupDMOthers + 1 {
		u := mustAccount(t, e.store, "crowd")
		mustJoin(t, e.store, tm.ws, tm.owner, u)
		many = append(many, u.ID)
	}
	e.must(http.StatusBadRequest, "POST", "/dms", tm.bob.Token, map[string]any{"workspace_id": tm.ws.ID, "user_ids": many}, nil)
	e.must(http.StatusBadRequest, "POST", "/dms", tm.bob.Token, map[string]any{"user_ids": []string{tm.cat.ID}}, nil)
	e.must(http.StatusBadRequest, "POST", "/dms", tm.bob.Token, map[string]any{"workspace_id": tm.ws.ID, "user_ids": tm.cat.ID}, nil)
}
