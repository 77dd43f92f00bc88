// Package cloexec marks sockets close-on-exec.
//
// lesismal/nbio moves a socket into its poller with syscall.Dup, which does
// not set FD_CLOEXEC (everything the Go runtime opens has it). A process
// that starts another one (the load tester and the chaos run start
// `parley serve` nodes) then hands every such socket to the child, which
// keeps it open for its whole life. Closing the socket in the parent no
// longer ends the connection, and nbio's epoll registration of it (tied to
// the open file, not to the descriptor) stays: its hang-up events keep
// coming under the old descriptor number, which the next socket reuses,
// and nbio closes that new socket on them. After a rolling restart this
// failed nearly every reconnect of the load tester's clients for minutes
// ("use of closed network connection" on both ends; docs/reliability.md).
package cloexec

import "syscall"

// Set marks c's descriptor close-on-exec. Errors are returned for logging;
// the socket works either way.
func Set(c syscall.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(func(fd uintptr) { setFD(int(fd)) })
}
