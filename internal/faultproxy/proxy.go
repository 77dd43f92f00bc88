// Package faultproxy is a TCP proxy that injects faults between a client
// and a real server, for tests and benchmarks of how Parley behaves when
// its database misbehaves: added latency, connection resets, and a black
// hole (connections stay open and nothing gets through either way); and,
// for the region test, a link's one-way delay (Delay).
package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Mode is the fault the proxy injects now.
type Mode int

const (
	Healthy   Mode = iota // bytes go through as they come
	Latency               // each chunk waits the proxy's latency before it is forwarded
	BlackHole             // nothing is forwarded (new connections are accepted and stall too)
	Reset                 // every connection is reset, new ones as soon as they come
	Delay                 // each chunk goes the proxy's latency after it arrived, later chunks not held back: a link's one-way delay
)

func (m Mode) String() string {
	return [...]string{"healthy", "latency", "black hole", "reset", "delay"}[m]
}

// Proxy forwards connections from its listener to an upstream address.
type Proxy struct {
	ln       net.Listener
	upstream string

	mu      sync.Mutex
	mode    Mode
	latency time.Duration
	changed chan struct{}         // closed and replaced on every change of mode
	conns   map[net.Conn]struct{} // both sides of every open pair
	closed  bool
	wg      sync.WaitGroup
}

// Start listens on a free loopback port and forwards to upstream.
func Start(upstream string) (*Proxy, error) { return StartOn("127.0.0.1:0", upstream) }

// StartOn listens on listen (host:port; port 0 picks one) and forwards to
// upstream: e.g. on a test veth's address, so that a network namespace
// reaches a server that listens on the root namespace's loopback.
func StartOn(listen, upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{ln: ln, upstream: upstream, changed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Heal forwards everything again at once.
func (p *Proxy) Heal() { p.set(Healthy, 0) }

// AddLatency delays every chunk of bytes, both ways, by d.
func (p *Proxy) AddLatency(d time.Duration) { p.set(Latency, d) }

// Delay makes the proxy a link with a one-way delay of d in each
// direction: every chunk is forwarded d after it arrived, in order,
// however many follow it (where AddLatency makes each chunk wait d once
// its turn comes). A network namespace test uses it where the kernel has
// no netem.
func (p *Proxy) Delay(d time.Duration) { p.set(Delay, d) }

// BlackHole stops forwarding without closing anything.
func (p *Proxy) BlackHole() { p.set(BlackHole, 0) }

// ResetAll resets every open connection and every new one until Heal.
func (p *Proxy) ResetAll() {
	p.set(Reset, 0)
	p.mu.Lock()
	for c := range p.conns {
		reset(c)
	}
	p.mu.Unlock()
}

// Mode returns the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

func (p *Proxy) set(m Mode, latency time.Duration) {
	p.mu.Lock()
	p.mode, p.latency = m, latency
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0) // close sends RST
	}
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.handle(c)
	}
}

// track adds c to the open connections; false when the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) handle(client net.Conn) {
	defer p.wg.Done()
	if !p.track(client) {
		client.Close()
		return
	}
	defer p.untrack(client)
	if p.Mode() == Reset {
		reset(client)
		return
	}
	server, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
	if err != nil {
		reset(client)
		return
	}
	if !p.track(server) {
		server.Close()
		client.Close()
		return
	}
	defer p.untrack(server)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(server, client) }()
	go func() { defer wg.Done(); p.pipe(client, server) }()
	wg.Wait()
}

// pipe copies from src to dst chunk by chunk, applying the mode to each
// chunk, until either side ends; then it closes both. A reader stamps each
// chunk with its arrival (for Delay) and hands it to the writer.
func (p *Proxy) pipe(dst, src net.Conn) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	chunks := make(chan chunk, 256)
	done := make(chan struct{})
	var readErr error
	defer func() {
		close(done)
		dst.Close()
		src.Close()
	}()
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				select {
				case chunks <- chunk{buf[:n], time.Now()}:
				case <-done:
					return
				}
			}
			if err != nil {
				readErr = err // read by the writer after chunks is closed
				return
			}
		}
	}()
	for c := range chunks {
		if !p.gate(c.at) {
			return
		}
		if _, werr := dst.Write(c.b); werr != nil {
			return
		}
	}
	if !errors.Is(readErr, io.EOF) {
		reset(dst)
	}
}

// gate holds a chunk as the mode says: it returns once the chunk may go,
// false when the connection must end (reset, or the proxy closed).
func (p *Proxy) gate(arrived time.Time) bool {
	for {
		p.mu.Lock()
		mode, latency, changed, closed := p.mode, p.latency, p.changed, p.closed
		p.mu.Unlock()
		switch {
		case closed || mode == Reset:
			return false
		case mode == Healthy:
			return true
		case mode == Latency || mode == Delay:
			wait := latency
			if mode == Delay {
				wait = time.Until(arrived.Add(latency))
				if wait <= 0 {
					return true
				}
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
				return true
			case <-changed: // the mode changed: decide again
				t.Stop()
			}
		default: // black hole: wait for a change
			<-changed
		}
	}
}
