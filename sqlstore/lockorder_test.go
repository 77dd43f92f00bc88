package sqlstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/internal/testpg"
	"parley/sqlstore"
	"parley/storetest"
)

// TestLanesOfTwoNodesDoNotDeadlock: two stores ("nodes") on one PostgreSQL
// database, one write lane each so that every post of a node shares its
// batches, post concurrently into four channels from many goroutines. A
// batch holds the rows of the channels it posted to until its COMMIT; the
// two nodes' batches must take them in one order, so PostgreSQL detects no
// deadlock (pg_stat_database.deadlocks stays put) and no post fails.
func TestLanesOfTwoNodesDoNotDeadlock(t *testing.T) {
	url := testpg.New(t)
	ctx := context.Background()
	cfg := sqlstore.Config{PostgresURL: url, WriteLanes: 1, MaxBatch: 16}
	a, b := mustOpen(t, cfg), mustOpen(t, cfg)
	owner := storetest.MustUser(t, a, "owner")
	ws := storetest.MustWorkspace(t, a, owner)
	var chans []*parley.Channel
	for i := range 4 {
		chans = append(chans, storetest.MustChannel(t, a, ws, owner, fmt.Sprint("d", i), parley.KindPublic))
	}

	// Every deadlock PostgreSQL detects fails one statement of a write,
	// which then runs again and is counted (parley_store_write_retries_total).
	reg := prometheus.NewRegistry()
	reg.MustRegister(sqlstore.Collectors()...)
	deadlocks := func() float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "parley_store_write_retries_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "reason" && l.GetValue() == "deadlock" {
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		return 0
	}
	before := deadlocks()

	const writers, posts = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers*posts)
	for w := range writers {
		node := []*sqlstore.Store{a, b}[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range posts {
				// Writers walk the channels in opposite directions, so the
				// nodes' batches gather them in every order.
				k := i % len(chans)
				if w%4 >= 2 {
					k = len(chans) - 1 - k
				}
				if _, _, err := node.PostMessage(ctx, owner.ID, chans[k].ID, parley.NewMessage{Text: fmt.Sprint(w, "/", i)}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("post failed: %v", err)
	}
	if d := deadlocks() - before; d != 0 {
		t.Errorf("PostgreSQL detected %v deadlocks between the two nodes' write lanes", d)
	}
}
