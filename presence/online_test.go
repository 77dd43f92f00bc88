package presence

import (
	"context"
	"slices"
	"testing"
	"time"

	"parley/natsbus"
)

// testOnlineUsersAcrossNodes: OnlineUsers on n1 sees users whose only
// sessions are on n2 or n3 and whom nothing on n1 watches (Status there says
// offline); away users, by hand or idle, and users with no session
// anywhere are not online.
func testOnlineUsersAcrossNodes(t *testing.T, bus *natsbus.Bus) {
	nodes := mustNodes(t, bus, 3)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	n1.Connect("Ulocal", "s0")
	n2.Connect("Uremote", "s1")
	n3.Connect("Uthird", "s2")
	n2.Connect("Uaway", "s3")
	n2.SetAway("Uaway", true)
	waitFor(t, "n1 to learn the manual away", func() bool {
		n1.mu.Lock()
		defer n1.mu.Unlock()
		_, ok := n1.manual["Uaway"]
		return ok
	})
	if s := n1.Status("Uremote"); s != Offline {
		t.Fatalf("n1 Status of an unwatched user on n2: %s (the test needs the local view to say offline)", s)
	}
	ask := []string{"Ulocal", "Uremote", "Uthird", "Uaway", "Unobody"}
	start := time.Now()
	got := n1.OnlineUsers(context.Background(), ask)
	slices.Sort(got)
	if want := []string{"Ulocal", "Uremote", "Uthird"}; !slices.Equal(got, want) {
		t.Fatalf("OnlineUsers = %v, want %v", got, want)
	}
	// Every live node answered: no waiting out the query timeout.
	if d := time.Since(start); d >= 2*time.Second {
		t.Errorf("OnlineUsers took %v: it waited for the timeout instead of the answers", d)
	}

	// Gone from n2 (after the grace): not online any more.
	n2.Disconnect("Uremote", "s1")
	waitFor(t, "Uremote to be offline everywhere", func() bool {
		return !slices.Contains(n1.OnlineUsers(context.Background(), []string{"Uremote"}), "Uremote")
	})
	// A node that stops answering: its users are unknown, not online, and
	// the call returns by the query timeout or the context's end.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	n3.mu.Lock() // n3 cannot answer while its lock is held
	got = n1.OnlineUsers(ctx, []string{"Ulocal", "Uthird"})
	n3.mu.Unlock()
	if !slices.Equal(got, []string{"Ulocal"}) {
		t.Fatalf("OnlineUsers with n3 silent = %v, want [Ulocal]", got)
	}
}
