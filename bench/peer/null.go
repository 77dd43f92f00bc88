package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"parley"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lesismal/nbio/nbhttp"
	"github.com/lesismal/nbio/nbhttp/websocket"

	"parley/bench/internal/benchkit"
)

// The null server proves that the load generator is not what a round
// measures: it accepts WebSocket subscribers and, for each publish, writes
// one frame of the same payload to each of them — no store, no protocol,
// no per-session state. The rate and the subscriber count at which the
// generator falls behind it (late starts, a p99 that grows, lost
// deliveries) is the generator's ceiling; a real server's figures mean
// something only well below it.
//
// It is this very executable, run again with nullServerEnv set to its
// listen address, so that its CPU time is its own process's.

const nullServerEnv = "PARLEY_PEER_NULL_SERVER"

const nullReady = "null server ready"

// maybeServeNull runs the null server and exits if this process was
// started as one.
func maybeServeNull() {
	addr := os.Getenv(nullServerEnv)
	if addr == "" {
		return
	}
	if err := serveNull(addr); err != nil {
		fmt.Fprintln(os.Stderr, "null server:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// nullHub is the null server's state: the subscribers and the frames
// not yet written to them.
type nullHub struct {
	mu      sync.Mutex
	conns   map[*websocket.Conn]struct{} // guarded by mu
	list    []*websocket.Conn            // conns as a slice, nil when stale; guarded by mu
	pending []byte                       // encoded frames to write; guarded by mu
	wake    chan struct{}
}

// flush writes the pending frames to every subscriber, each batch with one
// write per socket, the sockets shared among GOMAXPROCS goroutines: the
// least work a server can do per delivery, so that the generator is what
// gives out first.
func (h *nullHub) flush() {
	for range h.wake {
		h.mu.Lock()
		buf := h.pending
		h.pending = nil
		if h.list == nil {
			for c := range h.conns {
				h.list = append(h.list, c)
			}
		}
		list := h.list
		h.mu.Unlock()
		if len(buf) == 0 {
			continue
		}
		shards := min(runtime.GOMAXPROCS(0), max(len(list)/256, 1))
		var wg sync.WaitGroup
		for k := range shards {
			wg.Go(func() {
				for i := k; i < len(list); i += shards {
					_, _ = list[i].Conn.Write(buf) // pre-framed bytes; a failed write closes the socket
				}
			})
		}
		wg.Wait()
	}
}

// serveNull serves on addr until SIGTERM or SIGINT.
func serveNull(addr string) error {
	h := &nullHub{conns: map[*websocket.Conn]struct{}{}, wake: make(chan struct{}, 1)}
	go h.flush()
	up := websocket.NewUpgrader()
	up.KeepaliveTime = 0
	up.OnOpen(func(c *websocket.Conn) {
		h.mu.Lock()
		h.conns[c], h.list = struct{}{}, nil
		h.mu.Unlock()
	})
	up.OnClose(func(c *websocket.Conn, _ error) {
		h.mu.Lock()
		delete(h.conns, c)
		h.list = nil
		h.mu.Unlock()
	})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws", func(w http.ResponseWriter, r *http.Request) {
		_, _ = up.Upgrade(w, r, nil) // a failed upgrade has answered already
	})
	mux.HandleFunc("GET /count", func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		n := len(h.conns)
		h.mu.Unlock()
		fmt.Fprint(w, n)
	})
	mux.HandleFunc("POST /publish", func(w http.ResponseWriter, r *http.Request) {
		obj, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		frame := wsTextFrame(nullFrame(obj))
		h.mu.Lock()
		h.pending = append(h.pending, frame...)
		n := len(h.conns)
		h.mu.Unlock()
		select {
		case h.wake <- struct{}{}:
		default: // a flush is due already
		}
		fmt.Fprintf(w, `{"sent":%d}`, n)
	})
	eng := nbhttp.NewEngine(nbhttp.Config{Network: "tcp", Addrs: []string{addr}, Handler: mux, NPoller: runtime.GOMAXPROCS(0)})
	if err := eng.Start(); err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	fmt.Println(nullReady)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	eng.Stop()
	return nil
}

// wsTextFrame frames payload as one unmasked server-to-client text frame
// (RFC 6455 §5.2), encoded once for every subscriber.
func wsTextFrame(payload []byte) []byte {
	n := len(payload)
	var b []byte
	switch {
	case n < 126:
		b = append(make([]byte, 0, n+2), 0x81, byte(n))
	case n < 1<<16:
		b = append(make([]byte, 0, n+4), 0x81, 126, byte(n>>8), byte(n))
	default:
		b = append(make([]byte, 0, n+10), 0x81, 127)
		for shift := 56; shift >= 0; shift -= 8 {
			b = append(b, byte(uint64(n)>>shift))
		}
	}
	return append(b, payload...)
}

// nullFrame is the one frame every subscriber gets for a publish: shaped
// like a gateway event, with the message object inside.
func nullFrame(obj []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"op":%q,"t":%q,"d":{"message":`, parley.OpEvent, parley.EventMessageCreated)
	b.Write(obj)
	b.WriteString(`}}`)
	return b.Bytes()
}

// nullTarget is the null server as a target.
type nullTarget struct {
	dialed atomic.Int64 // subscribers connected
	p      *benchkit.Proc
	eng    *benchkit.RawEngine
	hc     *http.Client
	url    string // http://host:port
}

func newNullTarget(ctx context.Context, cfg Config, eng *benchkit.RawEngine, hc *http.Client) (*nullTarget, error) {
	exe := cfg.nullExe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("find this executable for the null server: %w", err)
		}
	}
	addr, err := benchkit.FreePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), nullServerEnv+"="+addr)
	p, err := benchkit.StartProc(ctx, cmd, 30*time.Second, func(line string) bool { return line == nullReady })
	if err != nil {
		return nil, fmt.Errorf("null server: %w", err)
	}
	return &nullTarget{p: p, eng: eng, hc: hc, url: "http://" + addr}, nil
}

func (n *nullTarget) proc() *benchkit.Proc { return n.p }

func (n *nullTarget) connect(ctx context.Context, _ int, onPayload func([]byte)) (subscriber, error) {
	s := &nullSub{closed: make(chan struct{})}
	ws, err := n.eng.Dial(ctx, "ws"+n.url[len("http"):]+"/ws", func(_ *websocket.Conn, data []byte) { onPayload(data) },
		func() {
			if !s.ending.Load() {
				s.dropped.Add(1)
			}
			close(s.closed)
		})
	if err != nil {
		return nil, err
	}
	s.ws.Store(ws)
	n.dialed.Add(1)
	return s, nil
}

// connected waits (up to 30 s) until the server has registered every
// subscriber: a client's handshake can end before the server's OnOpen.
func (n *nullTarget) connected() {
	want := strconv.FormatInt(n.dialed.Load(), 10)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		res, err := n.hc.Get(n.url + "/count")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if string(b) == want {
			return
		}
	}
}

func (n *nullTarget) publish(ctx context.Context, m publication) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url+"/publish", bytes.NewReader(m.object))
	if err != nil {
		return err
	}
	res, err := n.hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("publish: %s", res.Status)
	}
	return nil
}

func (n *nullTarget) close() { n.p.Stop() }

type nullSub struct {
	ws      atomic.Pointer[websocket.Conn]
	closed  chan struct{}
	dropped atomic.Int64
	ending  atomic.Bool
}

func (s *nullSub) close() {
	s.ending.Store(true)
	if ws := s.ws.Load(); ws != nil {
		ws.WriteClose(1000, "bye")
		ws.Close()
	}
}

func (s *nullSub) done() <-chan struct{} { return s.closed }
func (s *nullSub) drops() int64          { return s.dropped.Load() }
