package shardstore_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"parley"
	"parley/httpapi"
	"parley/internal/testpg"
	"parley/shardstore"
	"parley/storetest"
	"parley/tenantdir"

	dto "github.com/prometheus/client_model/go"
)

func bg() context.Context { return context.Background() }

// twoShards returns a cluster with owner's two workspaces, placed by the
// catalogue on two different shards.
func twoShards(t *testing.T, opts ...func(*shardstore.Config)) (c *cluster, owner *parley.User, w1, w2 *parley.Workspace) {
	t.Helper()
	c = newCluster(t, &storetest.Recorder{}, opts...)
	owner = storetest.MustUser(t, c.r, "owner")
	w1 = storetest.MustWorkspace(t, c.r, owner)
	w2 = storetest.MustWorkspace(t, c.r, owner)
	if a, b := c.shardOf(t, w1.ID), c.shardOf(t, w2.ID); a == b {
		t.Fatalf("both workspaces placed on %s", a)
	}
	return c, owner, w1, w2
}

// TestLoginAndBootAcrossShards: a user whose two workspaces are on two
// shards logs in, lists both, boots each, sees the users of both, and a
// profile change reaches the copy of their row on the other shard.
func TestLoginAndBootAcrossShards(t *testing.T) {
	c, owner, w1, w2 := twoShards(t)
	r := c.r
	alice := storetest.MustUser(t, r, "alice")
	bob := storetest.MustUser(t, r, "bob")
	carol := storetest.MustUser(t, r, "carol")
	storetest.MustJoinWorkspace(t, r, w1, owner, alice)
	storetest.MustJoinWorkspace(t, r, w2, owner, alice)
	storetest.MustJoinWorkspace(t, r, w1, owner, bob)   // bob shares only w1 with alice
	storetest.MustJoinWorkspace(t, r, w2, owner, carol) // carol only w2

	// Login: credentials and sessions are the control database's.
	u, hash, err := r.UserCredentials(bg(), alice.Email)
	storetest.NoErr(t, err)
	if u.ID != alice.ID || hash == "" {
		t.Fatalf("credentials = %+v %q", u, hash)
	}
	storetest.NoErr(t, r.CreateSession(bg(), parley.Session{TokenHash: "tok-alice", UserID: alice.ID,
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}))
	sess, err := r.SessionByToken(bg(), "tok-alice")
	storetest.NoErr(t, err)
	if sess.UserID != alice.ID {
		t.Fatalf("session = %+v", sess)
	}
	me, err := r.GetMe(bg(), alice.ID)
	storetest.NoErr(t, err)
	if me.Email != alice.Email {
		t.Fatalf("me = %+v", me)
	}

	ws, err := r.ListWorkspaces(bg(), alice.ID)
	storetest.NoErr(t, err)
	if len(ws) != 2 || !has(ws, w1.ID) || !has(ws, w2.ID) {
		t.Fatalf("workspaces = %+v", ws)
	}
	for _, w := range []*parley.Workspace{w1, w2} {
		b, err := r.Boot(bg(), alice.ID, parley.BootQuery{WorkspaceID: w.ID})
		storetest.NoErr(t, err)
		if len(b.Channels) == 0 {
			t.Fatalf("boot of %s has no channel", w.ID)
		}
		for _, ch := range b.Channels {
			cw, err := r.ChannelWorkspace(bg(), ch.ID)
			if err != nil || cw != w.ID {
				t.Fatalf("boot of %s has channel %+v of %s (%v)", w.ID, ch, cw, err)
			}
		}
	}
	users, err := r.UsersBatch(bg(), alice.ID, []string{carol.ID, bob.ID, "U-nobody"})
	storetest.NoErr(t, err)
	if len(users) != 2 || users[0].ID != carol.ID || users[1].ID != bob.ID {
		t.Fatalf("users batch = %+v", users)
	}
	// bob shares nothing with carol: carol is not his to see.
	users, err = r.UsersBatch(bg(), bob.ID, []string{carol.ID})
	storetest.NoErr(t, err)
	if len(users) != 0 {
		t.Fatalf("bob sees %+v", users)
	}

	// A profile change is made on every shard holding alice's copy.
	name := "Alice Renamed"
	_, err = r.UpdateMe(bg(), alice.ID, parley.UserPatch{Name: &name})
	storetest.NoErr(t, err)
	for _, w := range []*parley.Workspace{w1, w2} {
		got, err := r.WorkspaceUsers(bg(), w.ID, []string{alice.ID})
		storetest.NoErr(t, err)
		if len(got) != 1 || got[0].Name != name {
			t.Fatalf("alice in %s (shard %s) = %+v", w.ID, c.shardOf(t, w.ID), got)
		}
	}

	// Deactivated by an admin of the workspace on the other shard: the
	// session in the control database is revoked.
	other := w2
	if c.shardOf(t, w1.ID) != c.shards[0] {
		other = w1
	}
	if c.shardOf(t, other.ID) == c.shards[0] {
		t.Fatalf("no workspace off the default shard")
	}
	_, err = r.DeactivateUser(bg(), owner.ID, other.ID, alice.ID)
	storetest.NoErr(t, err)
	_, err = r.SessionByToken(bg(), "tok-alice")
	storetest.Code(t, err, parley.EUNAUTHORIZED)
}

func has(ws []parley.Workspace, id string) bool {
	for _, w := range ws {
		if w.ID == id {
			return true
		}
	}
	return false
}

// TestCrossWorkspaceRefusedAcrossShards: a member of one workspace gets
// nothing of another workspace on another shard.
func TestCrossWorkspaceRefusedAcrossShards(t *testing.T) {
	c, owner, w1, w2 := twoShards(t)
	r := c.r
	mallory := storetest.MustUser(t, r, "mallory")
	storetest.MustJoinWorkspace(t, r, w1, owner, mallory)
	secret := storetest.MustChannel(t, r, w2, owner, "plans", parley.KindPublic)
	msg := storetest.MustPost(t, r, owner, secret, "the plan")

	_, err := r.GetChannel(bg(), mallory.ID, secret.ID)
	storetest.Code(t, err, parley.ENOTFOUND)
	_, _, err = r.PostMessage(bg(), mallory.ID, secret.ID, parley.NewMessage{Text: "hi"})
	storetest.Code(t, err, parley.ENOTFOUND)
	_, err = r.ListMessages(bg(), mallory.ID, secret.ID, parley.HistoryQuery{Limit: 10})
	storetest.Code(t, err, parley.ENOTFOUND)
	_, err = r.GetMessage(bg(), mallory.ID, msg.ID)
	storetest.Code(t, err, parley.ENOTFOUND)
	_, err = r.AddReaction(bg(), mallory.ID, msg.ID, "eyes")
	storetest.Code(t, err, parley.ENOTFOUND)
	_, err = r.Boot(bg(), mallory.ID, parley.BootQuery{WorkspaceID: w2.ID})
	storetest.Code(t, err, parley.ENOTFOUND)
	_, err = r.JoinChannel(bg(), mallory.ID, secret.ID)
	storetest.Code(t, err, parley.ENOTFOUND)
	_, err = r.CreateInvite(bg(), mallory.ID, w2.ID, parley.InviteParams{})
	if code := parley.ErrorCode(err); code != parley.ENOTFOUND && code != parley.EFORBIDDEN {
		t.Fatalf("invite to another workspace: %v", err)
	}
	// A boot of mallory's workspace naming the other shard's channel.
	_, err = r.Boot(bg(), mallory.ID, parley.BootQuery{WorkspaceID: w1.ID, ChannelID: secret.ID})
	storetest.Code(t, err, parley.ENOTFOUND)
	res, err := r.Sync(bg(), mallory.ID, map[string]int64{secret.ID: 0})
	storetest.NoErr(t, err)
	if res[secret.ID].Error != parley.ENOTFOUND {
		t.Fatalf("sync of another workspace's channel = %+v", res)
	}
	users, err := r.UsersBatch(bg(), mallory.ID, []string{owner.ID})
	storetest.NoErr(t, err)
	if len(users) != 1 { // they share w1
		t.Fatalf("users = %+v", users)
	}
}

// TestReadOnlyRefusesWrites: a read-only workspace answers writes with 503
// and Retry-After (through the HTTP API) while reads work, and the other
// workspaces write on; unfrozen, it writes again.
func TestReadOnlyRefusesWrites(t *testing.T) {
	c := newCluster(t, &storetest.Recorder{})
	api := httptest.NewServer(httpapi.New(httpapi.Config{Store: c.r, Directory: c.dirQueries(t), Rates: parley.LiveRatesOff()}).Handler())
	t.Cleanup(api.Close)
	var signup struct {
		User  parley.User `json:"user"`
		Token string      `json:"token"`
	}
	call(t, api.URL, "", "POST", "/auth/signup", map[string]string{"email": "ro@example.com", "password": "correct horse battery",
		"name": "Ro", "handle": "ro"}, http.StatusCreated, &signup)
	owner := &signup.User
	w1 := storetest.MustWorkspace(t, c.r, owner)
	w2 := storetest.MustWorkspace(t, c.r, owner)
	ch2 := storetest.MustChannel(t, c.r, w2, owner, "frozen", parley.KindPublic)
	ch1 := storetest.MustChannel(t, c.r, w1, owner, "open", parley.KindPublic)
	storetest.MustPost(t, c.r, owner, ch2, "before")

	rec, err := c.dir.cat.Freeze(bg(), w2.ID)
	storetest.NoErr(t, err)
	waitFor(t, 10*time.Second, "the client to hear read_only", func() bool {
		got, err := c.dir.client.Lookup(bg(), w2.ID)
		return err == nil && got.Version >= rec.Version && got.Status == tenantdir.StatusReadOnly
	})

	resp := call(t, api.URL, signup.Token, "POST", "/channels/"+ch2.ID+"/messages", map[string]string{"text": "during"},
		http.StatusServiceUnavailable, nil)
	if resp.Header.Get("Retry-After") == "" {
		t.Fatalf("503 without Retry-After: %v", resp.Header)
	}
	_, _, err = c.r.PostMessage(bg(), owner.ID, ch2.ID, parley.NewMessage{Text: "during"})
	var ro *shardstore.ReadOnlyError
	if !errors.As(err, &ro) || parley.ErrorCode(err) != parley.EUNAVAILABLE || ro.RetryAfter() <= 0 {
		t.Fatalf("post to a read-only workspace: %v", err)
	}
	_, err = c.r.CreateChannel(bg(), owner.ID, w2.ID, parley.NewChannel{Name: "new", Kind: parley.KindPublic})
	storetest.Code(t, err, parley.EUNAVAILABLE)
	_, err = c.r.MarkRead(bg(), owner.ID, ch2.ID, 1)
	storetest.Code(t, err, parley.EUNAVAILABLE)

	// Reads work.
	var page parley.MessagePage
	call(t, api.URL, signup.Token, "GET", "/channels/"+ch2.ID+"/messages?limit=10", nil, http.StatusOK, &page)
	if len(page.Messages) != 1 || page.Messages[0].Text != "before" {
		t.Fatalf("history = %+v", page)
	}
	_, err = c.r.Boot(bg(), owner.ID, parley.BootQuery{WorkspaceID: w2.ID})
	storetest.NoErr(t, err)
	// The other workspace writes.
	storetest.MustPost(t, c.r, owner, ch1, "elsewhere")

	rec, err = c.dir.cat.Unfreeze(bg(), w2.ID)
	storetest.NoErr(t, err)
	waitFor(t, 10*time.Second, "the client to hear active", func() bool {
		got, err := c.dir.client.Lookup(bg(), w2.ID)
		return err == nil && got.Version >= rec.Version
	})
	call(t, api.URL, signup.Token, "POST", "/channels/"+ch2.ID+"/messages", map[string]string{"text": "after"},
		http.StatusCreated, nil)
}

// dirQueries is the default shard's directory reads (httpapi requires
// one; these tests do not use it).
func (c *cluster) dirQueries(t *testing.T) parley.DirectoryQueries {
	s, err := c.r.Shard(bg(), c.shards[0])
	storetest.NoErr(t, err)
	return s.Directory()
}

// call makes an API request and checks its status; out, when set, gets
// the JSON body.
func call(t *testing.T, base, token, method, path string, body any, want int, out any) *http.Response {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, base+httpapi.Prefix+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, buf.String(), want)
	}
	if out != nil {
		if err := json.Unmarshal(buf.Bytes(), out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, buf.String(), err)
		}
	}
	return resp
}

// TestShardDownFailsOnlyItsWorkspaces: with one shard's database refusing
// connections, its workspace's calls fail with 503 while the workspaces
// on the other shards (and login) keep working; back up, it works again.
func TestShardDownFailsOnlyItsWorkspaces(t *testing.T) {
	c, owner, w1, w2 := twoShards(t)
	r := c.r
	ch1 := storetest.MustChannel(t, r, w1, owner, "one", parley.KindPublic)
	ch2 := storetest.MustChannel(t, r, w2, owner, "two", parley.KindPublic)
	storetest.MustPost(t, r, owner, ch2, "before")
	down := ch2
	up := ch1
	downWS, upWS := w2, w1
	if c.shardOf(t, w2.ID) == c.shards[0] { // keep the control database up
		down, up, downWS, upWS = ch1, ch2, w1, w2
	}
	downShard := c.shardOf(t, downWS.ID)
	dsn := c.dsns[indexOf(c.shards, downShard)]
	setConnections(t, dsn, false)
	t.Cleanup(func() { setConnections(t, dsn, true) })

	_, _, err := r.PostMessage(bg(), owner.ID, down.ID, parley.NewMessage{Text: "while down"})
	storetest.Code(t, err, parley.EUNAVAILABLE)
	_, err = r.ListMessages(bg(), owner.ID, down.ID, parley.HistoryQuery{Limit: 5})
	storetest.Code(t, err, parley.EUNAVAILABLE)
	_, err = r.Boot(bg(), owner.ID, parley.BootQuery{WorkspaceID: downWS.ID})
	storetest.Code(t, err, parley.EUNAVAILABLE)

	for i := range 20 { // the other shard keeps working, however often the down one fails
		storetest.MustPost(t, r, owner, up, "still up")
		_, _, err := r.PostMessage(bg(), owner.ID, down.ID, parley.NewMessage{Text: "down", ClientMsgID: "d" + string(rune('a'+i))})
		storetest.Code(t, err, parley.EUNAVAILABLE)
	}
	_, err = r.Boot(bg(), owner.ID, parley.BootQuery{WorkspaceID: upWS.ID})
	storetest.NoErr(t, err)
	_, err = r.GetMe(bg(), owner.ID)
	storetest.NoErr(t, err)
	ws, err := r.ListWorkspaces(bg(), owner.ID)
	storetest.NoErr(t, err)
	if !has(ws, upWS.ID) {
		t.Fatalf("workspaces while a shard is down = %+v", ws)
	}
	g, err := r.Guard(bg(), downShard)
	storetest.NoErr(t, err)
	upGuard, err := r.Guard(bg(), c.shardOf(t, upWS.ID))
	storetest.NoErr(t, err)
	if upGuard.State() != "closed" {
		t.Fatalf("the healthy shard's breaker is %s", upGuard.State())
	}
	t.Logf("down shard's breaker: %s", g.State())

	setConnections(t, dsn, true)
	waitFor(t, 30*time.Second, "the shard to serve again", func() bool {
		_, _, err := r.PostMessage(bg(), owner.ID, down.ID, parley.NewMessage{Text: "back", ClientMsgID: "back"})
		return err == nil
	})
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// setConnections lets a database take connections, or refuses them and
// ends those it has: the shard is down for its clients.
func setConnections(t *testing.T, dsn string, allow bool) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	db, err := sql.Open("pgx", testpg.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	flag := "false"
	if allow {
		flag = "true"
	}
	if _, err := db.ExecContext(bg(), "ALTER DATABASE "+name+" ALLOW_CONNECTIONS "+flag); err != nil {
		t.Fatalf("set connections of %s: %v", name, err)
	}
	if !allow {
		if _, err := db.ExecContext(bg(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, name); err != nil {
			t.Fatalf("end connections of %s: %v", name, err)
		}
	}
}

// TestUnknownIDs: ids no shard has are 404, malformed ones without asking
// any shard; a workspace the directory does not know falls back to the
// default shard (which does not have it either). A well-formed unknown id
// is remembered for the negative TTL: its repeats ask no shard until then,
// one search per TTL.
func TestUnknownIDs(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	const ttl = 5 * time.Second
	c, owner, _, _ := twoShards(t, func(cfg *shardstore.Config) {
		cfg.NegativeTTL = ttl
		cfg.Now = func() time.Time { return time.Unix(0, clock.Load()) }
	})
	r := c.r
	misses := func() float64 { return counterValue(t, c.reg, "parley_shardstore_id_misses_total") }
	hits := func() float64 { return counterValue(t, c.reg, "parley_shardstore_id_negative_hits_total") }
	m0 := misses()
	_, err := r.GetChannel(bg(), owner.ID, "C0000000000000000000000000")
	storetest.Code(t, err, parley.ENOTFOUND)
	_, err = r.GetMessage(bg(), owner.ID, "M0000000000000000000000000")
	storetest.Code(t, err, parley.ENOTFOUND)
	_, err = r.FollowThread(bg(), owner.ID, "M0000000000000000000000001")
	storetest.Code(t, err, parley.ENOTFOUND)
	_, err = r.GetWorkspace(bg(), owner.ID, "W0000000000000000000000000")
	storetest.Code(t, err, parley.ENOTFOUND)
	_, err = r.Boot(bg(), owner.ID, parley.BootQuery{WorkspaceID: "W0000000000000000000000000"})
	storetest.Code(t, err, parley.ENOTFOUND)
	_, err = r.AcceptInvite(bg(), owner.ID, "no-such-code")
	storetest.Code(t, err, parley.ENOTFOUND)
	_, err = r.InvitePreview(bg(), "no-such-code")
	storetest.Code(t, err, parley.ENOTFOUND)
	member, err := r.ChannelMember(bg(), owner.ID, "C0000000000000000000000000")
	if err != nil || member {
		t.Fatalf("member of an unknown channel = %v, %v", member, err)
	}
	if got := misses(); got != m0+3 { // the channel once, the two messages
		t.Fatalf("id misses = %v, want %v", got, m0+3)
	}

	m1, h1 := misses(), hits()
	for _, bad := range []string{"", "C\x00x", strings.Repeat("C", 100_000), "../etc", "C 1", "-1"} {
		_, err := r.GetChannel(bg(), owner.ID, bad)
		storetest.Code(t, err, parley.ENOTFOUND)
		_, err = r.GetWorkspace(bg(), owner.ID, bad)
		storetest.Code(t, err, parley.ENOTFOUND)
		_, err = r.ListMessages(bg(), owner.ID, bad, parley.HistoryQuery{Limit: 1})
		storetest.Code(t, err, parley.ENOTFOUND)
	}
	if got := misses(); got != m1+1 {
		// "-1" has an id's shape: GetChannel looks for it, and
		// ListMessages finds it in the negative cache; the others are
		// not looked for.
		t.Fatalf("id misses = %v, want %v", got, m1+1)
	}
	if got := hits(); got != h1+1 {
		t.Fatalf("negative hits = %v, want %v", got, h1+1)
	}

	// Repeats of an unknown id: one search per TTL, however many.
	const unknown = "C0000000000000000000000042"
	m2 := misses()
	for round := range 3 {
		for range 50 {
			_, err := r.ListMessages(bg(), owner.ID, unknown, parley.HistoryQuery{Limit: 1})
			storetest.Code(t, err, parley.ENOTFOUND)
		}
		if got := misses(); got != m2+float64(round+1) {
			t.Fatalf("round %d: id misses = %v, want %v (one search per TTL)", round, got, m2+float64(round+1))
		}
		clock.Add(int64(ttl - time.Millisecond))
		_, err := r.GetChannel(bg(), owner.ID, unknown) // still within the TTL
		storetest.Code(t, err, parley.ENOTFOUND)
		if got := misses(); got != m2+float64(round+1) {
			t.Fatalf("round %d: a search before the TTL ran out", round)
		}
		clock.Add(int64(2 * time.Millisecond))
	}
	if got := hits(); got < h1+1+3*50 {
		t.Fatalf("negative hits = %v, want at least %v", got, h1+1+3*50)
	}
	// Webhook ids (posted to by anyone holding a hook URL) and bot ids
	// likewise.
	m3 := misses()
	for range 20 {
		_, err := r.WebhookByID(bg(), "H0000000000000000000000042")
		storetest.Code(t, err, parley.ENOTFOUND)
		_, err = r.BotWorkspace(bg(), "U0000000000000000000000042")
		storetest.Code(t, err, parley.ENOTFOUND)
	}
	if got := misses(); got != m3+2 {
		t.Fatalf("id misses = %v, want %v (one per unknown webhook or bot id)", got, m3+2)
	}
}

// TestUnknownIDNotRememberedWhileAShardFails: an id not found while a
// shard did not answer is 503 and not remembered (that shard may have it):
// each try searches again, and once every shard answers not found it is
// remembered.
func TestUnknownIDNotRememberedWhileAShardFails(t *testing.T) {
	c, owner, w1, w2 := twoShards(t)
	downWS := w2
	if c.shardOf(t, w2.ID) == c.shards[0] { // keep the control database up
		downWS = w1
	}
	dsn := c.dsns[indexOf(c.shards, c.shardOf(t, downWS.ID))]
	misses := func() float64 { return counterValue(t, c.reg, "parley_shardstore_id_misses_total") }
	const id = "C0000000000000000000000077"
	setConnections(t, dsn, false)
	t.Cleanup(func() { setConnections(t, dsn, true) })
	m0 := misses()
	for i := range 3 {
		_, err := c.r.GetChannel(bg(), owner.ID, id)
		storetest.Code(t, err, parley.EUNAVAILABLE)
		if got := misses(); got != m0+float64(i+1) {
			t.Fatalf("try %d: id misses = %v, want %v (a failed search is not remembered)", i, got, m0+float64(i+1))
		}
	}
	setConnections(t, dsn, true)
	waitFor(t, 30*time.Second, "every shard to answer", func() bool {
		_, err := c.r.GetChannel(bg(), owner.ID, id)
		return parley.ErrorCode(err) == parley.ENOTFOUND
	})
	m1 := misses()
	_, err := c.r.GetChannel(bg(), owner.ID, id)
	storetest.Code(t, err, parley.ENOTFOUND)
	if got := misses(); got != m1 {
		t.Fatalf("id misses = %v, want %v: a not found from every shard is remembered", got, m1)
	}
}

func counterValue(t *testing.T, reg interface {
	Gather() ([]*dto.MetricFamily, error)
}, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	storetest.NoErr(t, err)
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// TestMovingWritesToSource: while a workspace is moving its writes go to
// the source shard (the target gets nothing from the router), reads too;
// once the move completes the router follows the directory to the target.
func TestMovingWritesToSource(t *testing.T) {
	c, owner, w1, _ := twoShards(t)
	ch := storetest.MustChannel(t, c.r, w1, owner, "moving", parley.KindPublic)
	src := c.shardOf(t, w1.ID)
	dst := c.shards[(indexOf(c.shards, src)+1)%len(c.shards)]
	rec, err := c.dir.cat.BeginMove(bg(), w1.ID, dst)
	storetest.NoErr(t, err)
	waitFor(t, 10*time.Second, "the client to hear moving", func() bool {
		got, err := c.dir.client.Lookup(bg(), w1.ID)
		return err == nil && got.Version >= rec.Version && got.Status == tenantdir.StatusMoving
	})
	storetest.MustPost(t, c.r, owner, ch, "during the copy")
	if n := messagesIn(t, c.dsns[indexOf(c.shards, src)], ch.ID); n != 1 {
		t.Fatalf("source shard has %d messages of the channel, want 1", n)
	}
	if n := messagesIn(t, c.dsns[indexOf(c.shards, dst)], ch.ID); n != 0 {
		t.Fatalf("target shard has %d messages of the channel, want 0", n)
	}
	page, err := c.r.ListMessages(bg(), owner.ID, ch.ID, parley.HistoryQuery{Limit: 10})
	storetest.NoErr(t, err)
	if len(page.Messages) != 1 {
		t.Fatalf("history while moving = %+v", page)
	}
	// Completed (with no mover to copy the rows, the target has none of
	// the workspace): the router now asks the target, which has not got it.
	rec, err = c.dir.cat.Freeze(bg(), w1.ID)
	storetest.NoErr(t, err)
	rec, err = c.dir.cat.CompleteMove(bg(), w1.ID)
	storetest.NoErr(t, err)
	waitFor(t, 10*time.Second, "the client to hear the switch", func() bool {
		got, err := c.dir.client.Lookup(bg(), w1.ID)
		return err == nil && got.Version >= rec.Version && got.ShardID == dst
	})
	_, err = c.r.ListMessages(bg(), owner.ID, ch.ID, parley.HistoryQuery{Limit: 10})
	storetest.Code(t, err, parley.ENOTFOUND)
}

// messagesIn counts a channel's messages in one shard's database.
func messagesIn(t *testing.T, dsn, channelID string) int {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(bg(), `SELECT COUNT(*) FROM messages WHERE channel_id = $1`, channelID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// exportSink keeps what an export streams.
type exportSink struct {
	ws       *parley.Workspace
	channels []string
	messages []string
}

func (s *exportSink) Workspace(ws *parley.Workspace) error { s.ws = ws; return nil }
func (s *exportSink) Users([]parley.ExportUser) error      { return nil }
func (s *exportSink) Channel(ch *parley.ExportChannel) error {
	s.channels = append(s.channels, ch.Name)
	return nil
}
func (s *exportSink) Message(m *parley.ExportMessage) error {
	s.messages = append(s.messages, m.Text)
	return nil
}

// TestExportFromItsShard: a workspace off the default shard is found by
// its slug (as `parley export` finds it) and exported from its own shard;
// a stranger may not export it.
func TestExportFromItsShard(t *testing.T) {
	c, owner, w1, w2 := twoShards(t)
	w := w1
	if c.shardOf(t, w1.ID) == c.shards[0] {
		w = w2
	}
	if id, o, err := c.r.WorkspaceOwner(bg(), w.Slug); err != nil || id != w.ID || o != owner.ID {
		t.Fatalf("workspace owner of %s = %q, %q, %v; want %s, %s", w.Slug, id, o, err, w.ID, owner.ID)
	}
	if _, _, err := c.r.WorkspaceOwner(bg(), "no-such-team"); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("workspace owner of a slug no shard has: %v", err)
	}
	if _, _, err := c.r.WorkspaceOwner(bg(), "Not A Slug!"); err == nil {
		t.Fatal("workspace owner of an invalid slug: no error")
	}
	ch := storetest.MustChannel(t, c.r, w, owner, "exported", parley.KindPublic)
	storetest.MustPost(t, c.r, owner, ch, "carried out")
	sink := &exportSink{}
	storetest.NoErr(t, c.r.ExportWorkspace(bg(), owner.ID, w.ID, parley.ExportOptions{}, sink))
	if sink.ws == nil || sink.ws.ID != w.ID || len(sink.messages) != 1 || sink.messages[0] != "carried out" {
		t.Fatalf("export = %+v", sink)
	}
	stranger := storetest.MustUser(t, c.r, "stranger")
	err := c.r.ExportWorkspace(bg(), stranger.ID, w.ID, parley.ExportOptions{}, &exportSink{})
	if code := parley.ErrorCode(err); code != parley.ENOTFOUND && code != parley.EFORBIDDEN {
		t.Fatalf("a stranger's export: %v", err)
	}
}

// TestStaleCopyRepaired: a profile change that could not reach a shard
// (its database down) reaches it once it is back, from the control
// database's row; the call itself succeeded.
func TestStaleCopyRepaired(t *testing.T) {
	c, owner, w1, w2 := twoShards(t)
	other := w2
	if c.shardOf(t, w2.ID) == c.shards[0] {
		other = w1
	}
	dsn := c.dsns[indexOf(c.shards, c.shardOf(t, other.ID))]
	setConnections(t, dsn, false)
	t.Cleanup(func() { setConnections(t, dsn, true) })
	name := "Renamed While Down"
	u, err := c.r.UpdateMe(bg(), owner.ID, parley.UserPatch{Name: &name})
	storetest.NoErr(t, err)
	if u.Name != name {
		t.Fatalf("update = %+v", u)
	}
	if counterValue(t, c.reg, "parley_shardstore_user_sync_failures_total") == 0 {
		t.Fatal("the failed change was not counted")
	}
	setConnections(t, dsn, true)
	waitFor(t, 60*time.Second, "the copy on the shard that was down to be repaired", func() bool {
		got, err := c.r.WorkspaceUsers(bg(), other.ID, []string{owner.ID})
		return err == nil && len(got) == 1 && got[0].Name == name
	})
}
