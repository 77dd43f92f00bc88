//go:build linux

package cloexec

import (
	"net"
	"syscall"
	"testing"

	"github.com/lesismal/nbio"
)

func closeOnExec(t *testing.T, c syscall.Conn) bool {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags uintptr
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		flags, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFD, 0)
	}); err != nil {
		t.Fatal(err)
	}
	if errno != 0 {
		t.Fatal(errno)
	}
	return flags&syscall.FD_CLOEXEC != 0
}

// TestSetOnNBIOConn: a socket nbio has taken over (its dup) is not
// close-on-exec until Set marks it.
func TestSetOnNBIOConn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			var b [1]byte
			c.Read(b[:])
		}
	}()
	std, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	nbc, err := nbio.NBConn(std) // dups the socket and closes std
	if err != nil {
		t.Fatal(err)
	}
	defer nbc.Close()
	if closeOnExec(t, nbc) {
		t.Skip("this nbio version dups with close-on-exec already")
	}
	if err := Set(nbc); err != nil {
		t.Fatal(err)
	}
	if !closeOnExec(t, nbc) {
		t.Fatal("Set did not mark the socket close-on-exec")
	}
}
