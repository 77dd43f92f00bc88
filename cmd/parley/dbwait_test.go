package main

import (
	"database/sql"
	"errors"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"parley/internal/faultproxy"
	"parley/internal/testpg"
	"parley/sqlstore"
)

// A node that starts while PostgreSQL is unavailable waits for it, up to
// --db-wait (dbwait.go): connections reset, a backend terminated under a
// start-up step, and a stall that outlasts the wait (the node then exits,
// saying so). Before it, each of the first two ended the start at once
// (the chaos run's "node exited while starting", issue 15).

// dbNode is a `parley serve` the test watches start.
type dbNode struct {
	cmd    *exec.Cmd
	admin  string
	out    *syncBuffer
	exited chan struct{}
	err    error
}

func startDBNode(t *testing.T, db string, extra ...string) *dbNode {
	t.Helper()
	n := &dbNode{admin: freePort(t), out: &syncBuffer{}, exited: make(chan struct{})}
	args := append([]string{"serve", "--log-format", "json", "--db", db, "--listen", freePort(t),
		"--admin", n.admin, "--nats-cluster", freePort(t)}, extra...)
	n.cmd = exec.Command(binPath, args...)
	n.cmd.Env = cleanEnv()
	n.cmd.Stdout, n.cmd.Stderr = n.out, n.out
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		n.err = n.cmd.Wait()
		close(n.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-n.exited:
		default:
			n.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-n.exited:
			case <-time.After(20 * time.Second):
				n.cmd.Process.Kill()
				<-n.exited
			}
		}
		if t.Failed() {
			t.Logf("parley output:\n%s", n.out)
		}
	})
	return n
}

// waitFor polls cond every 20 ms for up to d; it fails the test if the
// node exits first or cond never holds.
func (n *dbNode) waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		select {
		case <-n.exited:
			t.Fatalf("the node exited (%v) while waiting for %s", n.err, what)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (n *dbNode) logged(s string) func() bool {
	return func() bool { return strings.Contains(n.out.String(), s) }
}

func (n *dbNode) ready() bool {
	resp, err := http.Get("http://" + n.admin + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// proxied starts a fault proxy in front of the database at db and returns
// it and the database's URL through it.
func proxied(t *testing.T, db string) (*faultproxy.Proxy, string) {
	t.Helper()
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	u.Host = p.Addr()
	return p, u.String()
}

const retryLog = `"msg":"database unavailable at start-up; trying again"`

// Every connection to the database is reset when the node starts (a
// server restarting, a failover): it tries again and is ready once the
// database answers.
func TestServeWaitsForDatabaseReset(t *testing.T) {
	t.Parallel()
	proxy, db := proxied(t, testpg.New(t))
	proxy.ResetAll()
	n := startDBNode(t, db)
	n.waitFor(t, "retry", 30*time.Second, n.logged(retryLog))
	if n.ready() {
		t.Fatal("ready while the database resets every connection")
	}
	proxy.Heal()
	n.waitFor(t, "readiness after the database came back", 60*time.Second, n.ready)
	n.waitFor(t, "the log that start-up went on", 10*time.Second, n.logged(`"msg":"database answered; start-up goes on"`))
}

// A backend is terminated (pg_terminate_backend) while a start-up step
// waits on it: here the live configuration's load, held by a lock on
// settings until the backend is gone. The node tries the step again.
func TestServeWaitsForDatabaseTerminated(t *testing.T) {
	t.Parallel()
	dbURL := testpg.New(t)
	ctx := t.Context()
	// Migrated beforehand, so that the node's first step touching settings
	// is the live configuration's load.
	s, err := sqlstore.Open(ctx, sqlstore.Config{PostgresURL: dbURL})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `LOCK TABLE settings IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	n := startDBNode(t, dbURL)
	var blocked int
	n.waitFor(t, "the node's load blocked on the lock", 60*time.Second, func() bool {
		err := db.QueryRowContext(ctx, `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FROM settings%'`).Scan(&blocked)
		return err == nil
	})
	var ok bool
	if err := db.QueryRowContext(ctx, `SELECT pg_terminate_backend($1)`, blocked).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d): %v %v", blocked, ok, err)
	}
	n.waitFor(t, "retry", 30*time.Second, n.logged(retryLog))
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	n.waitFor(t, "readiness after the lock was released", 60*time.Second, n.ready)
}

// A stall longer than --db-wait ends the start: exit status 1, the error
// saying which step and that the database did not answer in time.
func TestServeDatabaseWaitBound(t *testing.T) {
	t.Parallel()
	proxy, db := proxied(t, testpg.New(t))
	proxy.BlackHole()
	n := startDBNode(t, db, "--db-wait", "2s")
	select {
	case <-n.exited:
	case <-time.After(60 * time.Second):
		t.Fatal("the node still waits 60 s into a 2 s --db-wait")
	}
	var ee *exec.ExitError
	if !errors.As(n.err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want status 1", n.err)
	}
	out := n.out.String()
	for _, want := range []string{"parley: open store", "the database did not answer within --db-wait"} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not say %q", want)
		}
	}
	if strings.Contains(out, "Parley is running") {
		t.Error("it said it was running")
	}
}
