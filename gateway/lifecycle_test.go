package gateway

import (
	"context"
	"sync"
	"testing"

	"parley"
)

// Account and workspace lifecycle as the gateways see it: the bus tells
// every node, and each closes its own sessions of the user or workspace
// with the documented close code, while events keep flowing to everyone
// else.

// poster posts into ch as u until stop is called, so that the lifecycle
// events meet a busy stream. It reports the first failure through t.Error
// (not Fatal: it runs on its own goroutine).
func poster(t *testing.T, e *env, u *tuser, ch *parley.Channel) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if _, _, err := e.store.PostMessage(ctx, u.ID, ch.ID, parley.NewMessage{Text: "busy"}); err != nil && ctx.Err() == nil {
				t.Errorf("post: %v", err)
				return
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// sessionsOn identifies n sockets of u on each of the nodes.
func sessionsOn(u *tuser, ws *parley.Workspace, n int, nodes ...*env) []*client {
	var out []*client
	for _, nd := range nodes {
		for i := 0; i < n; i++ {
			c, _ := nd.identify(u, ws)
			out = append(out, c)
		}
	}
	return out
}

func TestDeactivateClosesSessionsOnEveryNode(t *testing.T) {
	e := newEnv(t, nil)
	n2 := e.node("n2")
	owner, victim, bystander := e.user("owner"), e.user("victim"), e.user("bystander")
	ws := e.workspace(owner, victim, bystander)
	general := generalOf(t, e, owner, ws)
	victims := sessionsOn(victim, ws, 5, e, n2)
	second := e.login(victim.User) // a second token: revoked too
	victims = append(victims, sessionsOn(second, ws, 2, e, n2)...)
	// The bystanders (one session per node) have the victim in view: they
	// are told.
	var others []*client
	for _, nd := range []*env{e, n2} {
		c, r := nd.identify(bystander, ws)
		c.send(map[string]any{"op": "presence_sub", "user_ids": []string{victim.ID}})
		nd.inView(r.SessionID, victim.ID)
		others = append(others, c)
	}

	stop := poster(t, e, owner, general)
	defer stop()
	for _, c := range append(append([]*client{}, victims...), others...) {
		c.waitEvents(parley.EventMessageCreated, 3) // events flow to every session
	}
	if _, err := e.store.DeactivateUser(context.Background(), owner.ID, ws.ID, victim.ID); err != nil {
		t.Fatal(err)
	}
	for i, c := range victims {
		if code := c.closeCode(); code != parley.CloseAccountDeactivated {
			t.Fatalf("victim socket %d closed with %d, want %d", i, code, parley.CloseAccountDeactivated)
		}
	}
	// The others keep getting the stream, and see the victim deactivated.
	for _, c := range others {
		d := c.waitEvents(parley.EventUserDeactivated, 1)[0]
		var u struct {
			User parley.User `json:"user"`
		}
		if err := jsonUnmarshal(d.D, &u); err != nil || u.User.ID != victim.ID || !u.User.Deactivated || u.User.Name != victim.Name {
			t.Fatalf("user.deactivated %s: %v", d.D, err)
		}
		n := len(c.waitEvents(parley.EventMessageCreated, 1))
		c.waitEvents(parley.EventMessageCreated, n+3)
		if c.isClosed() {
			t.Fatal("a bystander's socket closed")
		}
	}
	stop()
	// Neither token identifies any more: the session is refused (4004).
	for _, u := range []*tuser{victim, second} {
		c := n2.connect()
		c.send(map[string]any{"op": "identify", "token": u.token, "workspace_id": ws.ID})
		if code := c.closeCode(); code != parley.CloseAuthFailed {
			t.Fatalf("identify after deactivation closed with %d, want 4004", code)
		}
	}
	waitUntil(t, "victim sessions gone", func() bool {
		return e.gw.registry.len() == 1 && n2.gw.registry.len() == 1
	})
}

func TestRemoveMemberLeavesChannelsThenCloses(t *testing.T) {
	e := newEnv(t, nil)
	n2 := e.node("n2")
	owner, victim, bystander := e.user("owner"), e.user("victim"), e.user("bystander")
	ws := e.workspace(owner, victim, bystander)
	general := generalOf(t, e, owner, ws)
	priv := e.channel(ws, owner, "priv", parley.KindPrivate)
	e.addMembers(owner, priv, victim, bystander)
	// The victim is also in another workspace: those sessions stay.
	elsewhere := e.workspace(bystander, victim)
	victims := sessionsOn(victim, ws, 3, e, n2)
	kept := sessionsOn(victim, elsewhere, 1, e, n2)
	others := sessionsOn(bystander, ws, 1, e, n2)

	stop := poster(t, e, owner, general)
	defer stop()
	for _, c := range victims {
		c.waitEvents(parley.EventMessageCreated, 2)
	}
	if err := e.store.RemoveWorkspaceMember(context.Background(), owner.ID, ws.ID, victim.ID); err != nil {
		t.Fatal(err)
	}
	for i, c := range victims {
		if code := c.closeCode(); code != parley.CloseWorkspaceGone {
			t.Fatalf("victim socket %d closed with %d, want %d", i, code, parley.CloseWorkspaceGone)
		}
	}
	// The bystanders see the victim leave both channels, and the stream
	// goes on.
	for _, c := range others {
		left := map[string]bool{}
		for _, f := range c.waitEvents(parley.EventMemberLeft, 2) {
			if d := f.data(t); d.UserID == victim.ID {
				left[d.ChannelID] = true
			}
		}
		if !left[general.ID] || !left[priv.ID] {
			t.Fatalf("bystander saw the victim leave %v", left)
		}
		n := len(c.waitEvents(parley.EventMessageCreated, 1))
		c.waitEvents(parley.EventMessageCreated, n+2)
	}
	stop()
	for _, c := range kept {
		if c.isClosed() {
			t.Fatal("the session of the other workspace closed")
		}
	}
	// Identifying into the workspace is refused.
	c := e.connect()
	c.send(map[string]any{"op": "identify", "token": victim.token, "workspace_id": ws.ID})
	if code := c.closeCode(); code != parley.CloseAuthFailed {
		t.Fatalf("identify after removal closed with %d, want 4004", code)
	}
}

func TestDeleteWorkspaceClosesItsSessions(t *testing.T) {
	e := newEnv(t, nil)
	n2 := e.node("n2")
	owner, member := e.user("owner"), e.user("member")
	ws := e.workspace(owner, member)
	other := e.workspace(member, owner)
	general := generalOf(t, e, owner, ws)
	doomed := append(sessionsOn(owner, ws, 2, e, n2), sessionsOn(member, ws, 2, e, n2)...)
	kept := append(sessionsOn(owner, other, 1, e, n2), sessionsOn(member, other, 1, e, n2)...)
	stop := poster(t, e, owner, general)
	defer stop()
	for _, c := range doomed {
		c.waitEvents(parley.EventMessageCreated, 2)
	}
	stop() // posting into a deleted workspace fails; stop before
	if err := e.store.DeleteWorkspace(context.Background(), owner.ID, ws.ID, ws.Slug); err != nil {
		t.Fatal(err)
	}
	for i, c := range doomed {
		if code := c.closeCode(); code != parley.CloseWorkspaceGone {
			t.Fatalf("socket %d closed with %d, want %d", i, code, parley.CloseWorkspaceGone)
		}
	}
	otherGeneral := generalOf(t, e, member, other)
	e.post(member, otherGeneral, "still here")
	for _, c := range kept {
		c.waitEvents(parley.EventMessageCreated, 1)
	}
}
