package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"parley"
	"parley/internal/testpg"
	"parley/natsbus"
)

// TestRegions runs Parley in two regions (docs/directory.md "Regions"):
// each region a network namespace with its NATS servers and a `parley
// serve` node, 40 ms each way between them (a delay line: this kernel has
// no netem; netns_test.go), a JetStream cluster of three servers (two in
// a, one in b) keeping the directory's streams, the catalogue and the chat
// store on PostgreSQL (reached through a forward on each region's veth).
// Workspaces are placed in both regions; each node finds both through its
// admin lookup, and chat works on both. Then region b's directory is
// killed, three ways, and lookups and chat go on in b:
//
//  1. the chaos switch regions_off on b's node: its replica answers
//     nothing, region a's answers across the link;
//  2. b cut off from a (the link lets nothing through, b's replica still
//     off): no replica answers, lookups are last-known-good, counted;
//     healed, b's lookups are fresh again and carry the change made
//     during the cut;
//  3. b's NATS server killed: lookups from cache and last-known-good, a
//     post waits for the bus; restarted, the post arrives and lookups are
//     fresh.
//
// Last, region a goes down (its two NATS servers, the JetStream majority,
// and its node): b's replica answers lookups of both regions' workspaces
// from its projection and chat in b goes on; a catalogue change made
// meanwhile stays pending in the change log and reaches b's replica once
// a's servers are back.
//
// The figures (cached, cold in-region and cold cross-region lookup
// latency; time to recover) are logged.
func TestRegions(t *testing.T) {
	needNetns(t)
	dsn := testpg.New(t)
	const delay = 40 * time.Millisecond
	rn := newRegionNet(t, delay)
	regionDSN := rn.forwardPG(dsn)
	servers := rn.startNATSCluster([]natsServerSpec{
		{name: "a1", region: "a", clientPort: 4301, route: 6301},
		{name: "a2", region: "a", clientPort: 4302, route: 6302},
		{name: "b1", region: "b", clientPort: 4301, route: 6301},
	})
	natsURL := map[string]string{"a": "nats://127.0.0.1:4301,nats://127.0.0.1:4302", "b": "nats://127.0.0.1:4301"}
	nodes := map[string]*proc{}
	for _, region := range []string{"a", "b"} {
		ip := rn.nodeIP[region]
		nodes[region] = startParleyIn(t, rn.ns[region], "--listen", ip+":0", "--admin", ip+":0", "--data", t.TempDir(),
			"--db", regionDSN[region], "--nats", natsURL[region], "--node-id", "node-"+region,
			"--region", region, "--directory-regions", "a,b", "--directory-stream-replicas", "3")
		nodes[region].waitLog(t, `"msg":"tenant directory started"`)
	}

	// Chat in each region: a user signs up on the region's node, makes a
	// workspace, posts, and receives the post over the gateway.
	chats := map[string]*regionChat{}
	for _, region := range []string{"a", "b"} {
		chats[region] = newRegionChat(t, nodes[region], region)
		chats[region].post(t, "hello from "+region)
	}

	// Place the two workspaces in their regions (the CLI, on the control
	// database from the root namespace).
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(binPath, append(args, "--control-db", dsn)...)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("parley %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	cli("shards", "add", "shard-a", "--region", "a", "--capacity", "100")
	cli("shards", "add", "shard-b", "--region", "b", "--capacity", "100")
	ws := map[string]string{}
	for _, region := range []string{"a", "b"} {
		ws[region] = chats[region].workspace
		cli("workspaces", "place", ws[region], "--region", region, "--shard", "shard-"+region)
	}
	// Every node finds every workspace, in its region, on its shard.
	for _, node := range []string{"a", "b"} {
		for _, region := range []string{"a", "b"} {
			for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				rec, code, _ := adminLookup(t, nodes[node], ws[region], false)
				if code == http.StatusOK && rec.Region == region && rec.ShardID == "shard-"+region {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("node %s did not find region %s's workspace within 15 s: %d %+v", node, region, code, rec)
				}
			}
		}
	}

	if _, code, _ := adminLookup(t, nodes["b"], "no-such-workspace", false); code != http.StatusNotFound {
		t.Fatalf("lookup of an unknown workspace: %d, want 404", code)
	}

	// Figures, healthy: cached, and cold (the entry dropped, so the
	// replicas are asked; b's own replica answers first).
	figures := map[string][]time.Duration{}
	for range 200 {
		_, _, d := adminLookup(t, nodes["b"], ws["a"], false)
		figures["cached"] = append(figures["cached"], d)
	}
	for range 100 {
		rec, code, d := adminLookup(t, nodes["b"], ws["a"], true)
		if code != http.StatusOK || rec.Region != "a" {
			t.Fatalf("cold lookup on b: %d %+v", code, rec)
		}
		figures["cold, own region"] = append(figures["cold, own region"], d)
	}

	// 1. Region b's directory off (the chaos switch on b's node): its
	// replica answers nothing, region a's answers across the link.
	chaos(t, nodes["b"], `{"regions_off": ["b"]}`)
	staleBefore := metric(t, nodes["b"], "parley_tenantdir_stale_serves_total", "")
	fromA := metric(t, nodes["b"], "parley_tenantdir_replica_requests_total", `region="a",result="ok"`)
	for range 30 {
		rec, code, d := adminLookup(t, nodes["b"], ws["b"], true)
		if code != http.StatusOK || rec.ShardID != "shard-b" {
			t.Fatalf("cold lookup on b with b's directory off: %d %+v", code, rec)
		}
		figures["cold, from the other region"] = append(figures["cold, from the other region"], d)
	}
	if got := metric(t, nodes["b"], "parley_tenantdir_replica_requests_total", `region="a",result="ok"`); got < fromA+30 {
		t.Fatalf("region a's replica answered %v of node b's 30 cold lookups, want all", got-fromA)
	}
	if got := metric(t, nodes["b"], "parley_tenantdir_stale_serves_total", ""); got != staleBefore {
		t.Fatalf("stale serves went from %v to %v while region a answered", staleBefore, got)
	}
	chats["b"].post(t, "b's directory is off")

	// 2. The harder cut: region b loses region a too (the link between
	// them lets nothing through, b's directory still off). No replica answers node b: it serves
	// last-known-good, and says so. Chat in b goes on (its database and its
	// NATS server are in reach), as does everything in a — including a
	// catalogue change, which b cannot hear yet.
	rn.partition(true)
	partitioned := time.Now()
	for _, region := range []string{"a", "b"} {
		rec, code, _ := adminLookup(t, nodes["b"], ws[region], true)
		if code != http.StatusOK || rec.Region != region {
			t.Fatalf("lookup on b cut off from a: %d %+v", code, rec)
		}
	}
	if got := metric(t, nodes["b"], "parley_tenantdir_stale_serves_total", ""); got < staleBefore+2 {
		t.Fatalf("stale serves %v after two lookups with no replica, want >= %v", got, staleBefore+2)
	}
	// With nothing known of it, no answer is "unavailable", not "not found".
	if _, code, _ := adminLookup(t, nodes["b"], "never-looked-up", false); code != http.StatusServiceUnavailable {
		t.Fatalf("lookup on b cut off, of a workspace it never saw: %d, want 503", code)
	}
	chats["b"].post(t, "region b is cut off")
	chats["a"].post(t, "region a goes on")
	cli("workspaces", "set", ws["b"], "--limit", "members=77")
	// Region a hears of it through its JetStream. Whether b does before
	// the link heals depends on which region's relay publishes it first:
	// both read the control database, which b still reaches, but only a's
	// publish is acknowledged (b's server has lost JetStream's majority),
	// and core NATS hands b's own publish to b's clients at once.
	waitUntil(t, 15*time.Second, "node a to hear of the change made during the cut", func() bool {
		rec, _, _ := adminLookup(t, nodes["a"], ws["b"], false)
		return rec.Limits["members"] == 77
	})

	// 3. Healed: the link back, b's directory on. b's cold lookups are
	// answered by a replica again (not last-known-good), with the change.
	rn.partition(false)
	chaos(t, nodes["b"], `{}`)
	healed := time.Now()
	stale := metric(t, nodes["b"], "parley_tenantdir_stale_serves_total", "")
	waitUntil(t, 30*time.Second, "node b's cold lookups to be answered by a replica again", func() bool {
		rec, code, _ := adminLookup(t, nodes["b"], ws["b"], true)
		now := metric(t, nodes["b"], "parley_tenantdir_stale_serves_total", "")
		fresh := code == http.StatusOK && rec.Limits["members"] == 77 && now == stale
		stale = now
		return fresh
	})
	recovered := time.Since(healed)
	stale = metric(t, nodes["b"], "parley_tenantdir_stale_serves_total", "")
	for _, region := range []string{"a", "b"} {
		if _, code, _ := adminLookup(t, nodes["b"], ws[region], true); code != http.StatusOK {
			t.Fatalf("lookup on b after healing: %d", code)
		}
	}
	if got := metric(t, nodes["b"], "parley_tenantdir_stale_serves_total", ""); got != stale {
		t.Fatalf("stale serves went from %v to %v after healing", stale, got)
	}
	chats["b"].post(t, "region b is back")

	// 4. Region b's NATS server dies (SIGKILL): b's node has no bus, so no
	// replica at all; it answers lookups from its cache and last-known-good
	// (counted), and a post on it commits and waits for the bus. Region a
	// goes on (its servers keep JetStream's majority). Restarted on its
	// JetStream directory, the server catches up, b's node reconnects, the
	// waiting post arrives, and lookups are fresh again.
	servers["b1"].kill()
	killed := time.Now()
	stale = metric(t, nodes["b"], "parley_tenantdir_stale_serves_total", "")
	for _, region := range []string{"a", "b"} {
		if rec, code, _ := adminLookup(t, nodes["b"], ws[region], false); code != http.StatusOK || rec.Region != region {
			t.Fatalf("cached lookup on b with its NATS dead: %d %+v", code, rec)
		}
		if rec, code, _ := adminLookup(t, nodes["b"], ws[region], true); code != http.StatusOK || rec.Region != region {
			t.Fatalf("cold lookup on b with its NATS dead: %d %+v", code, rec)
		}
	}
	if got := metric(t, nodes["b"], "parley_tenantdir_stale_serves_total", ""); got < stale+2 {
		t.Fatalf("stale serves %v after two cold lookups with b's NATS dead, want >= %v", got, stale+2)
	}
	chats["a"].post(t, "region b's NATS is down")
	postStart := time.Now()
	chats["b"].api.do("POST", "/channels/"+chats["b"].channel+"/messages", map[string]string{"text": "posted while the bus is down"}, 201, nil)
	chats["b"].posted++
	postTook := time.Since(postStart)
	servers["b1"].start(t)
	restarted := time.Now()
	chats["b"].frames.waitEvents(t, parley.EventMessageCreated, chats["b"].posted)
	stale = metric(t, nodes["b"], "parley_tenantdir_stale_serves_total", "")
	waitUntil(t, 30*time.Second, "node b's cold lookups to be answered by a replica again", func() bool {
		_, code, _ := adminLookup(t, nodes["b"], ws["b"], true)
		now := metric(t, nodes["b"], "parley_tenantdir_stale_serves_total", "")
		fresh := code == http.StatusOK && now == stale
		stale = now
		return fresh
	})
	natsRecovered := time.Since(restarted)
	chats["b"].post(t, "b's NATS is back")

	// The directory is settled before region a goes down: every change,
	// the one made during the cut included, is in the streams, and b's
	// projection has it (its consumer may still be catching up after
	// step 4). The test asks b's replica directly: the client alone would
	// not show what the projection holds, as it also hears the changes
	// the relay tries to publish, over core NATS.
	control, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer control.Close()
	pending := func() int {
		var n int
		if err := control.QueryRow(`SELECT count(*) FROM tenantdir_changes WHERE published_at IS NULL`).Scan(&n); err != nil {
			t.Fatalf("count pending changes: %v", err)
		}
		return n
	}
	replicaB := rn.natsConn(fmt.Sprintf("nats://%s:4301", rn.nodeIP["b"]))
	askReplicaB := func(ws string) (lookupRecord, bool) {
		msg, err := replicaB.Request(natsbus.DefaultSubjectPrefix+"tenantdir.lookup.api.b", []byte(ws), 2*time.Second)
		if err != nil {
			return lookupRecord{}, false
		}
		var rep struct {
			Record *lookupRecord `json:"record"`
		}
		if json.Unmarshal(msg.Data, &rep) != nil || rep.Record == nil {
			return lookupRecord{}, false
		}
		return *rep.Record, true
	}
	waitUntil(t, 30*time.Second, "every catalogue change to be published and in b's replica", func() bool {
		rec, ok := askReplicaB(ws["b"])
		return pending() == 0 && ok && rec.Limits["members"] == 77
	})

	// 5. Region a goes down, as in a region's outage: its two NATS
	// servers and its node die (SIGKILL). b1 is left alone of JetStream's
	// three servers: no majority, so no directory stream stores anything.
	// b's node goes on: its replica answers lookups of both regions'
	// workspaces from what its projection holds (region a's replica no
	// longer exists: no stale serve), and chat in b runs on b's NATS.
	nodes["a"].cmd.Process.Kill()
	<-nodes["a"].exited
	servers["a1"].kill()
	servers["a2"].kill()
	aDown := time.Now()
	stale = metric(t, nodes["b"], "parley_tenantdir_stale_serves_total", "")
	fromB := metric(t, nodes["b"], "parley_tenantdir_replica_requests_total", `region="b",result="ok"`)
	fromA = metric(t, nodes["b"], "parley_tenantdir_replica_requests_total", `region="a",result="ok"`)
	for _, region := range []string{"a", "b"} {
		// Cold first: an entry still marked stale by step 4 (retried in
		// the background every second) is replaced by the replica's answer.
		rec, code, d := adminLookup(t, nodes["b"], ws[region], true)
		if code != http.StatusOK || rec.Region != region {
			t.Fatalf("cold lookup on b with region a down: %d %+v", code, rec)
		}
		figures["cold, region a down"] = append(figures["cold, region a down"], d)
		if rec, code, _ := adminLookup(t, nodes["b"], ws[region], false); code != http.StatusOK || rec.Region != region {
			t.Fatalf("cached lookup on b with region a down: %d %+v", code, rec)
		}
	}
	for range 28 {
		rec, code, d := adminLookup(t, nodes["b"], ws["a"], true)
		if code != http.StatusOK || rec.Region != "a" {
			t.Fatalf("cold lookup on b with region a down: %d %+v", code, rec)
		}
		figures["cold, region a down"] = append(figures["cold, region a down"], d)
	}
	if got := metric(t, nodes["b"], "parley_tenantdir_replica_requests_total", `region="b",result="ok"`); got < fromB+30 {
		t.Fatalf("b's replica answered %v of 30 cold lookups with region a down, want all", got-fromB)
	}
	if got := metric(t, nodes["b"], "parley_tenantdir_replica_requests_total", `region="a",result="ok"`); got != fromA {
		t.Fatalf("region a's replica answered %v lookups while region a was down", got-fromA)
	}
	if got := metric(t, nodes["b"], "parley_tenantdir_stale_serves_total", ""); got != stale {
		t.Fatalf("stale serves went from %v to %v while b's replica answered", stale, got)
	}
	chats["b"].post(t, "region a is down")

	// A catalogue change during the outage (the control database is still
	// in reach) is kept, not lost: b's relay cannot get it into a stream
	// (no majority), so it stays pending in the change log, and b's
	// projection does not have it. b's client hears it all the same: b1
	// hands the relay's publish to its subscribers though no stream
	// stores it, so a cached entry takes it at once. The relay's attempt
	// fails after the relay's 1 s publish timeout (counted, checked once
	// a's servers are back: the test does not wait it out).
	relayErrs := metric(t, nodes["b"], "parley_tenantdir_relay_errors_total", "")
	cli("workspaces", "set", ws["b"], "--limit", "members=88")
	waitUntil(t, 10*time.Second, "b's client to hear the change from b's relay", func() bool {
		rec, code, _ := adminLookup(t, nodes["b"], ws["b"], false)
		return code == http.StatusOK && rec.Limits["members"] == 88
	})
	if n := pending(); n != 1 {
		t.Fatalf("%d changes pending with region a down, want 1 (the limit set)", n)
	}
	if rec, ok := askReplicaB(ws["b"]); !ok || rec.Limits["members"] != 77 {
		t.Fatalf("b's replica with region a down: %v %+v, want the record before the change (members=77)", ok, rec)
	}

	// Region a's servers back (same JetStream directories): the streams
	// regain their majority, b's relay publishes the pending change, and
	// b's projection (its replica) and client have it.
	servers["a1"].start(t)
	servers["a2"].start(t)
	aBack := time.Now()
	waitUntil(t, 60*time.Second, "the change made while region a was down to reach b's replica", func() bool {
		rec, ok := askReplicaB(ws["b"])
		return ok && rec.Limits["members"] == 88
	})
	aRecovered := time.Since(aBack)
	// Marked published once every audience's stream has it (the edge
	// stream's after the api one's, which b's replica reads).
	waitUntil(t, 30*time.Second, "the change made while region a was down to be marked published", func() bool { return pending() == 0 })
	aPublished := time.Since(aBack)
	// The relay's pass during the outage failed and was counted.
	relayFailed := metric(t, nodes["b"], "parley_tenantdir_relay_errors_total", "") - relayErrs
	if relayFailed < 1 {
		t.Fatalf("relay errors went up by %v with the change pending while a was down, want at least 1", relayFailed)
	}
	if rec, code, _ := adminLookup(t, nodes["b"], ws["b"], true); code != http.StatusOK || rec.Limits["members"] != 88 {
		t.Fatalf("cold lookup on b after region a's servers are back: %d %+v, want members=88", code, rec)
	}
	chats["b"].post(t, "region a's servers are back")

	t.Logf("region figures (%v each way between regions; lookup time from the node's Server-Timing):", delay)
	for _, k := range []string{"cached", "cold, own region", "cold, from the other region", "cold, region a down"} {
		p50, p99 := quantiles(figures[k])
		t.Logf("  lookup %-28s n=%-4d p50 %-10v p99 %v", k+":", len(figures[k]), p50, p99)
	}
	t.Logf("  cut for %v; after healing, node b's cold lookups were answered by a replica again within %v",
		healed.Sub(partitioned).Round(time.Millisecond), recovered.Round(time.Millisecond))
	t.Logf("  b's NATS down for %v (a post on b took %v to answer 201); after its restart, node b's lookups were fresh again within %v",
		restarted.Sub(killed).Round(time.Millisecond), postTook.Round(time.Millisecond), natsRecovered.Round(time.Millisecond))
	t.Logf("  region a (a1, a2, node a) down for %v; after a1 and a2 restarted, the change made meanwhile reached b's replica within %v",
		aBack.Sub(aDown).Round(time.Millisecond), aRecovered.Round(time.Millisecond))
	t.Logf("  (and was marked published, in every stream, within %v; %v of b's relay passes failed)",
		aPublished.Round(time.Millisecond), relayFailed)
	nodes["b"].stopQuietly(t)
}

// regionChat is one user chatting on a region's node.
type regionChat struct {
	api       *client
	frames    *wsFrames
	workspace string
	channel   string
	posted    int
}

func newRegionChat(t *testing.T, p *proc, region string) *regionChat {
	t.Helper()
	c := &regionChat{api: &client{t: t, base: strings.TrimSuffix(p.url, "/") + "/api/v1"}}
	var auth struct {
		Token string `json:"token"`
	}
	c.api.do("POST", "/auth/signup", map[string]string{"email": "user-" + region + "@regions.test",
		"password": "a long enough password", "name": "User " + region, "handle": "user-" + region}, 201, &auth)
	c.api.token = auth.Token
	var w, ch struct {
		ID string `json:"id"`
	}
	c.api.do("POST", "/workspaces", map[string]string{"name": "Region " + region, "slug": "region-" + region}, 201, &w)
	c.api.do("POST", "/workspaces/"+w.ID+"/channels", map[string]string{"name": "general-" + region, "kind": "public"}, 201, &ch)
	c.workspace, c.channel = w.ID, ch.ID
	c.frames = dialGateway(t, "ws"+strings.TrimPrefix(p.url, "http")+"api/v1/gateway")
	c.frames.send(t, map[string]string{"op": "identify", "token": auth.Token, "workspace_id": w.ID})
	c.frames.waitOp(t, "ready")
	return c
}

// post posts and waits for the message to come back over the gateway.
func (c *regionChat) post(t *testing.T, text string) {
	t.Helper()
	c.api.do("POST", "/channels/"+c.channel+"/messages", map[string]string{"text": text}, 201, nil)
	c.posted++
	c.frames.waitEvents(t, parley.EventMessageCreated, c.posted)
}

// lookupRecord is what the admin lookup returns.
type lookupRecord struct {
	ShardID string           `json:"shard_id"`
	Region  string           `json:"region"`
	Limits  map[string]int64 `json:"limits"`
}

// adminLookup looks a workspace up through a node's directory client,
// cold (the cached entry dropped first) or not; it returns the lookup's
// own duration from the Server-Timing header.
func adminLookup(t *testing.T, p *proc, ws string, cold bool) (lookupRecord, int, time.Duration) {
	t.Helper()
	u := p.admin + "tenantdir/workspaces/" + ws
	if cold {
		u += "?cold=1"
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("lookup %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var rec lookupRecord
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &rec); err != nil {
			t.Fatalf("lookup %s: %v: %s", u, err, body)
		}
	}
	timing := resp.Header.Get("Server-Timing")
	ms, err := strconv.ParseFloat(strings.TrimPrefix(timing, "lookup;dur="), 64)
	if err != nil {
		t.Fatalf("lookup %s: Server-Timing %q", u, timing)
	}
	return rec, resp.StatusCode, time.Duration(ms * float64(time.Millisecond))
}

// chaos replaces a node's directory chaos switches.
func chaos(t *testing.T, p *proc, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, p.admin+"tenantdir/chaos", bytes.NewBufferString(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT chaos %s: %d", body, resp.StatusCode)
	}
}

// metric sums a node's series of name whose labels contain labels.
func metric(t *testing.T, p *proc, name, labels string) float64 {
	t.Helper()
	v, _ := sumSeries(scrape(t, p.admin+"metrics"), name, labels)
	return v
}

// quantiles are the p50 and p99 of samples.
func quantiles(samples []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(samples)
	slices.Sort(s)
	if len(s) == 0 {
		return 0, 0
	}
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return at(0.50), at(0.99)
}
