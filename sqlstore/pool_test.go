package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"parley"
	"parley/internal/testpg"
	"parley/sqlstore"
)

// TestPostgresPoolOfOne: MaxConns sizes PostgreSQL's pool, and a store
// with a single connection still answers every path of AdvanceUpload (its
// refusals read the upload again, which must not wait for a second
// connection while holding the first: on a pool of one that waited
// forever).
func TestPostgresPoolOfOne(t *testing.T) {
	s := mustOpen(t, sqlstore.Config{PostgresURL: testpg.New(t), MaxConns: 1})
	if got := s.PoolStats().MaxOpenConnections; got != 1 {
		t.Fatalf("pool of %d connections, want 1", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	alice, err := s.CreateUser(ctx, parley.NewUser{Email: "alice@example.com", Name: "Alice", Handle: "alice", PasswordHash: "x"})
	if err != nil {
		t.Fatal(err)
	}
	bob, err := s.CreateUser(ctx, parley.NewUser{Email: "bob@example.com", Name: "Bob", Handle: "bob", PasswordHash: "x"})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := s.CreateWorkspace(ctx, alice.ID, "Acme", "acme")
	if err != nil {
		t.Fatal(err)
	}
	u, err := s.CreateUpload(ctx, alice.ID, ws.ID, parley.NewUpload{ID: parley.NewID("U"), FileID: parley.NewID(parley.PrefixFile),
		Name: "a.bin", Size: 200, ChunkSize: 100, StorageKey: "k", BackendID: "b", ExpiresAt: time.Now().Add(time.Hour)}, parley.FileQuota{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AdvanceUpload(ctx, bob.ID, u.ID, 0, 100); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("another user advances it: %v, want %s", err, parley.ENOTFOUND)
	}
	if got, err := s.AdvanceUpload(ctx, alice.ID, u.ID, 0, 100); err != nil || got.Offset != 100 {
		t.Fatalf("advance: %+v, %v", got, err)
	}
	if _, err := s.AdvanceUpload(ctx, alice.ID, u.ID, 0, 100); parley.ErrorCode(err) != parley.ECONFLICT {
		t.Fatalf("advance from a stale offset: %v, want %s", err, parley.ECONFLICT)
	}
}
