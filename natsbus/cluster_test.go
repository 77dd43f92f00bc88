package natsbus

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"parley"
)

// startCluster starts n clustered embedded buses on loopback: the first is
// the seed, the others name only it as a route; it waits until every server
// routes to every other.
func startCluster(t *testing.T, n int) []*Bus {
	t.Helper()
	seed := mustStart(t, Config{ClusterListen: "127.0.0.1:0"})
	if seed.ClusterAddr() == "" {
		t.Fatal("clustered bus has no route listener")
	}
	buses := []*Bus{seed}
	for i := 1; i < n; i++ {
		buses = append(buses, mustStart(t, Config{
			ClusterListen: "127.0.0.1:0",
			Routes:        []string{"nats://" + seed.ClusterAddr()},
		}))
	}
	waitFor(t, "a full mesh of routes", func() bool {
		for _, b := range buses {
			if b.ClusterPeers() != n-1 {
				return false
			}
		}
		return true
	})
	return buses
}

// waitInterest publishes probes from every bus until every other bus has
// seen one: a subscription reaches the other servers of a cluster a moment
// after it reaches its own.
func waitInterest(t *testing.T, buses []*Bus, topic string, cols []*collector) {
	t.Helper()
	for from, b := range buses {
		probe := parley.Event{ChannelID: "probe", Type: fmt.Sprintf("probe.%d", from), Topics: []string{topic}}
		waitFor(t, fmt.Sprintf("bus %d's probe everywhere", from), func() bool {
			b.Publish([]parley.Event{probe})
			b.Flush()
			for _, c := range cols {
				seen := false
				for _, ev := range c.snapshot() {
					seen = seen || ev.Type == probe.Type
				}
				if !seen {
					return false
				}
			}
			return true
		})
	}
}

func TestClusterPublishReachesEveryNode(t *testing.T) {
	before, procOK := listeningSockets(t)
	buses := startCluster(t, 3)

	cols := make([]*collector, len(buses))
	for i, b := range buses {
		cols[i] = &collector{}
		mustSubscribe(t, b, "ch.*", cols[i])
	}
	waitInterest(t, buses, "ch.PROBE", cols)

	const n = 300
	for i, b := range buses {
		for seq := int64(1); seq <= n; seq++ {
			b.Publish([]parley.Event{event(fmt.Sprintf("N%d", i), seq, fmt.Sprintf("ch.N%d", i))})
		}
	}
	for i, c := range cols {
		waitFor(t, fmt.Sprintf("bus %d to receive every node's events", i), func() bool {
			got := 0
			for _, ev := range c.snapshot() {
				if ev.ChannelID != "probe" {
					got++
				}
			}
			return got == n*len(buses)
		})
		next := map[string]int64{}
		for _, ev := range c.snapshot() {
			if ev.ChannelID == "probe" {
				continue
			}
			if ev.Seq != next[ev.ChannelID]+1 {
				t.Fatalf("bus %d: %s seq %d after %d: order not kept across routes", i, ev.ChannelID, ev.Seq, next[ev.ChannelID])
			}
			next[ev.ChannelID] = ev.Seq
		}
	}

	// Still no client port anywhere: the only new listeners are the route
	// listeners, and no peer advertised a client URL to our connections.
	routes := map[string]bool{}
	for _, b := range buses {
		if b.srv.Addr() != nil {
			t.Fatalf("clustered embedded server listens for clients on %v", b.srv.Addr())
		}
		if urls := b.nc.DiscoveredServers(); len(urls) != 0 {
			t.Fatalf("client told of other servers: %v", urls)
		}
		_, port, _ := net.SplitHostPort(b.ClusterAddr())
		routes[port] = true
	}
	if procOK {
		after, _ := listeningSockets(t)
		for inode, addr := range after {
			if _, ok := before[inode]; ok {
				continue
			}
			// addr is "<table> <hex ip>:<hex port>"
			hexPort := addr[strings.LastIndex(addr, ":")+1:]
			var port int
			fmt.Sscanf(hexPort, "%X", &port)
			if !routes[fmt.Sprint(port)] {
				t.Errorf("a listener that is not a route listener: %s (port %d)", addr, port)
			}
		}
	}
}

func TestClusterNodeLeaves(t *testing.T) {
	buses := startCluster(t, 3)
	if err := buses[2].Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the others to drop the route", func() bool {
		return buses[0].ClusterPeers() == 1 && buses[1].ClusterPeers() == 1
	})
	var c collector
	mustSubscribe(t, buses[1], "ch.LEFT", &c)
	waitInterest(t, buses[:2], "ch.LEFT", []*collector{&c})
}

func TestClusterRouteToRequest(t *testing.T) {
	buses := startCluster(t, 2)
	stop, err := buses[1].Handle(parley.NodeTopic("N2", "echo"), func(data []byte) ([]byte, error) {
		return append([]byte("echo "), data...), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var reply []byte
	waitFor(t, "a reply across the route", func() bool {
		reply, err = buses[0].Request(t.Context(), parley.NodeTopic("N2", "echo"), []byte("hi"))
		return err == nil
	})
	if string(reply) != "echo hi" {
		t.Fatalf("reply %q", reply)
	}
}

func TestClusterConfigErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Routes: []string{"nats://127.0.0.1:1"}}, "cluster listen"},
		{Config{URL: "nats://127.0.0.1:1", ClusterListen: "127.0.0.1:0"}, "embedded server only"},
		{Config{ClusterListen: "nohost"}, "cluster listen address"},
		{Config{ClusterListen: "127.0.0.1:99999"}, "bad port"},
		{Config{ClusterListen: "127.0.0.1:0", Routes: []string{"http://x:1"}}, "nats://host:port"},
		{Config{ClusterListen: "127.0.0.1:0", Routes: []string{"nats://user:secret@x"}}, "nats://host:port"},
		{Config{ClusterListen: "127.0.0.1:0", ClusterName: "a b"}, "whitespace"},
		{Config{ClusterListen: busy.Addr().String()}, "router port"},
	} {
		b, err := Start(tc.cfg)
		if err == nil {
			b.Close()
			t.Errorf("%+v: started", tc.cfg)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%+v: err %v, want one mentioning %q", tc.cfg, err, tc.want)
		}
	}
}

func TestClusterStartIsQuick(t *testing.T) {
	start := time.Now()
	mustStart(t, Config{ClusterListen: "127.0.0.1:0"})
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a clustered bus took %v to start", d)
	}
}
