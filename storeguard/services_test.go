package storeguard_test

import (
	"context"
	"testing"

	"parley"
)

// TestFileAndIntegrationCallsAreGuarded: the file service's and the
// integration store's calls count in the breaker like the store's, and
// with the breaker open (a stalled database) they are refused at once with
// the guard's EUNAVAILABLE (503 and Retry-After over HTTP) instead of
// reaching the database.
func TestFileAndIntegrationCallsAreGuarded(t *testing.T) {
	t.Run("stall", func(t *testing.T) {
		f := newFixture(t, func(c *parley.StoreGuardConfig) {
			c.StoreGuardConsecutiveFailures, c.StoreGuardSlowCallMs, c.StoreGuardOpenSeconds = 1, 500, 60
		})
		files, integ := f.g.Files(f.store), f.g.Integrations(f.store)
		ctx := context.Background()
		// Healthy: answers pass through unchanged.
		if _, err := integ.ListBots(ctx, f.user, f.ws); err != nil {
			t.Fatalf("ListBots: %v", err)
		}
		if _, err := files.GetFile(ctx, f.user, "Fnope"); parley.ErrorCode(err) != parley.ENOTFOUND {
			t.Fatalf("GetFile of no file: %v, want ENOTFOUND", err)
		}
		release := make(chan struct{})
		held := f.hold(t, release)
		waitFor(t, "the breaker to open on the stalled call", func() bool { return f.g.State() == "open" })
		_, err := files.GetFile(ctx, f.user, "Fnope")
		wantUnavailable(t, err, "breaker")
		wantUnavailable(t, files.CheckUpload(ctx, f.user, f.ws, 10, parley.FileQuota{}), "breaker")
		_, err = integ.WebhookByID(ctx, "Wnope")
		wantUnavailable(t, err, "breaker")
		_, err = integ.CreateBot(ctx, f.user, f.ws, parley.NewBot{Name: "ci", Handle: "ci-bot"})
		wantUnavailable(t, err, "breaker")
		wantUnavailable(t, integ.Audit(ctx, f.ws, parley.AuditEntry{BotID: "U1", Action: "x"}), "breaker")
		if got := f.counter("parley_store_guard_failed_fast_total", "read", "breaker"); got < 2 {
			t.Fatalf("failed fast (read, breaker) = %v, want ≥ 2", got)
		}
		close(release)
		if err := <-held; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("failures", func(t *testing.T) {
		// Failures of file and integration calls alone open the breaker.
		f := newFixture(t, func(c *parley.StoreGuardConfig) {
			c.StoreGuardMinCalls, c.StoreGuardErrorRatePct, c.StoreGuardConsecutiveFailures = 1000, 100, 3
		})
		files, integ := f.g.Files(f.store), f.g.Integrations(f.store)
		ctx := context.Background()
		f.store.Close()
		if _, err := files.GetFile(ctx, f.user, "Fnope"); parley.ErrorCode(err) != parley.EINTERNAL {
			t.Fatalf("GetFile on a closed store: %v", err)
		}
		if _, err := integ.ListBots(ctx, f.user, f.ws); parley.ErrorCode(err) != parley.EINTERNAL {
			t.Fatalf("ListBots on a closed store: %v", err)
		}
		if _, err := files.SweepFiles(ctx, 10); parley.ErrorCode(err) != parley.EINTERNAL {
			t.Fatalf("SweepFiles on a closed store: %v", err)
		}
		if s := f.g.State(); s != "open" {
			t.Fatalf("breaker %s after 3 failed file and integration calls, want open", s)
		}
		_, err := f.g.GetMe(ctx, f.user)
		wantUnavailable(t, err, "breaker")
		if got := f.value("parley_store_guard_failures_total", map[string]string{"purpose": "read"}); got != 3 {
			t.Fatalf("failures (read) = %v, want 3", got)
		}
	})
}
