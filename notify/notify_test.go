package notify_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"parley"
	"parley/httpapi"
	"parley/internal/mailtest"
	"parley/internal/testpg"
	"parley/notify"
	"parley/sqlstore"
	"parley/storetest"
)

// End to end against a real SMTP server (mailpit, package mailtest) and
// both stores. The notifier runs on a clock the test moves (RunOnce at
// now+offset), never on sleeps.

var secret = []byte("test-email-secret-0123456789")

// clock is the notifier's: the real time (the store's) plus an offset the
// test moves past the interval.
type clock struct{ off atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) Advance(d time.Duration) { c.off.Add(int64(d)) }

type env struct {
	st   *sqlstore.Store
	mail *mailtest.Server
	clk  *clock
	api  *httptest.Server
	n    *notify.Notifier

	online sync.Map // user id -> true
}

func openStore(t *testing.T, dialect string, pgURL string) *sqlstore.Store {
	t.Helper()
	cfg := sqlstore.Config{Path: filepath.Join(t.TempDir(), "parley.db")}
	if dialect == "postgres" {
		if pgURL == "" {
			pgURL = testpg.New(t)
		}
		cfg = sqlstore.Config{PostgresURL: pgURL}
	}
	st, err := sqlstore.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open %s store: %v", dialect, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newNotifier(t *testing.T, e *env, st *sqlstore.Store, node string) *notify.Notifier {
	t.Helper()
	return newNotifierOnline(t, e, st, node, func(_ context.Context, ids []string) []string {
		var out []string
		for _, id := range ids {
			if _, ok := e.online.Load(id); ok {
				out = append(out, id)
			}
		}
		return out
	})
}

// newNotifierOnline is a notifier that asks online for who is online.
func newNotifierOnline(t *testing.T, e *env, st *sqlstore.Store, node string, online func(context.Context, []string) []string) *notify.Notifier {
	t.Helper()
	n, err := notify.New(notify.Config{
		Store: st,
		SMTP: notify.SMTP{Host: e.mail.SMTPHost, Port: e.mail.SMTPPort, TLS: notify.TLSNone,
			From: "Parley <parley@example.com>"},
		BaseURL: e.api.URL,
		Secret:  secret,
		NodeID:  node,
		Now:     e.clk.Now,
		Online:  online,
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func newEnv(t *testing.T, dialect string) *env {
	t.Helper()
	e := &env{mail: mailtest.Start(t), clk: &clock{}}
	e.st = openStore(t, dialect, "")
	e.api = httptest.NewServer(httpapi.New(httpapi.Config{Store: e.st, Directory: e.st.Directory(),
		NotifySecret: secret, EmailEnabled: true, Rates: parley.LiveRatesOff()}).Handler())
	t.Cleanup(e.api.Close)
	e.n = newNotifier(t, e, e.st, "node-1")
	return e
}

func (e *env) run(t *testing.T, want int) {
	t.Helper()
	n, err := e.n.RunOnce(context.Background())
	if err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	if n != want {
		t.Fatalf("RunOnce sent %d emails, want %d", n, want)
	}
}

// team is Acme with ann, bob and a channel both are in.
type team struct {
	ann, bob *parley.User
	ws       *parley.Workspace
	ch, dm   *parley.Channel
}

func newTeam(t *testing.T, st parley.Store) *team {
	t.Helper()
	ctx := context.Background()
	tm := &team{ann: storetest.MustUser(t, st, "ann"), bob: storetest.MustUser(t, st, "bob")}
	var err error
	slug := "acme-" + strings.ToLower(tm.ann.Handle)
	if tm.ws, err = st.CreateWorkspace(ctx, tm.ann.ID, "Acme", slug); err != nil {
		t.Fatal(err)
	}
	storetest.MustJoinWorkspace(t, st, tm.ws, tm.ann, tm.bob)
	tm.ch = storetest.MustChannel(t, st, tm.ws, tm.ann, "review", parley.KindPublic)
	if _, err := st.AddMembers(ctx, tm.ann.ID, tm.ch.ID, []string{tm.bob.ID}); err != nil {
		t.Fatal(err)
	}
	if tm.dm, _, err = st.OpenDM(ctx, tm.ann.ID, tm.ws.ID, []string{tm.bob.ID}); err != nil {
		t.Fatal(err)
	}
	return tm
}

var dialects = []string{"sqlite", "postgres"}

// TestEmailBatch: several mentions and a DM make one email after the
// interval, with the subject, addresses, text and escaped HTML parts and
// the List-Unsubscribe headers; nothing goes twice; the next batch waits
// for the interval.
func TestEmailBatch(t *testing.T) {
	for _, d := range dialects {
		t.Run(d, func(t *testing.T) {
			e := newEnv(t, d)
			tm := newTeam(t, e.st)
			storetest.MustPost(t, e.st, tm.ann, tm.ch, "@"+tm.bob.Handle+" can you review <script>alert(1)</script>?")
			storetest.MustPost(t, e.st, tm.ann, tm.ch, "not for bob")
			storetest.MustPost(t, e.st, tm.ann, tm.ch, "and @"+tm.bob.Handle+" the release notes")
			storetest.MustPost(t, e.st, tm.ann, tm.dm, "lunch?")

			e.run(t, 0) // the oldest has not waited 15 minutes
			e.clk.Advance(16 * time.Minute)
			e.run(t, 1)
			e.run(t, 0) // nothing new

			msgs := e.mail.Messages(t)
			if len(msgs) != 1 {
				t.Fatalf("%d emails, want 1", len(msgs))
			}
			m := e.mail.Message(t, msgs[0].ID)
			if m.Subject != "2 new mentions and 1 direct message in Acme" {
				t.Errorf("subject %q", m.Subject)
			}
			if len(m.To) != 1 || m.To[0].Address != tm.bob.Email || m.From.Address != "parley@example.com" {
				t.Errorf("to %+v from %+v", m.To, m.From)
			}
			for _, want := range []string{"review <script>alert(1)</script>?", "the release notes", "lunch?", "#review in Acme", "/api/v1/unsubscribe/"} {
				if !strings.Contains(m.Text, want) {
					t.Errorf("text part lacks %q:\n%s", want, m.Text)
				}
			}
			if strings.Contains(m.Text, "not for bob") || strings.Contains(m.HTML, "not for bob") {
				t.Error("a message that does not mention bob is in the email")
			}
			if strings.Contains(m.HTML, "<script>") || !strings.Contains(m.HTML, "&lt;script&gt;alert(1)&lt;/script&gt;") {
				t.Errorf("HTML part does not escape the message:\n%s", m.HTML)
			}
			h := e.mail.Headers(t, msgs[0].ID)
			unsub := h["List-Unsubscribe"]
			if len(unsub) != 1 || !strings.HasPrefix(unsub[0], "<"+e.api.URL+"/api/v1/unsubscribe/") {
				t.Errorf("List-Unsubscribe %q", unsub)
			}
			if p := h["List-Unsubscribe-Post"]; len(p) != 1 || p[0] != "List-Unsubscribe=One-Click" {
				t.Errorf("List-Unsubscribe-Post %q", p)
			}

			// A new mention: due 15 minutes after it, and after the last email.
			storetest.MustPost(t, e.st, tm.ann, tm.ch, "@"+tm.bob.Handle+" one more")
			e.clk.Advance(10 * time.Minute)
			e.run(t, 0)
			e.clk.Advance(10 * time.Minute)
			e.run(t, 1)
			msgs = e.mail.Messages(t)
			if len(msgs) != 2 || msgs[0].Subject != "1 new mention in Acme" {
				t.Fatalf("second email: %+v", msgs)
			}
		})
	}
}

// TestEmailReadInTime: what bob read before the batch was due is dropped;
// nothing left, no email.
func TestEmailReadInTime(t *testing.T) {
	for _, d := range dialects {
		t.Run(d, func(t *testing.T) {
			e := newEnv(t, d)
			tm := newTeam(t, e.st)
			m := storetest.MustPost(t, e.st, tm.ann, tm.ch, "@"+tm.bob.Handle+" ping")
			dm := storetest.MustPost(t, e.st, tm.ann, tm.dm, "ping in private")
			e.clk.Advance(5 * time.Minute)
			e.run(t, 0)
			if _, err := e.st.MarkRead(context.Background(), tm.bob.ID, tm.ch.ID, m.Seq); err != nil {
				t.Fatal(err)
			}
			if _, err := e.st.MarkRead(context.Background(), tm.bob.ID, tm.dm.ID, dm.Seq); err != nil {
				t.Fatal(err)
			}
			e.clk.Advance(20 * time.Minute)
			e.run(t, 0)
			if msgs := e.mail.Messages(t); len(msgs) != 0 {
				t.Fatalf("emails after reading in time: %+v", msgs)
			}
		})
	}
}

// TestEmailPreferenceAndPresence: off sends nothing; an online user gets
// nothing until they are offline; an hourly user waits an hour.
func TestEmailPreferenceAndPresence(t *testing.T) {
	for _, d := range dialects {
		t.Run(d, func(t *testing.T) {
			e := newEnv(t, d)
			tm := newTeam(t, e.st)
			ctx := context.Background()
			if _, err := e.st.SetNotifyPrefs(ctx, tm.bob.ID, parley.NotifyPrefs{Mode: parley.NotifyOff, IntervalSeconds: 900}); err != nil {
				t.Fatal(err)
			}
			storetest.MustPost(t, e.st, tm.ann, tm.dm, "are you there?")
			e.clk.Advance(time.Hour)
			e.run(t, 0)

			if _, err := e.st.SetNotifyPrefs(ctx, tm.bob.ID, parley.NotifyPrefs{Mode: parley.NotifyOn, IntervalSeconds: 3600}); err != nil {
				t.Fatal(err)
			}
			e.online.Store(tm.bob.ID, true)
			e.run(t, 0) // online
			e.online.Delete(tm.bob.ID)
			e.run(t, 1)
			if msgs := e.mail.Messages(t); len(msgs) != 1 || msgs[0].Subject != "1 new direct message in Acme" {
				t.Fatalf("emails: %+v", msgs)
			}
			storetest.MustPost(t, e.st, tm.ann, tm.dm, "still?")
			e.clk.Advance(30 * time.Minute)
			e.run(t, 0) // hourly
			e.clk.Advance(31 * time.Minute)
			e.run(t, 1)
		})
	}
}

var linkRE = regexp.MustCompile(`https?://[^\s"<>]+/api/v1/unsubscribe/[A-Za-z0-9_.\-]+`)

// TestEmailUnsubscribe follows the email's link: GET shows a confirm
// page and changes nothing, POST turns email off without a login, and no
// email follows. A forged token is 404.
func TestEmailUnsubscribe(t *testing.T) {
	for _, d := range dialects {
		t.Run(d, func(t *testing.T) {
			e := newEnv(t, d)
			tm := newTeam(t, e.st)
			ctx := context.Background()
			storetest.MustPost(t, e.st, tm.ann, tm.dm, "hello")
			e.clk.Advance(16 * time.Minute)
			e.run(t, 1)
			msgs := e.mail.Messages(t)
			m := e.mail.Message(t, msgs[0].ID)
			link := linkRE.FindString(m.HTML)
			if link == "" || link != linkRE.FindString(m.Text) {
				t.Fatalf("no unsubscribe link, or two different ones:\n%s\n%s", m.Text, m.HTML)
			}

			resp, err := http.Get(link)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if resp.StatusCode != 200 || !strings.Contains(body, `<form method="post">`) {
				t.Fatalf("GET %s: %s\n%s", link, resp.Status, body)
			}
			if p, _ := e.st.NotifyPrefs(ctx, tm.bob.ID); p.Mode != parley.NotifyOn {
				t.Fatalf("GET changed the preference: %+v", p)
			}
			// A mail client's one-click unsubscribe (RFC 8058).
			resp, err = http.Post(link, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
			if err != nil {
				t.Fatal(err)
			}
			if body := readAll(t, resp); resp.StatusCode != 200 || !strings.Contains(body, "Unsubscribed") {
				t.Fatalf("POST %s: %s\n%s", link, resp.Status, body)
			}
			if p, _ := e.st.NotifyPrefs(ctx, tm.bob.ID); p.Mode != parley.NotifyOff {
				t.Fatalf("after unsubscribing: %+v", p)
			}
			storetest.MustPost(t, e.st, tm.ann, tm.dm, "hello again")
			e.clk.Advance(time.Hour)
			e.run(t, 0)

			// Another user's id with bob's signature is refused.
			forged := e.api.URL + "/api/v1/unsubscribe/" + strings.Split(notify.UnsubscribeToken(secret, tm.ann.ID), ".")[0] +
				"." + strings.Split(link[strings.LastIndex(link, "/")+1:], ".")[1]
			resp, err = http.Post(forged, "text/plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			if resp.StatusCode != http.StatusNotFound {
				t.Fatalf("forged token: %s", resp.Status)
			}
			if p, _ := e.st.NotifyPrefs(ctx, tm.ann.ID); p.Mode != parley.NotifyOn {
				t.Fatalf("forged token changed ann's preference: %+v", p)
			}
		})
	}
}

// TestEmailOneSender: three notifiers (three nodes) on one PostgreSQL
// database scan at once; every user gets exactly one email.
func TestEmailOneSender(t *testing.T) {
	e := &env{mail: mailtest.Start(t), clk: &clock{}}
	url := testpg.New(t)
	stores := []*sqlstore.Store{openStore(t, "postgres", url), openStore(t, "postgres", url), openStore(t, "postgres", url)}
	e.st = stores[0]
	e.api = httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(e.api.Close)
	const users = 5
	for range users {
		tm := newTeam(t, e.st)
		storetest.MustPost(t, e.st, tm.ann, tm.ch, "@"+tm.bob.Handle+" hi")
		storetest.MustPost(t, e.st, tm.bob, tm.dm, "hi ann") // ann gets a DM too
	}
	e.clk.Advance(16 * time.Minute)
	var sent atomic.Int64
	var wg sync.WaitGroup
	for i, st := range stores {
		n := newNotifier(t, e, st, "node-"+string(rune('a'+i)))
		for range 2 { // and each node twice
			wg.Add(1)
			go func() {
				defer wg.Done()
				k, err := n.RunOnce(context.Background())
				if err != nil {
					t.Error(err)
				}
				sent.Add(int64(k))
			}()
		}
	}
	wg.Wait()
	msgs := e.mail.Messages(t)
	if sent.Load() != 2*users || len(msgs) != 2*users {
		t.Fatalf("sent %d, mailpit has %d, want %d", sent.Load(), len(msgs), 2*users)
	}
	to := map[string]int{}
	for _, m := range msgs {
		to[m.To[0].Address]++
	}
	for addr, k := range to {
		if k != 1 {
			t.Errorf("%s got %d emails", addr, k)
		}
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := io.Copy(&b, resp.Body); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
