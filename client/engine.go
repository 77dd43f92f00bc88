package client

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/lesismal/nbio/nbhttp"
)

// The WebSocket library is nbio (github.com/lesismal/nbio, the server's
// too). Its client sockets live on an epoll engine: reads are callbacks on a
// few poller goroutines, writes never block, and an idle socket holds no
// goroutine and no read buffer of its own. A load tester opening thousands
// of gateway connections from one process pays about a kilobyte or two of
// library state per socket, where goroutine-per-connection libraries pay a
// goroutine stack plus buffers (gorilla ~17 KB, coder/websocket ~24 KB per
// idle connection measured here).

var (
	engineOnce sync.Once
	engine     *nbhttp.Engine
	engineErr  error
)

// sharedEngine returns the process-wide engine of client sockets, starting
// it on first use. It runs for the life of the process: every Client and
// Conn shares it, so that many users' connections cost no extra pollers.
func sharedEngine() (*nbhttp.Engine, error) {
	engineOnce.Do(func() {
		e := nbhttp.NewEngine(nbhttp.Config{
			Name:    "parley-client",
			NPoller: max(1, runtime.GOMAXPROCS(0)/2),
			// Frames are read into per-poller buffers, then copied out
			// per message; keep those shared buffers modest.
			ReadBufferSize: 32 << 10,
		})
		if err := e.Start(); err != nil {
			engineErr = fmt.Errorf("start websocket client engine: %w", err)
			return
		}
		engine = e
	})
	return engine, engineErr
}
