// Package testpg gives tests a fresh PostgreSQL database of their own on the
// server named by PARLEY_TEST_POSTGRES (default: the local server), created
// for the test and dropped after it. Without a reachable server the test is
// skipped, except under CI=true, where it fails: CI must not pass by
// skipping the PostgreSQL half of the suite.
package testpg

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx" driver
)

// DefaultURL is the server used when PARLEY_TEST_POSTGRES is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// ServerURL returns the admin URL of the test server.
func ServerURL() string {
	if u := os.Getenv("PARLEY_TEST_POSTGRES"); u != "" {
		return u
	}
	return DefaultURL
}

// New creates a database for tb and returns its URL; the database is dropped
// when tb ends.
func New(tb testing.TB) string {
	tb.Helper()
	admin := ServerURL()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := sql.Open("pgx", admin)
	if err == nil {
		err = db.PingContext(ctx)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("PostgreSQL at %s is unreachable under CI: %v", admin, err)
		}
		tb.Skipf("PostgreSQL at %s is unreachable: %v", admin, err)
	}
	var b [6]byte
	rand.Read(b[:])
	name := "parley_test_" + hex.EncodeToString(b[:])
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		db.Close()
		tb.Fatalf("create test database: %v", err)
	}
	tb.Cleanup(func() {
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Errorf("drop test database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		tb.Fatalf("parse %s: %v", admin, err)
	}
	u.Path = "/" + name
	return u.String()
}
