package storetest

import (
	"testing"

	"parley"
)

func init() {
	register("Settings/LiveConfigDefaults", testLiveConfigDefaults)
	register("Settings/LiveConfigRoundTrip", testLiveConfigRoundTrip)
}

// A store that never saved a configuration answers the defaults.
func testLiveConfigDefaults(t *testing.T, open Opener) {
	s := open(t, nil)
	got, err := s.LoadLiveConfig(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got != parley.DefaultLiveConfig() {
		t.Fatalf("fresh store: got %+v, want the defaults %+v", got, parley.DefaultLiveConfig())
	}
}

// Saving replaces the whole configuration, and the last save wins.
func testLiveConfigRoundTrip(t *testing.T, open Opener) {
	s := open(t, nil)
	for _, want := range []parley.LiveConfig{
		{CollapsedThreads: false, ChannelMentionMaxMembers: 0},
		{CollapsedThreads: true, ChannelMentionMaxMembers: 25},
	} {
		if err := s.SaveLiveConfig(ctx(t), want); err != nil {
			t.Fatal(err)
		}
		got, err := s.LoadLiveConfig(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("after save: got %+v, want %+v", got, want)
		}
	}
}
