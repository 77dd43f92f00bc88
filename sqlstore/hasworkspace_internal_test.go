package sqlstore

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"parley"
)

// TestHasWorkspaceAfterLateCommit (SQLite): a creation whose caller gave
// up after its write ran in a batch still commits with that batch;
// HasWorkspace, asked after the caller's error but before the batch
// commits, answers only after it, and sees the workspace.
func TestHasWorkspaceAfterLateCommit(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "parley.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	u, err := s.CreateUser(ctx, parley.NewUser{Email: "o@example.com", Name: "Owner", Handle: "owner", PasswordHash: "x"})
	if err != nil {
		t.Fatal(err)
	}

	// A gate holds the writer so that the creation and a blocking write
	// queue behind it and share the next batch, the creation first.
	gate, gated := make(chan struct{}), make(chan struct{})
	go s.write(ctx, "gate", func(context.Context, *Tx) error { close(gated); <-gate; return nil })
	<-gated
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	id := parley.NewID(parley.PrefixWorkspace)
	created := make(chan error, 1)
	go func() {
		_, err := s.CreateWorkspaceWithID(cctx, id, u.ID, "Late", "late")
		created <- err
	}()
	waitLen(t, s.gc, 1)
	hold, held := make(chan struct{}), make(chan struct{})
	go s.write(ctx, "hold", func(context.Context, *Tx) error { close(held); <-hold; return nil })
	waitLen(t, s.gc, 2)
	close(gate)
	<-held // the creation's write ran; its batch has not committed
	cancel()
	if err := <-created; err == nil {
		t.Fatal("the creation's caller got no error")
	}

	has := make(chan bool, 1)
	go func() {
		ok, err := s.HasWorkspace(ctx, id)
		if err != nil {
			t.Error(err)
		}
		has <- ok
	}()
	// Released once the check is queued behind the batch, or answered.
	deadline := time.Now().Add(10 * time.Second)
	for len(s.gc.reqs) == 0 && len(has) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the check was neither queued nor answered")
		}
		time.Sleep(time.Millisecond)
	}
	close(hold)
	if !<-has {
		t.Fatal("HasWorkspace answered false; the creation committed")
	}
	var n int
	if err := s.rdb.QueryRowContext(ctx, `SELECT COUNT(*) FROM workspaces WHERE id = $1`, id).Scan(&n); err != nil || n != 1 {
		t.Fatalf("workspace rows %d, %v; want 1", n, err)
	}
}

// waitLen waits until n writes are queued on g.
func waitLen(t *testing.T, g *groupCommitter, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(g.reqs) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", len(g.reqs), n)
		}
		time.Sleep(time.Millisecond)
	}
}
