package presence

import (
	"context"
	"slices"
	"testing"
	"time"

	"parley/natsbus"
)

func activeOf(tr *Tracker, ids ...string) []string {
	got := tr.ActiveUsers(context.Background(), ids)
	slices.Sort(got)
	return got
}

// TestActiveUsersAlone: on a node alone, @here's active users are those
// with a session here that is online: not away (idle or by hand), not in
// the grace after their last session, not unknown.
func TestActiveUsersAlone(t *testing.T) {
	clk := newFakeClock()
	tr := newLocal(t, clk)
	tr.Connect("U1", "s1")
	tr.Connect("U2", "s2")
	tr.Connect("U3", "s3")
	tr.Connect("U4", "s4")
	clk.Add(9 * time.Minute)
	tr.Activity("U1", "s1")
	tr.Activity("U3", "s3")
	tr.Activity("U4", "s4")
	clk.Add(time.Minute) // U2 has been idle for 10 min
	tr.sweep()
	tr.SetAway("U3", true)
	tr.Disconnect("U4", "s4") // in grace: its presence still says online
	if s := tr.Status("U4"); s != Online {
		t.Fatalf("U4 within grace: %s", s)
	}
	if got, want := activeOf(tr, "U1", "U2", "U3", "U4", "U5"), []string{"U1"}; !slices.Equal(got, want) {
		t.Fatalf("active = %v, want %v", got, want)
	}
	if got := tr.ActiveUsers(context.Background(), nil); len(got) != 0 {
		t.Fatalf("active of nobody = %v", got)
	}
}

// TestActiveUsersCluster: with other nodes alive, a user watched here is
// active as the aggregate over every node says, and a user this node
// neither hosts nor watches counts as active (it cannot know).
func TestActiveUsersCluster(t *testing.T) {
	bus, err := natsbus.Start(natsbus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bus.Close() })
	nodes := mustNodes(t, bus, 2)
	n1, n2 := nodes[0], nodes[1]
	n1.Connect("U1", "s1")
	n1.Connect("U2", "s2")
	n1.SetAway("U2", true)
	var r recorder
	defer n2.Watch([]string{"U1", "U2", "U3"}, r.fn)()
	waitStatus(t, &r, "U1", Online)
	waitStatus(t, &r, "U2", Away)
	waitStatus(t, &r, "U3", Offline)
	if got, want := activeOf(n2, "U1", "U2", "U3", "U4"), []string{"U1", "U4"}; !slices.Equal(got, want) {
		t.Fatalf("n2: active = %v, want %v (U4 unknown here)", got, want)
	}
	// On n1, U2's only session is away by hand, which every node knows;
	// U3 is neither hosted nor watched there.
	if got, want := activeOf(n1, "U1", "U2", "U3"), []string{"U1", "U3"}; !slices.Equal(got, want) {
		t.Fatalf("n1: active = %v, want %v", got, want)
	}
}
