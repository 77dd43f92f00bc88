package tenantdir

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// TestRelayPublishTimeout: a publish that no stream acknowledges (here
// the node's NATS server is down and its connection reconnecting; a
// stream without its majority answers just as little) fails after the
// relay's own publish timeout, not after the caller's deadline, and the
// change stays pending; once the server is back the next pass publishes
// it. Without the timeout each failed attempt waited JetStream's 5 s
// default (here the 30 s deadline), which is what made a region's
// recovery come in steps of 5 s.
func TestRelayPublishTimeout(t *testing.T) {
	dir := t.TempDir()
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true,
		JetStream: true, StoreDir: dir}
	start := func() *server.Server {
		t.Helper()
		srv, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		srv.Start()
		if !srv.ReadyForConnections(10 * time.Second) {
			t.Fatal("nats server not ready")
		}
		return srv
	}
	srv := start()
	opts.Port = srv.Addr().(*net.TCPAddr).Port // the same port when restarted
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			srv.Shutdown()
		}
	})
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)

	ctx := context.Background()
	cat := mustCatalogue(t, CatalogueConfig{Path: filepath.Join(t.TempDir(), "control.db")})
	r, err := NewRelay(ctx, RelayConfig{Catalogue: cat, NATS: NATS{Conn: nc, Stream: "TD_TIMEOUT"},
		PublishTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.AddShard(ctx, Shard{ID: "s1", Region: "eu", DSN: "postgres://u:p@db/p"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	srv.Shutdown()
	srv.WaitForShutdown()
	stopped = true
	waitFor(t, 10*time.Second, "the connection to notice the server is gone", func() bool { return !nc.IsConnected() })
	if _, err := cat.Place(ctx, Placement{WorkspaceID: "w1", Region: "eu"}); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	n, err := r.Flush(dctx)
	if err == nil || n != 0 {
		t.Fatalf("flush with the server down: %d published, err %v; want none and an error", n, err)
	}
	if dctx.Err() != nil {
		t.Fatalf("flush failed only at the caller's deadline (%v), not after the relay's publish timeout", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("flush with the server down: %v, want a publish timeout", err)
	}
	if p, err := cat.Pending(ctx, 10); err != nil || len(p) != 1 || p[0].Workspace == nil || p[0].Workspace.WorkspaceID != "w1" {
		t.Fatalf("pending after the failed flush: %+v %v, want the placement of w1", p, err)
	}

	srv = start()
	stopped = false
	waitFor(t, 10*time.Second, "the connection to come back", nc.IsConnected)
	// The stream may still be recovering when the connection is back: the
	// relay's next passes (Run's) get the change in.
	waitFor(t, 30*time.Second, "the pending change to be published", func() bool {
		_, err := r.Flush(ctx)
		p, perr := cat.Pending(ctx, 10)
		return err == nil && perr == nil && len(p) == 0
	})
}
