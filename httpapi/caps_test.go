package httpapi

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"

	"parley"
	"parley/sqlstore"
)

// TestCapReached: a store cap reaches the client as 409 limit_reached.
func TestCapReached(t *testing.T) {
	clk := newClock()
	st, err := sqlstore.Open(context.Background(), sqlstore.Config{
		Path: filepath.Join(t.TempDir(), "parley.db"), Now: clk.Now, Logger: quietLogger(),
		Caps: parley.Caps{ReactionsPerMessage: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := newEnvWithStore(t, st, clk)
	owner := mustAccount(t, st, "owner")
	ws := mustWorkspace(t, st, owner)
	ch := mustChannel(t, st, ws, owner, parley.KindPublic)
	m := mustPost(t, st, owner, ch, "hi")
	e.must(http.StatusOK, "PUT", "/messages/"+m.ID+"/reactions/one", owner.Token, nil, nil)
	r := e.must(http.StatusConflict, "PUT", "/messages/"+m.ID+"/reactions/two", owner.Token, nil, nil)
	if r.errCode() != parley.ELIMIT {
		t.Fatalf("code %q, want %q: %s", r.errCode(), parley.ELIMIT, r.Body)
	}
}
