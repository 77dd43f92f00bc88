package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"parley"
)

// The HTTP half of the client against the real API and store.

func TestSignupLoginLogout(t *testing.T) {
	e := newEnv(t, false)
	ctx := t.Context()
	c := New(e.srv.URL + "/")
	h := "carol-" + uniq()
	a, err := c.Signup(ctx, h+"@example.com", testPassword, "Carol", h)
	if err != nil {
		t.Fatal(err)
	}
	if a.Token == "" || c.Token() != a.Token || a.User.Handle != h {
		t.Fatalf("signup %+v, token %q", a, c.Token())
	}
	me, err := c.Me(ctx)
	if err != nil || me.ID != a.User.ID {
		t.Fatalf("me %+v %v", me, err)
	}
	if _, err := c.Signup(ctx, h+"@example.com", testPassword, "Carol", h); ErrorCode(err) != parley.ECONFLICT {
		t.Errorf("second signup: %v", err)
	}
	if err := c.Logout(ctx); err != nil || c.Token() != "" {
		t.Fatalf("logout %v, token %q", err, c.Token())
	}
	old := New(e.srv.URL, WithToken(a.Token))
	_, err = old.Me(ctx)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || ae.Code != parley.EUNAUTHORIZED || ae.Message == "" {
		t.Fatalf("revoked token: %v", err)
	}
	if _, err := c.Login(ctx, h+"@example.com", "wrong password"); ErrorCode(err) != parley.EUNAUTHORIZED {
		t.Errorf("bad login: %v", err)
	}
	if _, err := c.Login(ctx, h+"@example.com", testPassword); err != nil || c.Token() == "" {
		t.Fatalf("login %v", err)
	}
	if _, err := c.Me(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestWorkspacesChannelsMessages(t *testing.T) {
	e := newEnv(t, false)
	ctx := t.Context()
	alice, bob := e.mustAccount("alice"), e.mustAccount("bob")
	a, b := alice.Client, bob.Client

	ws, err := a.CreateWorkspace(ctx, "Acme", "acme-"+uniq())
	if err != nil || ws.Role != parley.RoleOwner {
		t.Fatalf("workspace %+v %v", ws, err)
	}
	inv, err := a.CreateInvite(ctx, ws.ID, parley.InviteParams{MaxUses: 5})
	if err != nil || inv.Code == "" {
		t.Fatalf("invite %+v %v", inv, err)
	}
	if got, err := b.AcceptInvite(ctx, inv.Code); err != nil || got.ID != ws.ID {
		t.Fatalf("accept %+v %v", got, err)
	}
	if list, err := b.ListWorkspaces(ctx); err != nil || len(list) != 1 {
		t.Fatalf("workspaces %v %v", list, err)
	}

	ch, err := a.CreateChannel(ctx, ws.ID, parley.NewChannel{Name: "dev-" + uniq(), Kind: parley.KindPublic, Topic: "t"})
	if err != nil || !ch.IsMember {
		t.Fatalf("channel %+v %v", ch, err)
	}
	page, err := b.ListChannels(ctx, ws.ID, parley.ChannelQuery{Limit: 10})
	if err != nil || !slices.ContainsFunc(page.Channels, func(c parley.Channel) bool { return c.ID == ch.ID }) {
		t.Fatalf("list channels %+v %v", page, err)
	}
	joined, err := b.JoinChannel(ctx, ch.ID)
	if err != nil || !joined.IsMember || joined.MemberCount != 2 {
		t.Fatalf("join %+v %v", joined, err)
	}
	if err := b.LeaveChannel(ctx, ch.ID); err != nil {
		t.Fatal(err)
	}
	if added, err := a.AddMembers(ctx, ch.ID, []string{bob.ID}); err != nil || added.MemberCount != 2 {
		t.Fatalf("add %+v %v", added, err)
	}
	if mp, err := a.ListMembers(ctx, ch.ID, "", 10); err != nil || len(mp.Members) != 2 {
		t.Fatalf("members %+v %v", mp, err)
	}

	// Posting: the same client_msg_id twice is the same message.
	m1, err := b.PostMessage(ctx, ch.ID, parley.NewMessage{Text: "hello @" + alice.Handle})
	if err != nil || m1.ClientMsgID == "" || m1.Seq == 0 {
		t.Fatalf("post %+v %v", m1, err)
	}
	again, err := b.PostMessage(ctx, ch.ID, parley.NewMessage{Text: "other text", ClientMsgID: m1.ClientMsgID})
	if err != nil || again.ID != m1.ID || again.Text != m1.Text {
		t.Fatalf("repeat post %+v %v", again, err)
	}
	m2, err := a.PostMessage(ctx, ch.ID, parley.NewMessage{Text: "reply", ThreadRootID: m1.ID})
	if err != nil {
		t.Fatal(err)
	}
	if rp, err := a.ListReplies(ctx, m1.ID, 0, 10); err != nil || len(rp.Messages) != 1 || rp.Messages[0].ID != m2.ID {
		t.Fatalf("replies %+v %v", rp, err)
	}
	if got, err := a.AddReaction(ctx, m1.ID, "thumbsup"); err != nil || len(got.Reactions) != 1 || !got.Reactions[0].Me {
		t.Fatalf("react %+v %v", got, err)
	}
	if _, err := a.Pin(ctx, m1.ID); err != nil {
		t.Fatal(err)
	}
	if pins, err := b.ListPins(ctx, ch.ID); err != nil || len(pins.Messages) != 1 {
		t.Fatalf("pins %+v %v", pins, err)
	}
	if ed, err := b.EditMessage(ctx, m1.ID, "edited"); err != nil || ed.Text != "edited" || ed.EditedAt == nil {
		t.Fatalf("edit %+v %v", ed, err)
	}
	hist, err := b.ListMessages(ctx, ch.ID, parley.HistoryQuery{Limit: 50})
	if err != nil || len(hist.Messages) != 1 || hist.Messages[0].ID != m1.ID {
		t.Fatalf("history %+v %v", hist, err) // the reply is in its thread
	}
	if got, err := b.GetMessage(ctx, m1.ID); err != nil || got.Text != "edited" {
		t.Fatalf("get message %+v %v", got, err)
	}

	// The event log and /sync agree.
	evs, err := b.ListEvents(ctx, ch.ID, 0, 200)
	if err != nil || len(evs.Events) < 6 {
		t.Fatalf("events %+v %v", evs, err)
	}
	for i, ev := range evs.Events {
		if ev.Seq != int64(i+1) || ev.ChannelID != ch.ID || ev.Type == "" || len(ev.Data) == 0 || ev.CreatedAt.IsZero() {
			t.Fatalf("event %d: %+v", i, ev)
		}
	}
	last := evs.Events[len(evs.Events)-1].Seq
	res, err := b.Sync(ctx, map[string]int64{ch.ID: last - 2, "Cnope": 0})
	if err != nil {
		t.Fatal(err)
	}
	if r := res[ch.ID]; len(r.Events) != 2 || r.Events[1].Seq != last {
		t.Errorf("sync %+v", r)
	}
	if r := res["Cnope"]; r.Error != parley.ENOTFOUND {
		t.Errorf("sync of an unknown channel: %+v", r)
	}
	if r, _ := b.Sync(ctx, map[string]int64{ch.ID: last}); r[ch.ID].Events == nil || len(r[ch.ID].Events) != 0 {
		t.Errorf("sync with nothing missed: %+v", r[ch.ID])
	}

	if rs, err := b.MarkRead(ctx, ch.ID, last); err != nil || rs.LastReadSeq != last {
		t.Fatalf("mark read %+v %v", rs, err)
	}
	if got, err := b.GetChannel(ctx, ch.ID); err != nil || got.LastReadSeq != last {
		t.Fatalf("get channel %+v %v", got, err)
	}
	users, err := a.UsersBatch(ctx, []string{bob.ID, "Unope"})
	if err != nil || len(users) != 1 || users[0].ID != bob.ID {
		t.Fatalf("users batch %+v %v", users, err)
	}
	if dir, err := a.ListUsers(ctx, ws.ID, parley.UserQuery{Q: "bob"}); err != nil || len(dir.Users) != 1 {
		t.Fatalf("directory %+v %v", dir, err)
	}
	dm, err := a.OpenDM(ctx, ws.ID, []string{bob.ID})
	if err != nil || dm.Kind != parley.KindDM {
		t.Fatalf("dm %+v %v", dm, err)
	}
	if dm2, err := b.OpenDM(ctx, ws.ID, []string{alice.ID}); err != nil || dm2.ID != dm.ID {
		t.Fatalf("dm again %+v %v", dm2, err)
	}
	if err := a.RemoveMember(ctx, ch.ID, bob.ID); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteMessage(ctx, m2.ID); err != nil {
		t.Fatal(err)
	}
	if up, err := a.UpdateChannel(ctx, ch.ID, parley.ChannelPatch{Topic: ptr("new")}); err != nil || up.Topic != "new" {
		t.Fatalf("update channel %+v %v", up, err)
	}
	if ar, err := a.ArchiveChannel(ctx, ch.ID); err != nil || ar.ArchivedAt == nil {
		t.Fatalf("archive %+v %v", ar, err)
	}
	_, err = a.PostMessage(ctx, ch.ID, parley.NewMessage{Text: "late"})
	if ErrorCode(err) != parley.ECONFLICT {
		t.Errorf("post into archived channel: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestVisibilityErrors(t *testing.T) {
	e := newEnv(t, false)
	ctx := t.Context()
	alice, eve := e.mustAccount("alice"), e.mustAccount("eve")
	ws := e.mustWorkspace(alice, eve)
	priv := e.mustChannel(ws, alice, parley.KindPrivate)
	pub := e.mustChannel(ws, alice, parley.KindPublic)
	_, err := eve.Client.GetChannel(ctx, priv.ID)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Code != parley.ENOTFOUND {
		t.Errorf("private channel: %v", err)
	}
	if _, err := eve.Client.PostMessage(ctx, pub.ID, parley.NewMessage{Text: "hi"}); ErrorCode(err) != parley.EFORBIDDEN {
		t.Errorf("post without joining: %v", err)
	}
	if _, err := eve.Client.ListEvents(ctx, pub.ID, 0, 10); err != nil {
		t.Errorf("public log: %v", err)
	}
	if _, err := New(e.srv.URL).Me(ctx); ErrorCode(err) != parley.EUNAUTHORIZED {
		t.Errorf("anonymous: %v", err)
	}
	if _, err := alice.Client.PostMessage(ctx, pub.ID, parley.NewMessage{Text: strings.Repeat("x", parley.MaxMessageLen+1)}); ErrorCode(err) != parley.ETOOLARGE {
		t.Errorf("too long: %v", err)
	}
}

// throttler answers the first n requests with status and Retry-After, then
// passes requests to next.
type throttler struct {
	n          atomic.Int32
	status     int
	retryAfter string
	seen       atomic.Int32
	next       http.Handler
}

func (h *throttler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.seen.Add(1)
	if h.n.Add(-1) >= 0 {
		if h.retryAfter != "" {
			w.Header().Set("Retry-After", h.retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(h.status)
		io.WriteString(w, `{"error":{"code":"rate_limited","message":"slow down"}}`)
		return
	}
	h.next.ServeHTTP(w, r)
}

func throttled(t *testing.T, e *env, n int32, status int, retryAfter string) (*throttler, string) {
	target, _ := url.Parse(e.srv.URL)
	h := &throttler{status: status, retryAfter: retryAfter, next: httputil.NewSingleHostReverseProxy(target)}
	h.n.Store(n)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv.URL
}

func TestRetriesThrottledIdempotentCalls(t *testing.T) {
	e := newEnv(t, false)
	alice := e.mustAccount("alice")
	ws := e.mustWorkspace(alice)
	ch := e.mustChannel(ws, alice, parley.KindPublic)
	h, base := throttled(t, e, 2, http.StatusTooManyRequests, "0")
	c := New(base, WithToken(alice.Token))
	m, err := c.PostMessage(t.Context(), ch.ID, parley.NewMessage{Text: "hi"})
	if err != nil || m.Text != "hi" {
		t.Fatalf("post %+v %v", m, err)
	}
	if n := h.seen.Load(); n != 3 {
		t.Errorf("%d attempts", n)
	}
}

func TestNoRetryForNonIdempotentCalls(t *testing.T) {
	e := newEnv(t, false)
	alice := e.mustAccount("alice")
	ws := e.mustWorkspace(alice)
	h, base := throttled(t, e, 1, http.StatusServiceUnavailable, "2")
	c := New(base, WithToken(alice.Token))
	_, err := c.CreateChannel(t.Context(), ws.ID, parley.NewChannel{Name: "x-" + uniq(), Kind: parley.KindPublic})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || ae.RetryAfter != 2*time.Second || ae.Code != parley.ERATELIMITED {
		t.Fatalf("err %v", err)
	}
	if n := h.seen.Load(); n != 1 {
		t.Errorf("%d attempts", n)
	}
}

func TestRetryAfterBeyondBudgetIsReturned(t *testing.T) {
	e := newEnv(t, false)
	alice := e.mustAccount("alice")
	h, base := throttled(t, e, 1, http.StatusTooManyRequests, "30")
	c := New(base, WithToken(alice.Token), WithRetry(3, time.Second))
	_, err := c.Me(t.Context())
	var ae *APIError
	if !errors.As(err, &ae) || ae.RetryAfter != 30*time.Second {
		t.Fatalf("err %v", err)
	}
	if n := h.seen.Load(); n != 1 {
		t.Errorf("%d attempts", n)
	}
	h.n.Store(5)
	if _, err := New(base, WithToken(alice.Token), WithRetry(0, time.Second)).Me(t.Context()); ErrorCode(err) != parley.ERATELIMITED {
		t.Errorf("retries disabled: %v", err)
	}
}

// A post whose response was lost is retried with the same client_msg_id
// and yields one message.
func TestPostRetryAfterLostResponseIsIdempotent(t *testing.T) {
	e := newEnv(t, false)
	alice := e.mustAccount("alice")
	ws := e.mustWorkspace(alice)
	ch := e.mustChannel(ws, alice, parley.KindPublic)
	var first atomic.Bool
	first.Store(true)
	api := e.srv.Config.Handler
	lossy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && first.CompareAndSwap(true, false) {
			api.ServeHTTP(httptest.NewRecorder(), r) // done, but the answer is lost
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(lossy.Close)
	c := New(lossy.URL, WithToken(alice.Token))
	m, err := c.PostMessage(t.Context(), ch.ID, parley.NewMessage{Text: "once"})
	if err != nil {
		t.Fatal(err)
	}
	hist, err := c.ListMessages(t.Context(), ch.ID, parley.HistoryQuery{})
	if err != nil || len(hist.Messages) != 1 || hist.Messages[0].ID != m.ID {
		t.Fatalf("history %+v %v", hist, err)
	}
}

func TestTransportFailureRetried(t *testing.T) {
	e := newEnv(t, false)
	alice := e.mustAccount("alice")
	var calls atomic.Int32
	api := e.srv.Config.Handler
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			panic(http.ErrAbortHandler) // the connection drops mid-request
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(flaky.Close)
	if _, err := New(flaky.URL, WithToken(alice.Token)).Me(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d calls", n)
	}
}

func TestNonContractErrorBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}))
	t.Cleanup(srv.Close)
	_, err := New(srv.URL).Me(context.Background())
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadGateway || ae.Code != "http_502" || ae.Message != "bad gateway" {
		t.Fatalf("err %#v", err)
	}
}

func TestURLs(t *testing.T) {
	for base, ws := range map[string]string{
		"http://h:1":        "ws://h:1/api/v1/gateway",
		"https://h/":        "wss://h/api/v1/gateway",
		"https://h/parley/": "wss://h/parley/api/v1/gateway",
	} {
		if got := New(base).WSURL(); got != ws {
			t.Errorf("%s: %s", base, got)
		}
	}
	if got := New("http://h", WithWSURL("ws://g/x")).WSURL(); got != "ws://g/x" {
		t.Errorf("override: %s", got)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"":                              0,
		"3":                             3 * time.Second,
		"-1":                            0,
		"soon":                          0,
		"Tue, 01 Jan 2030 00:00:05 GMT": 5 * time.Second,
	} {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("%q: %v, want %v", in, got, want)
		}
	}
}

func TestFallbackURLs(t *testing.T) {
	e := newEnv(t, true)
	alice := e.mustAccount("alice")
	ws := e.mustWorkspace(alice)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // its port now refuses connections
	c := New(dead.URL, WithToken(alice.Token), WithFallbackURLs(e.srv.URL), WithLogger(quietLogger()))
	if _, err := c.Me(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c.BaseURL() != e.srv.URL {
		t.Errorf("in use: %s", c.BaseURL())
	}
	// The gateway connection moves past the dead node too.
	res := connectAsync(t.Context(), c, ws.ID, ConnectOptions{Handler: func(Event) {}, MinBackoff: time.Millisecond})
	e.fake.accept(t).identify(t, alice.Token, ws.ID, "n1.x", alice.ID)
	if r := waitConnect(t, res); r.err != nil {
		t.Fatal(r.err)
	}
}
