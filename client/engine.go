package client

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/lesismal/nbio"
	"github.com/lesismal/nbio/nbhttp"

	"parley/internal/cloexec"
)

// The WebSocket library is nbio (github.com/lesismal/nbio, the server's
// too). Its client sockets live on an epoll engine: reads are callbacks on a
// few poller goroutines, writes never block, and an idle socket holds no
// goroutine and no read buffer of its own. With the Conn's own design (no
// goroutine while idle) an identified, idle Conn costs about 5 KB of RSS in
// the client process (3.8 KB of heap; measured with 5,000 Conns against a
// gateway in another process), where goroutine-per-connection libraries pay
// a goroutine stack plus buffers per socket before any state of ours
// (gorilla ~17 KB, coder/websocket ~24 KB per idle connection measured
// here). That matters to a load tester opening thousands of connections
// from one process on the machine it measures.

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
		// nbio dups every socket into its poller without close-on-exec;
		// a process that starts others (the load tester starts nodes)
		// would hand them its sockets (package cloexec says what breaks).
		// The hook runs before the socket is registered with epoll.
		e.Engine.OnOpen(func(c *nbio.Conn) { _ = cloexec.Set(c) })
		if err := e.Start(); err != nil {
			engineErr = fmt.Errorf("start websocket client engine: %w", err)
			return
		}
		engine = e
	})
	return engine, engineErr
}
