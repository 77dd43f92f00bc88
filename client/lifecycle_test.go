package client

import (
	"errors"
	"testing"
	"time"

	"parley"
)

// closedWith waits for conn to give up and returns its close code.
func closedWith(t *testing.T, conn *Conn) int {
	t.Helper()
	select {
	case <-conn.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("socket still open")
	}
	var ce *CloseError
	if !errors.As(conn.Err(), &ce) {
		t.Fatalf("err %v, want a close", conn.Err())
	}
	return ce.Code
}

// TestE2ELifecycle drives the lifecycle calls through the client against a
// real node: each closes the affected sockets with its code, and the
// client gives up rather than reconnecting.
func TestE2ELifecycle(t *testing.T) {
	e := newNode(t, nil)
	alice, bob, carol := e.mustAccount("alice"), e.mustAccount("bob"), e.mustAccount("carol")
	ws := e.mustWorkspace(alice, bob, carol)
	ctx := t.Context()

	conn := dial(t, bob, ws, ConnectOptions{Handler: func(Event) {}})
	u, err := alice.Client.DeactivateUser(ctx, ws.ID, bob.ID)
	if err != nil || !u.Deactivated {
		t.Fatalf("deactivate: %+v %v", u, err)
	}
	if code := closedWith(t, conn); code != parley.CloseAccountDeactivated {
		t.Fatalf("deactivation closed with %d", code)
	}
	page, err := alice.Client.ListUsers(ctx, ws.ID, parley.UserQuery{IncludeDeactivated: true})
	if err != nil || len(page.Users) != 3 {
		t.Fatalf("directory with deactivated: %+v %v", page, err)
	}
	if _, err := alice.Client.ReactivateUser(ctx, ws.ID, bob.ID); err != nil {
		t.Fatal(err)
	}

	conn = dial(t, carol, ws, ConnectOptions{Handler: func(Event) {}})
	if err := alice.Client.RemoveWorkspaceMember(ctx, ws.ID, carol.ID); err != nil {
		t.Fatal(err)
	}
	if code := closedWith(t, conn); code != parley.CloseWorkspaceGone {
		t.Fatalf("removal closed with %d", code)
	}

	other := e.mustAccount("dave")
	e.mustJoinWorkspace(ws, alice, other)
	if err := alice.Client.TransferOwnership(ctx, ws.ID, other.ID); err != nil {
		t.Fatal(err)
	}
	conn = dial(t, alice, ws, ConnectOptions{Handler: func(Event) {}})
	var ae *APIError
	if err := other.Client.DeleteWorkspace(ctx, ws.ID, "wrong"); !errors.As(err, &ae) || ae.Status != 400 {
		t.Fatalf("delete with a wrong confirm: %v", err)
	}
	if err := other.Client.DeleteWorkspace(ctx, ws.ID, ws.Slug); err != nil {
		t.Fatal(err)
	}
	if code := closedWith(t, conn); code != parley.CloseWorkspaceGone {
		t.Fatalf("deletion closed with %d", code)
	}
}
