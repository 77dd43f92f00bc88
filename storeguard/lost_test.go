package storeguard

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"parley"
)

// TestLostConnection: a broken connection under a call is the database
// being unavailable (503), an error the database answered with is not.
func TestLostConnection(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("list: %w", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), true},
		{fmt.Errorf("query: %w", io.ErrUnexpectedEOF), true},
		{fmt.Errorf("exec: %w", driver.ErrBadConn), true},
		{fmt.Errorf("write: %w", syscall.EPIPE), true},
		{errors.New("syntax error at or near"), false},
		{fmt.Errorf("post: %w", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}), true},
		{fmt.Errorf("post: %w", &pgconn.PgError{Code: "53300", Message: "sorry, too many clients already"}), true},
		{fmt.Errorf("post: %w", &pgconn.PgError{Code: "23505", Message: "duplicate key value"}), false},
		{parley.Errorf(parley.ENOTFOUND, "channel not found"), false},
		{fmt.Errorf("read: %w", context.Canceled), false},
	} {
		if got := Lost(tc.err); got != tc.want {
			t.Errorf("Lost(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestLostConnect: a connection that cannot be made (here: nothing listens
// on the port) is the database being unavailable too.
func TestLostConnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = pgconn.Connect(context.Background(), "postgres://postgres@"+addr+"/x?connect_timeout=5")
	if err == nil {
		t.Fatal("connected to a closed port")
	}
	if !Lost(fmt.Errorf("load channel: %w", err)) {
		t.Fatalf("Lost(%v) = false", err)
	}
}
