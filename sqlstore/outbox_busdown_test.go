package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats-server/v2/server"

	"parley"
	"parley/internal/testpg"
	"parley/natsbus"
	"parley/sqlstore"
	"parley/storetest"
)

// TestOutboxRelayBusDownPost: with the node's NATS server down, the
// relay claims (locks) a channel's outbox row that could not be
// acknowledged and republishes into the reconnect buffer; its wait for
// the bus must be short, since a post into that channel upserts the same
// row. The post is answered while the bus is still down, within a
// deadline far below the NATS client's own flush bound (10 s), which is
// what the relay waited, row locked, before.
func TestOutboxRelayBusDownPost(t *testing.T) {
	ctx := context.Background()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(srv.Shutdown)
	bus, err := natsbus.Start(natsbus.Config{URL: srv.ClientURL(), Name: "outbox-busdown", ReconnectWait: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bus.Close() })
	url := testpg.New(t)
	s := mustOpen(t, sqlstore.Config{PostgresURL: url, Publisher: bus, Relay: fastRelay})
	owner := storetest.MustUser(t, s, "owner")
	ws := storetest.MustWorkspace(t, s, owner)
	ch := storetest.MustChannel(t, s, ws, owner, "c", parley.KindPublic)
	waitBacklog(t, s, 0)
	// Closed before the store (cleanups run last first): the store's
	// shutdown then does not wait out flushes on the down bus.
	t.Cleanup(func() { bus.Close() })

	srv.Shutdown()
	srv.WaitForShutdown()
	waitUntilTrue(t, "the bus to notice its server is gone", func() bool { return !bus.Connected() })
	storetest.MustPost(t, s, owner, ch, "posted with the bus down") // not acknowledged: its row stays

	// Wait until the relay holds the channel's row (its pass is waiting
	// for the bus).
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	waitUntilTrue(t, "the relay to claim the channel's outbox row", func() bool {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		var one int
		err = tx.QueryRowContext(ctx, `SELECT 1 FROM channel_outbox WHERE channel_id = $1 FOR UPDATE NOWAIT`, ch.ID).Scan(&one)
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == "55P03" // lock_not_available
	})

	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, _, err := s.PostMessage(pctx, owner.ID, ch.ID, parley.NewMessage{Text: "posted while the relay waits for the bus"}); err != nil {
		t.Fatalf("post while the relay waits for a down bus: %v", err)
	}
	if bus.Connected() {
		t.Fatal("the bus reconnected: the post was not answered while it was down")
	}
}

// waitUntilTrue polls cond until it holds (20 s at most).
func waitUntilTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
