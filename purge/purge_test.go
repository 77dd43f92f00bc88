package purge_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"parley"
	"parley/purge"
	"parley/sqlstore"
	"parley/storetest"
)

// files is the files hook as the purge sees it: it records the workspaces
// it was asked about, checks that the workspace's rows were still there
// when it was called (its rows name the blobs), and panics on its first
// call when told to.
type files struct {
	st        parley.Store
	mu        sync.Mutex
	calls     []string
	rowsThere []bool
	panicOnce bool
}

func (f *files) RemoveWorkspaceFiles(ctx context.Context, ws string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.panicOnce {
		f.panicOnce = false
		panic("file store bug")
	}
	deleted, err := f.st.DeletedWorkspaces(ctx)
	if err != nil {
		return err
	}
	f.calls = append(f.calls, ws)
	f.rowsThere = append(f.rowsThere, slices.Contains(deleted, ws))
	return nil
}

func deletedWorkspace(t *testing.T, st parley.Store) string {
	t.Helper()
	owner := storetest.MustUser(t, st, "owner")
	ws := storetest.MustWorkspace(t, st, owner)
	ch := storetest.MustChannel(t, st, ws, owner, "doomed", parley.KindPublic)
	for range 12 {
		storetest.MustPost(t, st, owner, ch, "bye")
	}
	if err := st.DeleteWorkspace(context.Background(), owner.ID, ws.ID, ws.Slug); err != nil {
		t.Fatal(err)
	}
	return ws.ID
}

func openStore(t *testing.T) parley.Store {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), sqlstore.Config{Path: filepath.Join(t.TempDir(), "parley.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestPurgeRemovesFilesThenRows: the files hook runs first, while the rows
// still exist; a panic in it is survived and the purge retried; at the end
// the workspace is gone from the store.
func TestPurgeRemovesFilesThenRows(t *testing.T) {
	st := openStore(t)
	ws := deletedWorkspace(t, st)
	f := &files{st: st, panicOnce: true}
	p := purge.New(purge.Config{Store: st, Files: f, Batch: 4, RetryAfter: time.Millisecond, Logger: quiet})
	defer p.Close()
	p.Start(ws)
	p.Start(ws) // a second start while it runs is nothing
	p.Wait()
	if len(f.calls) != 1 || f.calls[0] != ws || !f.rowsThere[0] {
		t.Fatalf("files hook calls %v, rows there %v", f.calls, f.rowsThere)
	}
	left, err := st.DeletedWorkspaces(context.Background())
	if err != nil || len(left) != 0 {
		t.Fatalf("deleted workspaces left: %v %v", left, err)
	}
}

// TestResumeFinishesPurges: a workspace deleted while no purger ran (a node
// stopped mid-purge) is purged by the next node's Resume.
func TestResumeFinishesPurges(t *testing.T) {
	st := openStore(t)
	a, b := deletedWorkspace(t, st), deletedWorkspace(t, st)
	// Half of a's purge done by a node that then stopped.
	if done, err := st.PurgeWorkspace(context.Background(), a, 3); err != nil || done {
		t.Fatalf("first batch: %v %v", done, err)
	}
	f := &files{st: st}
	p := purge.New(purge.Config{Store: st, Files: f, Logger: quiet})
	defer p.Close()
	if err := p.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	slices.Sort(f.calls)
	want := []string{a, b}
	slices.Sort(want)
	if !slices.Equal(f.calls, want) {
		t.Fatalf("files hook calls %v, want %v", f.calls, want)
	}
	if left, _ := st.DeletedWorkspaces(context.Background()); len(left) != 0 {
		t.Fatalf("deleted workspaces left: %v", left)
	}
}
