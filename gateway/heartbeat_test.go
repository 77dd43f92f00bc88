package gateway

import "testing"

// TestIsHeartbeat: only the canonical heartbeat takes the fast path; every
// other frame, heartbeats spelled differently included, goes to the decoder.
func TestIsHeartbeat(t *testing.T) {
	for in, want := range map[string]bool{
		`{"op":"heartbeat"}`:          true,
		` {"op": "heartbeat"}` + "\n": true,
		`{"op":"heartbeat_ack"}`:      false,
		`{"op":"heartbeat","x":1}`:    false,
		`{"op":"identify"}`:           false,
		``:                            false,
	} {
		if got := isHeartbeat([]byte(in)); got != want {
			t.Errorf("isHeartbeat(%q) = %v, want %v", in, got, want)
		}
	}
}
