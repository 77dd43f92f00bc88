package shardmove

import (
	"context"
	"testing"

	"parley"
	"parley/storeguard"
)

// TestMoveFencesTheSource: after a move, a node still writing to the old
// shard (a router that never heard of the move, here a store on the source
// used directly) is refused: the post fails as unavailable (503 with
// Retry-After through the API), and no event of the workspace is added to
// the source. Another workspace on the source keeps posting. Moving the
// workspace back lifts the fence on the shard it returns to, and an
// aborted move lifts the source's.
func TestMoveFencesTheSource(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	src, tgt := r.stores["eu1"], r.stores["eu2"]
	tm := seedTeam(t, src, nil, 5)
	other := seedTeam(t, src, nil, 2)
	r.place(t, tm.ws.ID, "eu1")
	r.place(t, other.ws.ID, "eu1")
	// The stale write comes right after the switch, before the purge
	// (the window a node that never heard of the freeze writes in).
	ch := tm.channels[0]
	var staleErr error
	stale := false
	mv := r.mover(t, Config{Drain: -1, Progress: func(p Progress) {
		if p.Phase == "switch" {
			stale = true
			_, _, staleErr = src.PostMessage(ctx, tm.owner.ID, ch.ID, parley.NewMessage{Text: "stale node", ClientMsgID: "stale-1"})
		}
	}})
	sum, err := mv.Run(ctx, tm.ws.ID, "eu2")
	if err != nil {
		t.Fatal(err)
	}
	if err := <-sum.Purged; err != nil {
		t.Fatalf("purge after a refused stale write: %v", err)
	}
	if !stale || staleErr == nil {
		t.Fatalf("a post to the moved workspace on its old shard after the switch succeeded (tried: %v)", stale)
	}
	if !storeguard.Lost(staleErr) {
		t.Errorf("the fenced post's error is not one a client retries (503): %v", staleErr)
	}
	var n int
	if err := r.dbs["eu1"].QueryRow(`SELECT COUNT(*) FROM events WHERE workspace_id = $1`, tm.ws.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("the source holds %d events of the moved workspace", n)
	}
	// Edits, reactions and pins of the moved workspace on the source are
	// refused too: each appends an event. (Its messages were purged, so
	// the other workspace's posts stand in for "still works".)
	if _, _, err := src.PostMessage(ctx, other.owner.ID, other.channels[0].ID, parley.NewMessage{Text: "still here"}); err != nil {
		t.Fatalf("another workspace on the source: %v", err)
	}
	// The target takes the same post, with its client_msg_id.
	if _, _, err := tgt.PostMessage(ctx, tm.owner.ID, ch.ID, parley.NewMessage{Text: "stale node", ClientMsgID: "stale-1"}); err != nil {
		t.Fatalf("the post on the target: %v", err)
	}

	// Back to eu1: the fence there is lifted, eu2 is fenced.
	sum, err = mv.Run(ctx, tm.ws.ID, "eu1")
	if err != nil {
		t.Fatal(err)
	}
	if err := <-sum.Purged; err != nil {
		t.Fatal(err)
	}
	if _, _, err := src.PostMessage(ctx, tm.owner.ID, ch.ID, parley.NewMessage{Text: "home again"}); err != nil {
		t.Fatalf("a post after moving back: %v", err)
	}
	// (eu2 was purged, so its fence is seen in the table, not by a post.)
	var fenced int
	if err := r.dbs["eu2"].QueryRow(`SELECT COUNT(*) FROM `+fenceTable+` WHERE workspace = $1`, tm.ws.ID).Scan(&fenced); err != nil || fenced != 1 {
		t.Fatalf("eu2's fence rows for the workspace: %d, %v", fenced, err)
	}

	// An aborted move (checks fail: the target vanishes after the fence)
	// leaves the source writable: the fence is lifted with AbortMove. A
	// cancelled context stands in for the failure after the freeze.
	cctx, cancel := context.WithCancel(ctx)
	mv2 := r.mover(t, Config{Drain: -1, Progress: func(p Progress) {
		if p.Phase == "final" {
			cancel()
		}
	}})
	if _, err := mv2.Run(cctx, tm.ws.ID, "eu2"); err == nil {
		t.Fatal("a move cancelled after its final round completed")
	}
	if _, _, err := src.PostMessage(ctx, tm.owner.ID, ch.ID, parley.NewMessage{Text: "after the abort"}); err != nil {
		t.Fatalf("a post after an aborted move: %v", err)
	}
}
