package tenantdir

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestStreamReplicas: NATS.Replicas reaches the streams (1 by default), is
// refused out of 1..5, and a single server refuses streams it cannot
// replicate rather than making them with fewer copies.
func TestStreamReplicas(t *testing.T) {
	n, _ := mustBus(t)
	for _, bad := range []int{-1, 6, 100} {
		m := n
		m.Replicas = bad
		if err := EnsureStreams(context.Background(), m); err == nil {
			t.Errorf("%d replicas accepted", bad)
		}
	}
	if err := EnsureStreams(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(n.Conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, aud := range Audiences {
		s, err := js.Stream(context.Background(), n.StreamName(aud))
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Replicas; got != 1 {
			t.Errorf("stream %s: %d replicas, want 1", n.StreamName(aud), got)
		}
	}
	three := n
	three.Replicas, three.Stream = 3, n.Stream+"_R3"
	if err := EnsureStreams(context.Background(), three); err == nil {
		t.Fatal("a single server made 3-replica streams")
	}
}
