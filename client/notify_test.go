package client

import (
	"testing"

	"parley"
)

// TestE2ENotifyPrefs sets and reads the email preference through the
// client against a real node; a bad interval is a 400.
func TestE2ENotifyPrefs(t *testing.T) {
	e := newNode(t, nil)
	alice := e.mustAccount("alice")
	ctx := t.Context()
	got, err := alice.Client.NotifyPrefs(ctx)
	if err != nil || got.NotifyPrefs != parley.DefaultNotifyPrefs() || len(got.Intervals) != 3 || got.EmailEnabled {
		t.Fatalf("default: %+v %v", got, err)
	}
	want := parley.NotifyPrefs{Mode: parley.NotifyOn, IntervalSeconds: 86400}
	if got, err = alice.Client.SetNotifyPrefs(ctx, want); err != nil || got.NotifyPrefs != want {
		t.Fatalf("set: %+v %v", got, err)
	}
	if got, err = alice.Client.NotifyPrefs(ctx); err != nil || got.NotifyPrefs != want {
		t.Fatalf("read back: %+v %v", got, err)
	}
	_, err = alice.Client.SetNotifyPrefs(ctx, parley.NotifyPrefs{Mode: parley.NotifyOn, IntervalSeconds: 5})
	if ErrorCode(err) != parley.EINVALID {
		t.Fatalf("bad interval: %v", err)
	}
}
