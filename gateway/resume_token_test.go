package gateway

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"parley"
)

// tokenCountingStore is the real store, counting its SessionByToken reads.
type tokenCountingStore struct {
	Store
	reads atomic.Int64
}

func (s *tokenCountingStore) SessionByToken(ctx context.Context, tokenHash string) (*parley.Session, error) {
	s.reads.Add(1)
	return s.Store.SessionByToken(ctx, tokenHash)
}

func countTokenReads(c *Config) *tokenCountingStore {
	cs := &tokenCountingStore{Store: c.Store}
	c.Store = cs
	return cs
}

// TestResumeChecksTokenWithoutStore: a resume to the node holding the
// session, and one handed over to another node, check the token against
// the session without reading the store; a wrong token still asks the store
// and is refused (4004).
func TestResumeChecksTokenWithoutStore(t *testing.T) {
	var n1Store, n2Store *tokenCountingStore
	e := newEnv(t, func(c *Config) { n1Store = countTokenReads(c) })
	n2 := e.nodeWith("n2", func(c *Config) { n2Store = countTokenReads(c) })
	a := e.user("a")
	ws := e.workspace(a)
	general := generalOf(t, e, a, ws)
	c, ready := e.identify(a, ws)
	if got := n1Store.reads.Load(); got != 1 {
		t.Fatalf("identify read the token %d times, want 1", got)
	}
	e.post(a, general, "one")
	seq := c.waitEvents(parley.EventMessageCreated, 1)[0].S
	c.drop()
	e.waitDetached(ready.SessionID)

	// Back on the holding node: from its buffer, no store read.
	c2 := e.connect()
	c2.send(map[string]any{"op": "resume", "token": a.token, "session_id": ready.SessionID, "seq": seq})
	if f := c2.next(); f.Op != "resumed" {
		t.Fatalf("resume on the holder: %+v", f)
	}
	if got := n1Store.reads.Load(); got != 1 {
		t.Fatalf("the holder read the token %d times in all, want 1 (the identify)", got)
	}
	c2.drop()
	e.waitDetached(ready.SessionID)

	// On another node: handed over, no store read on either node.
	c3 := n2.connect()
	c3.send(map[string]any{"op": "resume", "token": a.token, "session_id": ready.SessionID, "seq": seq})
	if f := c3.next(); f.Op != "resumed" {
		t.Fatalf("resume on n2: %+v", f)
	}
	if r1, r2 := n1Store.reads.Load(), n2Store.reads.Load(); r1 != 1 || r2 != 0 {
		t.Fatalf("token reads after a handover: n1 %d, n2 %d, want 1 and 0", r1, r2)
	}
	waitUntil(t, "the handover counted", func() bool { return resumeSources(t, n2.reg)["handover"] == 1 })
	c3.drop()
	n2.waitDetached(ready.SessionID)

	// A wrong token for a held session: the store says no.
	c4 := n2.connect()
	c4.send(map[string]any{"op": "resume", "token": "not-the-token", "session_id": ready.SessionID, "seq": seq})
	if code := c4.closeCode(); code != parley.CloseAuthFailed {
		t.Fatalf("wrong token: close %d, want 4004", code)
	}
	if got := n2Store.reads.Load(); got != 1 {
		t.Fatalf("wrong token: n2 read the token %d times, want 1", got)
	}
}

// TestResumeRevokedToken: a session dropped and held in its node's resume
// buffer does not resume once its token is revoked (logout): session.revoked
// removes the held session, and the store refuses the token (4004), on the
// holding node and on another.
func TestResumeRevokedToken(t *testing.T) {
	e := newEnv(t, nil)
	n2 := e.node("n2")
	a := e.user("a")
	ws := e.workspace(a)
	c, ready := e.identify(a, ws)
	other := e.login(a.User) // another login of the same user, untouched
	co, readyOther := e.identify(other, ws)
	c.drop()
	co.drop()
	e.waitDetached(ready.SessionID)
	e.waitDetached(readyOther.SessionID)
	if err := e.store.RevokeSession(context.Background(), a.hash); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the revoked session dropped", func() bool { return e.gw.registry.get(ready.SessionID) == nil })
	for _, n := range []*env{e, n2} {
		c2 := n.connect()
		c2.send(map[string]any{"op": "resume", "token": a.token, "session_id": ready.SessionID, "seq": 0})
		if code := c2.closeCode(); code != parley.CloseAuthFailed {
			t.Fatalf("revoked token on %s: close %d, want 4004", n.gw.cfg.NodeID, code)
		}
	}
	// The other login's held session still resumes.
	c3 := e.connect()
	c3.send(map[string]any{"op": "resume", "token": other.token, "session_id": readyOther.SessionID, "seq": 0})
	if f := c3.next(); f.Op != "resumed" {
		t.Fatalf("the other login's resume: %+v", f)
	}
}

// TestResumeExpiredToken: a held session knows its login's expiry, and
// past it the session no longer vouches for the token (the store decides).
func TestResumeExpiredToken(t *testing.T) {
	e := newEnv(t, nil)
	a := e.user("a")
	ws := e.workspace(a)
	c, ready := e.identify(a, ws)
	c.drop()
	e.waitDetached(ready.SessionID)
	s := e.gw.registry.get(ready.SessionID)
	if s == nil || s.expiresAt.IsZero() {
		t.Fatal("the session does not know its login's expiry")
	}
	if !s.tokenValid(a.hash, time.Now()) {
		t.Fatal("a live token is not valid for its session")
	}
	if s.tokenValid(a.hash, s.expiresAt) {
		t.Fatal("an expired token is valid for its session")
	}
}
