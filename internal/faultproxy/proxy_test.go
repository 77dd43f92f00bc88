package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// echo is a real TCP echo server.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, deadline time.Duration) error {
	c.SetDeadline(time.Now().Add(deadline))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err == nil && line != "ping\n" {
		return errors.New("echo answered " + line)
	}
	return err
}

func TestFaults(t *testing.T) {
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if err := roundTrip(c, r, 10*time.Second); err != nil {
		t.Fatalf("healthy: %v", err)
	}

	p.BlackHole()
	if err := roundTrip(c, r, 200*time.Millisecond); err == nil {
		t.Fatal("a black hole let a round trip through")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("black hole: %v, want a timeout", err)
	}
	p.Heal() // the held bytes go through now
	r.Reset(c)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("after heal: %q %v", line, err)
	}

	p.ResetAll()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("a reset connection still reads")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		c2.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = bufio.NewReader(c2).ReadString('\n')
		c2.Close()
	}
	if err == nil {
		t.Fatal("a new connection during reset was not reset")
	}

	p.Heal()
	p.AddLatency(time.Millisecond)
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if err := roundTrip(c3, bufio.NewReader(c3), 10*time.Second); err != nil {
		t.Fatalf("latency: %v", err)
	}
}

// TestDelay: each direction delays every chunk by d from its arrival, so a
// round trip takes at least 2d, and chunks sent back to back are not held
// behind each other (ten round trips in flight take about 2d, not 20d).
func TestDelay(t *testing.T) {
	const d = 100 * time.Millisecond
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Delay(d)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	start := time.Now()
	if err := roundTrip(c, r, 10*time.Second); err != nil {
		t.Fatalf("delay: %v", err)
	}
	if rtt := time.Since(start); rtt < 2*d {
		t.Fatalf("round trip %v through a link of %v each way", rtt, d)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	start = time.Now()
	for i := range 10 {
		if _, err := c.Write([]byte("ping\n")); err != nil {
			t.Fatal(i, err)
		}
		time.Sleep(d / 20) // separate chunks
	}
	for i := range 10 {
		if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
			t.Fatalf("echo %d: %q %v", i, line, err)
		}
	}
	if took := time.Since(start); took >= 20*d {
		t.Fatalf("ten pipelined round trips took %v: chunks were held behind each other", took)
	}

	p.BlackHole() // a cut link: nothing gets through, in either direction
	if err := roundTrip(c, r, 3*d); err == nil {
		t.Fatal("a round trip got through a black hole")
	}
	p.Delay(d) // healed: what was held goes through
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("after heal: %q %v", line, err)
	}
}
