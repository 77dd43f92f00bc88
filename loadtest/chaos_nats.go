package loadtest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// chaosNATS is the "external" NATS server a chaos run hosts itself (--nats
// own): a plain nats-server in this process on a fixed loopback port, which
// the natsrestart fault shuts down and starts again on the same port, as an
// operator restarting the bus would.
type chaosNATS struct {
	port int

	mu  sync.Mutex
	srv *server.Server // guarded by mu; nil while down
}

func newChaosNATS() (*chaosNATS, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	return &chaosNATS{port: ports[0]}, nil
}

// URL is the server's client URL.
func (n *chaosNATS) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

// start runs a fresh server on the port.
func (n *chaosNATS) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil {
		return errors.New("nats: already running")
	}
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: n.port, NoSigs: true, NoLog: true})
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("nats on port %d not ready", n.port)
	}
	n.srv = srv
	return nil
}

// stop shuts the server down (every client connection drops).
func (n *chaosNATS) stop() {
	n.mu.Lock()
	srv := n.srv
	n.srv = nil
	n.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// running reports whether the server is up.
func (n *chaosNATS) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.srv != nil
}
