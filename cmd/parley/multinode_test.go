package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"parley"
	pclient "parley/client"
	"parley/internal/faultproxy"
	"parley/internal/testpg"
)

// The multi-node test: three `parley serve` processes on one PostgreSQL
// database, their embedded NATS servers clustered over loopback routes,
// gateway clients spread over the three, posters writing through all of
// them — and one node killed with SIGKILL while the posts flow. Its clients
// must come back on the other nodes, and in the end every client must hold
// every event of its channels exactly once, in seq order: the same list as
// the channel's event log read back over HTTP, with no post after the kill
// to reveal an event the killed node committed but did not publish (the
// outbox relay brings it).

const (
	mnNodes          = 3
	mnClientsPerNode = 4
	mnPosters        = 3   // one per node
	mnPostsEach      = 100 // 300 messages in all
	mnKillAfter      = 100 // posts done before the kill
	mnKilled         = 0   // the node killed: the one the others first routed to
	mnDeadline       = 50 * time.Second
)

var clusterRe = regexp.MustCompile(`"msg":"bus started".*"cluster":"([^"]+)"`)

// startCluster starts the nodes one after another: the first routes to
// nobody, each later one to all those before it. Every pair thus has one
// explicit route, and the cluster survives the loss of any one node.
func startCluster(t *testing.T, db string) []*proc {
	t.Helper()
	var nodes []*proc
	var routes []string
	for i := range mnNodes {
		args := []string{"--listen", "127.0.0.1:0", "--admin", "off", "--db", db,
			"--node-id", fmt.Sprintf("mn%d", i), "--nats-cluster", "127.0.0.1:0"}
		if len(routes) > 0 {
			args = append(args, "--nats-routes", strings.Join(routes, ","))
		}
		p := startParley(t, args...)
		p.waitLog(t, `"msg":"bus started"`)
		m := clusterRe.FindStringSubmatch(p.stderr.String())
		if m == nil {
			t.Fatalf("node %d logged no cluster address:\n%s", i, p.stderr)
		}
		routes = append(routes, "nats://"+m[1])
		nodes = append(nodes, p)
	}
	// Each node has heard the others announce themselves: the routes carry
	// messages both ways between every pair.
	for _, p := range nodes {
		p.waitLog(t, fmt.Sprintf(`"live":%d`, mnNodes))
	}
	return nodes
}

// mnClient is one user's gateway connection and what it received.
type mnClient struct {
	user     seedUser
	home     int
	channels []string
	conn     *pclient.Conn

	mu     sync.Mutex
	events map[string][]pclient.Event // durable events of its channels, by channel
	other  int                        // durable events of other channels (directory copies)
}

func (c *mnClient) handle(ev pclient.Event) {
	if !ev.Durable() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.channels, ev.ChannelID) {
		c.other++
		return
	}
	c.events[ev.ChannelID] = append(c.events[ev.ChannelID], ev)
}

func (c *mnClient) seqs(ch string) []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int64, len(c.events[ch]))
	for i, ev := range c.events[ch] {
		out[i] = ev.Seq
	}
	return out
}

// bases returns the nodes' base URLs starting at first, for a client that
// prefers that node and falls back on the others in turn.
func bases(nodes []*proc, first int) []string {
	var out []string
	for i := range nodes {
		out = append(out, strings.TrimSuffix(nodes[(first+i)%len(nodes)].url, "/"))
	}
	return out
}

func newAPIClient(nodes []*proc, home int, token string) *pclient.Client {
	b := bases(nodes, home)
	return pclient.New(b[0], pclient.WithToken(token), pclient.WithFallbackURLs(b[1:]...),
		pclient.WithRetry(5, time.Second), pclient.WithLogger(quietLog()))
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// channelLog reads a channel's whole event log over HTTP.
func channelLog(ctx context.Context, c *pclient.Client, ch string) ([]parley.Event, error) {
	var out []parley.Event
	after := int64(0)
	for {
		page, err := c.ListEvents(ctx, ch, after, parley.MaxLimit)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Events...)
		if len(page.Events) == 0 || page.NextCursor == "" {
			return out, nil
		}
		after = page.Events[len(page.Events)-1].Seq
	}
}

func TestMultiNodeKill(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test: three processes and a kill; skipped with -short")
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), mnDeadline)
	defer cancel()
	db := testpg.New(t)

	users := mnNodes * mnClientsPerNode
	seedOut := runSeedCmd(t, "-", "--db", db, "--users", fmt.Sprint(users), "--channels", "3", "--out", "-")
	nodes := startCluster(t, db)
	t.Logf("seeded and started %d nodes in %s", mnNodes, time.Since(start).Round(time.Millisecond))

	// Clients: user k on node k / mnClientsPerNode, so that every node has
	// clients in every channel. Each tracks its channels from seq 0: the
	// first session's catch-up brings the whole log, then the live stream.
	clients := make([]*mnClient, users)
	for k, u := range seedOut.Users {
		c := &mnClient{user: u, home: k / mnClientsPerNode, channels: u.Channels, events: map[string][]pclient.Event{}}
		api := newAPIClient(nodes, c.home, u.Token)
		track := map[string]int64{}
		for _, ch := range u.Channels {
			track[ch] = 0
		}
		var urls []string
		for _, b := range bases(nodes, c.home) {
			urls = append(urls, "ws://"+strings.TrimPrefix(b, "http://")+gatewayPath)
		}
		conn, err := api.Connect(ctx, seedOut.WorkspaceID, pclient.ConnectOptions{
			Handler: c.handle, Channels: track, DeclaredOnly: true, URLs: urls,
			MinBackoff: 20 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, HandshakeTimeout: 5 * time.Second,
		})
		if err != nil {
			t.Fatalf("client %d connect: %v", k, err)
		}
		t.Cleanup(func() { conn.Close() })
		c.conn = conn
		clients[k] = c
	}

	// Posters: poster j posts through node j (falling back on the others),
	// each message as a member of its channel, round robin over channels.
	members := map[string][]seedUser{}
	for _, u := range seedOut.Users {
		for _, ch := range u.Channels {
			members[ch] = append(members[ch], u)
		}
	}
	posterClients := map[string]*pclient.Client{} // "<node>/<user>"
	posterClient := func(node int, u seedUser) *pclient.Client {
		key := fmt.Sprint(node, "/", u.ID)
		if c := posterClients[key]; c != nil {
			return c
		}
		c := newAPIClient(nodes, node, u.Token)
		posterClients[key] = c
		return c
	}
	type post struct {
		c  *pclient.Client
		ch string
	}
	plans := make([][]post, mnPosters)
	for j := range mnPosters {
		for i := range mnPostsEach {
			ch := seedOut.Channels[(i+j)%len(seedOut.Channels)]
			m := members[ch.ID]
			plans[j] = append(plans[j], post{posterClient(j, m[(i+j)%len(m)]), ch.ID})
		}
	}
	var posted atomic.Int64
	killNow := make(chan struct{})
	var killOnce sync.Once
	var wg sync.WaitGroup
	postErrs := make(chan error, mnPosters)
	for j := range mnPosters {
		wg.Go(func() {
			tick := time.NewTicker(10 * time.Millisecond) // a steady stream, not a burst
			defer tick.Stop()
			for i, p := range plans[j] {
				select {
				case <-tick.C:
				case <-ctx.Done():
					postErrs <- ctx.Err()
					return
				}
				text := fmt.Sprintf("poster %d message %d", j, i)
				if _, err := p.c.PostMessage(ctx, p.ch, parley.NewMessage{Text: text}); err != nil {
					postErrs <- fmt.Errorf("poster %d post %d: %w", j, i, err)
					return
				}
				if posted.Add(1) == mnKillAfter {
					killOnce.Do(func() { close(killNow) })
				}
			}
		})
	}

	select {
	case <-killNow:
	case <-ctx.Done():
		t.Fatalf("only %d posts before the deadline", posted.Load())
	}
	victim := nodes[mnKilled]
	if err := victim.cmd.Process.Kill(); err != nil { // SIGKILL: no goodbye, no drain
		t.Fatal(err)
	}
	<-victim.exited
	t.Logf("killed node %d after %d posts (%s)", mnKilled, posted.Load(), time.Since(start).Round(time.Millisecond))

	wg.Wait()
	close(postErrs)
	for err := range postErrs {
		t.Fatal(err)
	}
	// No fence: an event the killed node committed but never published is
	// in the log and in that node's outbox row; a survivor's relay
	// publishes it within relay_grace_ms + relay_interval_ms, and the
	// clients must get it without any later post revealing the gap
	// (docs/delivery.md).
	survivor := (mnKilled + 1) % mnNodes

	// The store's logs, read over HTTP from a live node.
	reader := newAPIClient(nodes, survivor, seedOut.Owner.Token)
	logs := map[string][]int64{}
	messages := 0
	for _, ch := range seedOut.Channels {
		evs, err := channelLog(ctx, reader, ch.ID)
		if err != nil {
			t.Fatalf("log of %s: %v", ch.Name, err)
		}
		for i, ev := range evs {
			if ev.Seq != int64(i+1) {
				t.Fatalf("log of %s: event %d has seq %d", ch.Name, i, ev.Seq)
			}
			logs[ch.ID] = append(logs[ch.ID], ev.Seq)
			if ev.Type == parley.EventMessageCreated {
				messages++
			}
		}
	}
	if want := mnPosters * mnPostsEach; messages != want {
		t.Fatalf("the logs hold %d messages, want %d (a post was lost or doubled)", messages, want)
	}

	// Every client ends with exactly its channels' logs.
	done := func(c *mnClient) bool {
		for _, ch := range c.channels {
			if len(c.seqs(ch)) < len(logs[ch]) {
				return false
			}
		}
		return true
	}
	for k, c := range clients {
		for !done(c) {
			if ctx.Err() != nil {
				for _, ch := range c.channels {
					t.Logf("client %d channel %s: %d of %d events", k, ch, len(c.seqs(ch)), len(logs[ch]))
				}
				t.Fatalf("client %d (home node %d, %+v) did not get every event in time", k, c.home, c.conn.Stats())
			}
			time.Sleep(10 * time.Millisecond) // polling, bounded by ctx
		}
	}
	moved := 0
	for k, c := range clients {
		for _, ch := range c.channels {
			if got := c.seqs(ch); !slices.Equal(got, logs[ch]) {
				t.Errorf("client %d channel %s: seqs %v, want 1…%d exactly once, in order", k, ch, got, len(logs[ch]))
			}
		}
		st := c.conn.Stats()
		if st.SGaps != 0 || st.GapsUnfillable != 0 {
			t.Errorf("client %d: %+v", k, st)
		}
		if c.home == mnKilled {
			if st.Reconnects == 0 || !c.conn.Connected() {
				t.Errorf("client %d of the killed node: connected %v, %+v", k, c.conn.Connected(), st)
			}
			moved++
			t.Logf("client %d moved off the killed node: %+v", k, st)
		}
	}
	if moved != mnClientsPerNode {
		t.Fatalf("%d clients on the killed node", moved)
	}
	t.Logf("%d clients, %d messages: all delivered exactly once, in order (%s)", users, messages,
		time.Since(start).Round(time.Millisecond))
	for i, p := range nodes {
		if i != mnKilled {
			p.stopQuietly(t)
		}
	}
}

// stopQuietly sends SIGTERM and waits for the exit, without the log checks
// of stop: after a peer's death the survivors rightly log route errors.
func (p *proc) stopQuietly(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		t.Error("parley did not exit within 15 s of SIGTERM")
	}
}

// TestCommitThenKill is the commit-then-crash case made certain rather than
// left to the timing of a kill: two `parley serve` processes on one
// PostgreSQL database and an external NATS server, node A reaching NATS
// through a fault proxy. The proxy turns into a black hole, so that A's
// posts commit but their publishes never reach the bus; then A is killed
// with SIGKILL, its buffered publishes dying with it. A client on node B
// must still get every one of those messages, once, in order — from B's
// outbox relay, with no later post to reveal them (docs/delivery.md).
func TestCommitThenKill(t *testing.T) {
	if testing.Short() {
		t.Skip("two processes and a kill; skipped with -short")
	}
	const natsAddr = "127.0.0.1:4222"
	conn, err := net.DialTimeout("tcp", natsAddr, 2*time.Second)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("NATS at %s is unreachable under CI: %v", natsAddr, err)
		}
		t.Skipf("NATS at %s is unreachable: %v", natsAddr, err)
	}
	conn.Close()
	const lost = 20
	ctx, cancel := context.WithTimeout(t.Context(), mnDeadline)
	defer cancel()
	db := testpg.New(t)
	seedOut := runSeedCmd(t, "-", "--db", db, "--users", "2", "--channels", "1", "--out", "-")
	proxy, err := faultproxy.Start(natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	// Each node gets its own id; both join the same NATS (the default
	// subject prefix: the pair is alone in the channels it uses).
	a := startParley(t, "--listen", "127.0.0.1:0", "--admin", "off", "--db", db, "--node-id", "ctk-a",
		"--nats", "nats://"+proxy.Addr())
	b := startParley(t, "--listen", "127.0.0.1:0", "--admin", "off", "--db", db, "--node-id", "ctk-b",
		"--nats", "nats://"+natsAddr)
	a.waitLog(t, `"mode":"external"`)
	b.waitLog(t, `"mode":"external"`)
	nodes := []*proc{a, b}

	ch := seedOut.Channels[0].ID
	reader, writer := seedOut.Users[0], seedOut.Owner
	c := &mnClient{user: reader, home: 1, channels: []string{ch}, events: map[string][]pclient.Event{}}
	api := newAPIClient(nodes, 1, reader.Token)
	connB, err := api.Connect(ctx, seedOut.WorkspaceID, pclient.ConnectOptions{
		Handler: c.handle, Channels: map[string]int64{ch: 0}, DeclaredOnly: true,
		URLs:       []string{"ws://" + strings.TrimPrefix(strings.TrimSuffix(b.url, "/"), "http://") + gatewayPath},
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, HandshakeTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatalf("connect to node b: %v", err)
	}
	defer connB.Close()
	// Node A's posts reach B's client through NATS while the proxy is
	// healthy: the path works, and the client is live.
	postA := pclient.New(strings.TrimSuffix(a.url, "/"), pclient.WithToken(writer.Token), pclient.WithLogger(quietLog()))
	first, err := postA.PostMessage(ctx, ch, parley.NewMessage{Text: "through the bus"})
	if err != nil {
		t.Fatal(err)
	}
	waitSeq := func(seq int64, what string) {
		t.Helper()
		for {
			got := c.seqs(ch)
			if len(got) > 0 && got[len(got)-1] >= seq {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: the client on node b has seqs %v, want up to %d", what, got, seq)
			}
			time.Sleep(10 * time.Millisecond) // polling, bounded by ctx
		}
	}
	waitSeq(first.Seq, "a healthy publish")

	proxy.BlackHole()
	var last int64
	for i := range lost {
		m, err := postA.PostMessage(ctx, ch, parley.NewMessage{Text: fmt.Sprint("committed, never published ", i)})
		if err != nil {
			t.Fatalf("post %d through node a: %v", i, err)
		}
		last = m.Seq
	}
	if err := a.cmd.Process.Kill(); err != nil { // SIGKILL: its buffered publishes die with it
		t.Fatal(err)
	}
	<-a.exited
	killed := time.Now()
	waitSeq(last, "the killed node's committed posts")
	took := time.Since(killed)

	logB := newAPIClient(nodes, 1, writer.Token)
	evs, err := channelLog(ctx, logB, ch)
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for _, ev := range evs {
		want = append(want, ev.Seq)
	}
	if got := c.seqs(ch); !slices.Equal(got, want) {
		t.Fatalf("the client on node b has seqs %v, want the log's %v exactly once, in order", got, want)
	}
	t.Logf("%d posts committed by node a behind a black-holed bus, then SIGKILL: all on node b's client %s after the kill", lost, took.Round(time.Millisecond))
	b.stopQuietly(t)
}
