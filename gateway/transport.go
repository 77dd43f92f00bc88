package gateway

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/lesismal/nbio"
	"github.com/lesismal/nbio/logging"
	"github.com/lesismal/nbio/nbhttp"
	"github.com/lesismal/nbio/nbhttp/websocket"

	"parley"
	"parley/internal/cloexec"
)

// The socket layer, on lesismal/nbio (docs/gateway.md says why). The
// standard library's HTTP server keeps the listener; an upgrade request is
// hijacked and its socket moved into an nbio engine that has no listener of
// its own and serves only as a poller: epoll reports readable sockets, and
// nbio's websocket parser hands whole messages to the gateway. Writes are
// non-blocking: what the kernel does not take at once waits in nbio's
// per-connection buffer and goes out when epoll says the socket is
// writable.

// transport owns the nbio engine and the upgrader.
type transport struct {
	engine   *nbhttp.Engine
	upgrader *websocket.Upgrader

	live parley.LiveConfigSource // compression on or off for new connections

	mu      sync.Mutex
	pending map[string]pendingConn // guarded by mu: upgrades in progress, by remote address
}

// pendingConn is an upgrade in progress.
type pendingConn struct {
	c *conn
	// deflateOK: the client's offer (if any) lets a shared compressed tail
	// through (offersWindowLimit).
	deflateOK bool
}

// lowWaterDivisor: a blocked session is told to write again once its
// socket's buffer has drained below WriteHighWater/lowWaterDivisor.
const lowWaterDivisor = 4

var nbioLogOnce sync.Once

func newTransport(g *Gateway) (*transport, error) {
	nbioLogOnce.Do(func() { logging.SetLogger(nbioLogger{g.log.With("component", "nbio")}) })
	t := &transport{pending: map[string]pendingConn{}, live: g.cfg.Live}
	t.engine = nbhttp.NewEngine(nbhttp.Config{
		Name:                    "parley-gateway-" + g.cfg.NodeID,
		ReleaseWebsocketPayload: true,
		ReadBufferSize:          16 << 10,
	})
	// The nbio-level open hook runs on the upgrading goroutine before the
	// socket is registered with epoll, so nothing reads from it yet: the
	// place to put the corking writer under the websocket connection and
	// to attach the gateway's conn to it.
	t.engine.Engine.OnOpen(func(nc *nbio.Conn) {
		// nbio's dup of the hijacked socket is not close-on-exec
		// (package cloexec).
		_ = cloexec.Set(nc)
		wsc, ok := nc.Session().(*websocket.Conn)
		if !ok {
			return
		}
		t.mu.Lock()
		pc := t.pending[nc.RemoteAddr().String()]
		delete(t.pending, nc.RemoteAddr().String())
		t.mu.Unlock()
		c := pc.c
		if c == nil {
			return
		}
		cc := &corkConn{Conn: nc, lowWater: int64(g.cfg.WriteHighWater / lowWaterDivisor), onWritable: c.writable,
			handshake: true, deflateOK: pc.deflateOK}
		wsc.Conn = cc
		// nbio would compress every message once per connection; the
		// gateway compresses event frames itself, once per event
		// (deflate.go), and sends the rest uncompressed.
		wsc.EnableWriteCompression(false)
		c.ws, c.nb = wsc, cc
		wsc.SetSession(c)
	})
	t.engine.Engine.OnWrittenSize(func(nc *nbio.Conn, _ []byte, n int) {
		if wsc, ok := nc.Session().(*websocket.Conn); ok {
			if cc, ok := wsc.Conn.(*corkConn); ok {
				cc.wrote(n)
			}
		}
	})
	if err := t.engine.Start(); err != nil {
		return nil, fmt.Errorf("start gateway poller: %w", err)
	}

	u := websocket.NewUpgrader()
	u.Engine = t.engine
	u.KeepaliveTime = 0 // the gateway's heartbeats decide
	u.MessageLengthLimit = g.cfg.MaxFrameBytes
	// permessage-deflate: nbio answers an offer with
	// server_no_context_takeover and client_no_context_takeover. Client
	// frames may come compressed; they inflate to at most MaxFrameBytes.
	u.EnableCompression(true)
	u.WebsocketDecompressor = inflateLimit(g.cfg.MaxFrameBytes)
	u.CheckOrigin = func(*http.Request) bool { return true } // checked before the upgrade
	u.OnMessage(func(wsc *websocket.Conn, mt websocket.MessageType, data []byte) {
		if c, ok := wsc.Session().(*conn); ok {
			c.onMessage(mt, data)
		}
	})
	u.OnClose(func(wsc *websocket.Conn, err error) {
		if c, ok := wsc.Session().(*conn); ok {
			c.onClose(err)
		}
	})
	u.SetCloseHandler(func(wsc *websocket.Conn, code int, _ string) {
		// The client closes: answer with its code unless this side has
		// closed already; nbio then closes the socket.
		if c, ok := wsc.Session().(*conn); ok && !c.closing.CompareAndSwap(false, true) {
			return
		}
		if code == 1005 {
			wsc.WriteMessage(websocket.CloseMessage, nil)
			return
		}
		wsc.WriteClose(code, "")
	})
	t.upgrader = u
	return t, nil
}

// upgrade moves the request's socket to the poller and returns the
// gateway's connection for it.
func (t *transport) upgrade(w http.ResponseWriter, r *http.Request, c *conn) error {
	ext := r.Header.Values("Sec-Websocket-Extensions")
	if len(ext) > 0 && !t.live.LiveConfig().GatewayCompression {
		// Off: the connection does not negotiate the extension at all.
		r.Header.Del("Sec-Websocket-Extensions")
		ext = nil
	}
	t.mu.Lock()
	t.pending[r.RemoteAddr] = pendingConn{c: c, deflateOK: len(ext) > 0 && !offersWindowLimit(ext)}
	t.mu.Unlock()
	_, err := t.upgrader.UpgradeAndTransferConnToPoller(w, r, nil)
	t.mu.Lock()
	delete(t.pending, r.RemoteAddr)
	t.mu.Unlock()
	if err == nil && c.ws == nil {
		err = fmt.Errorf("upgrade: connection not registered")
	}
	return err
}

func (t *transport) stop() { t.engine.Stop() }

// corkConn sits between nbio's websocket connection and its socket. While
// corked, the frames the websocket layer writes are gathered in a buffer;
// uncork hands them to the socket in one write. It also counts the bytes
// handed to nbio and those nbio has written to the kernel, which tells a
// session how much is still waiting in user space.
type corkConn struct {
	*nbio.Conn
	lowWater int64

	mu     sync.Mutex // guards corked, buf and handshake, and orders writes
	corked bool
	buf    []byte
	// handshake: the next write is nbio's 101 answer, which says whether
	// permessage-deflate was negotiated.
	handshake  bool
	deflateOK  bool        // the client's offer suits the shared frames (offersWindowLimit)
	negotiated atomic.Bool // permessage-deflate was agreed: the client may send RSV1 frames
	deflate    atomic.Bool // event frames may go out compressed (deflate.go)

	queued     atomic.Int64 // bytes handed to nbio
	written    atomic.Int64 // bytes nbio wrote to the socket
	waiting    atomic.Bool  // a session waits for the buffer to drain
	onWritable func()       // set before the socket is registered
}

func (c *corkConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handshake {
		c.handshake = false
		agreed := bytes.Contains(b, negotiatedDeflate)
		c.negotiated.Store(agreed)
		c.deflate.Store(agreed && c.deflateOK)
	}
	if c.corked {
		c.buf = append(c.buf, b...)
		return len(b), nil
	}
	c.queued.Add(int64(len(b)))
	return c.Conn.Write(b)
}

// negotiatedDeflate is the line of nbio's 101 answer that accepts the
// client's permessage-deflate offer.
var negotiatedDeflate = []byte("\r\nSec-WebSocket-Extensions: permessage-deflate")

func (c *corkConn) cork(buf []byte) {
	c.mu.Lock()
	c.corked, c.buf = true, buf[:0]
	c.mu.Unlock()
}

func (c *corkConn) uncork() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	b := c.buf
	c.buf = nil
	if len(b) > 0 {
		c.queued.Add(int64(len(b)))
		c.Conn.Write(b) // nbio copies what the kernel does not take
	}
	return b[:0]
}

func (c *corkConn) pending() int { return int(c.queued.Load() - c.written.Load()) }

func (c *corkConn) wrote(n int) {
	c.written.Add(int64(n))
	if c.waiting.Load() && int64(c.pending()) <= c.lowWater && c.waiting.CompareAndSwap(true, false) {
		c.onWritable()
	}
}

// arm asks for onWritable once the buffer drains; false if it already has.
func (c *corkConn) arm() bool {
	c.waiting.Store(true)
	if int64(c.pending()) <= c.lowWater && c.waiting.CompareAndSwap(true, false) {
		return false
	}
	return true
}

// nbioLogger sends nbio's log lines to slog.
type nbioLogger struct{ log *slog.Logger }

func (l nbioLogger) SetLevel(int)                  {}
func (l nbioLogger) Debug(format string, v ...any) { l.debug(format, v...) }
func (l nbioLogger) Info(format string, v ...any)  { l.debug(format, v...) }
func (l nbioLogger) debug(format string, v ...any) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug(fmt.Sprintf(format, v...))
	}
}
func (l nbioLogger) Warn(format string, v ...any) { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l nbioLogger) Error(format string, v ...any) {
	l.log.Error(fmt.Sprintf(format, v...))
}
