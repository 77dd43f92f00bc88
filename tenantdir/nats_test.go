package tenantdir

import (
	"context"
	"errors"
	"fmt"
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

// TestDuplicateInFlight: JetStream's "duplicate message id is in process"
// (another relay publishing the same change), wrapped as the relay wraps
// it, is recognised; other API errors and plain errors are not.
func TestDuplicateInFlight(t *testing.T) {
	dup := &jetstream.APIError{Code: 409, ErrorCode: 10158, Description: "duplicate message id is in process"}
	if !duplicateInFlight(fmt.Errorf("publish change 2 to X: %w", dup)) {
		t.Error("a duplicate in flight was not recognised")
	}
	for _, err := range []error{
		fmt.Errorf("publish: %w", &jetstream.APIError{Code: 503, ErrorCode: 10077, Description: "no suitable peers"}),
		errors.New("duplicate message id is in process"),
		fmt.Errorf("publish: %w", context.DeadlineExceeded),
	} {
		if duplicateInFlight(err) {
			t.Errorf("%v taken for a duplicate in flight", err)
		}
	}
}
