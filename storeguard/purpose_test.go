package storeguard

import (
	"reflect"
	"testing"

	"parley"
)

// TestEveryMethodHasAPurpose: each method of parley.Store but Close is in
// the purpose table, and the table names no method the interface lacks.
func TestEveryMethodHasAPurpose(t *testing.T) {
	st := reflect.TypeFor[parley.Store]()
	seen := map[string]bool{}
	for i := range st.NumMethod() {
		name := st.Method(i).Name
		seen[name] = true
		if _, ok := purposeOf[name]; !ok && name != "Close" {
			t.Errorf("%s has no purpose", name)
		}
	}
	for name := range purposeOf {
		if !seen[name] {
			t.Errorf("purposeOf names %s, which parley.Store lacks", name)
		}
	}
	for name, want := range map[string]Purpose{"PostMessage": Write, "ListMessages": History, "Sync": History,
		"ListThreads": History, "Search": Search, "Boot": Boot, "SessionChannels": Boot, "ReadDirectory": Boot,
		"ChannelLog": Boot, "SessionByToken": Read, "GetChannel": Read} {
		if purposeOf[name] != want {
			t.Errorf("%s is %s, want %s", name, purposeOf[name], want)
		}
	}
}
