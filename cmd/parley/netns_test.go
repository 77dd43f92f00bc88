package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"parley/internal/faultproxy"
)

// The region test's network (regions_test.go): one network namespace per
// region, each with a veth to the root namespace, where the test, its
// PostgreSQL forward, its HTTP clients and the link between the regions
// are. Every address is a private test address on these veths; nothing is
// sent anywhere else.
//
//	region a (netns)            root netns                    region b (netns)
//	10.250.R.2 ─── veth ─── 10.250.R.1   10.251.R.1 ─── veth ─── 10.251.R.2
//	                           └── inter-region link ──┘
//	                               (faultproxy.Delay: 40 ms each way;
//	                                BlackHole: the regions cut apart)
//
// The link is a userspace delay line rather than `tc netem` because this
// machine's kernel is built without netem (CONFIG_NET_SCH_NETEM is not set;
// tbf and htb shape rate, not delay): every byte between the regions (the
// NATS routes: each region's nodes talk only to their own region's
// servers) goes through a proxy in the root namespace that forwards each
// chunk 40 ms after it arrived, in both directions. R is random per run,
// as are the device and namespace names, so two runs never share one;
// t.Cleanup kills what runs in the namespaces and deletes them and their
// veths, whether or not the test passed.

// natsHelperEnv, when set to a config file, makes the test binary a NATS
// server (TestMain): the region test runs real NATS servers, the library
// Parley embeds (v2.15, which has sync_interval: always; the machine's
// nats-server may be older), as separate processes inside the namespaces.
const natsHelperEnv = "PARLEY_TEST_NATS_SERVER"

// runNATSServer runs a NATS server from conf until SIGTERM or SIGINT.
func runNATSServer(conf string) int {
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nats config:", err)
		return 2
	}
	opts.NoSigs = true
	s, err := server.NewServer(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nats server:", err)
		return 2
	}
	s.ConfigureLogger()
	s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		fmt.Fprintln(os.Stderr, "nats server: not ready within 20 s")
		return 2
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	s.Shutdown()
	s.WaitForShutdown()
	return 0
}

// needNetns skips the test unless it can build namespaces (root, with ip
// and tc); under CI=true it fails instead, since CI runs as root.
func needNetns(t *testing.T) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "not running as root"
	}
	if _, err := exec.LookPath("ip"); err != nil && why == "" {
		why = "ip (iproute2) is not installed"
	}
	if why == "" {
		// Root in a container may still lack CAP_SYS_ADMIN.
		var b [3]byte
		rand.Read(b[:])
		probe := "parley-rt-probe-" + hex.EncodeToString(b[:])
		if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
			why = fmt.Sprintf("ip netns add fails: %v: %s", err, strings.TrimSpace(string(out)))
		} else if out, err := exec.Command("ip", "netns", "del", probe).CombinedOutput(); err != nil {
			t.Fatalf("delete the probe namespace %s: %v: %s", probe, err, out)
		}
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("the region test needs network namespaces (%s), and CI must run it", why)
	}
	t.Skipf("the region test needs network namespaces: %s", why)
}

// regionNet is the test's two regions, "a" and "b".
type regionNet struct {
	t      *testing.T
	ns     map[string]string // region -> namespace name
	hostIP map[string]string // region -> the root namespace's end of its veth
	nodeIP map[string]string // region -> the namespace's end of that veth
	delay  time.Duration     // one way, between the regions
	links  []*faultproxy.Proxy
}

// run runs a command, failing the test with its output.
func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newRegionNet builds the namespaces and veths; delay is the one-way
// delay of the links between the regions (link).
func newRegionNet(t *testing.T, delay time.Duration) *regionNet {
	t.Helper()
	var b [2]byte
	rand.Read(b[:])
	id, r := hex.EncodeToString(b[:]), int(b[0])
	n := &regionNet{t: t, delay: delay, ns: map[string]string{}, hostIP: map[string]string{}, nodeIP: map[string]string{}}
	hostDev := map[string]string{}
	for i, region := range []string{"a", "b"} {
		n.ns[region] = "parley-rt-" + id + region
		hostDev[region] = "prh" + id + region
		n.hostIP[region] = fmt.Sprintf("10.%d.%d.1", 250+i, r)
		n.nodeIP[region] = fmt.Sprintf("10.%d.%d.2", 250+i, r)
	}
	// Registered first, so it runs last: after every process's cleanup.
	t.Cleanup(func() { n.remove(hostDev) })
	for _, region := range []string{"a", "b"} {
		ns := n.ns[region]
		run(t, "ip", "netns", "add", ns)
		run(t, "ip", "-n", ns, "link", "set", "lo", "up")
		peer := "prn" + strings.TrimPrefix(hostDev[region], "prh")
		run(t, "ip", "link", "add", hostDev[region], "type", "veth", "peer", "name", peer, "netns", ns)
		run(t, "ip", "addr", "add", n.hostIP[region]+"/30", "dev", hostDev[region])
		run(t, "ip", "link", "set", hostDev[region], "up")
		run(t, "ip", "-n", ns, "addr", "add", n.nodeIP[region]+"/30", "dev", peer)
		run(t, "ip", "-n", ns, "link", "set", peer, "up")
	}
	return n
}

// link opens a path from region from to port on region to's address: a
// listener on from's root-side address that forwards to to's namespace
// with the regions' delay each way. It returns the address from dials.
func (n *regionNet) link(from, to string, port int) string {
	n.t.Helper()
	p, err := faultproxy.StartOn(net.JoinHostPort(n.hostIP[from], "0"), net.JoinHostPort(n.nodeIP[to], strconv.Itoa(port)))
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { p.Close() })
	p.Delay(n.delay)
	n.links = append(n.links, p)
	return p.Addr()
}

// partition cuts every link between the regions (nothing gets through,
// either way, as with 100 % loss: TCP connections stay open and stall), or
// heals them (what was held goes through, as TCP retransmits it).
func (n *regionNet) partition(cut bool) {
	for _, l := range n.links {
		if cut {
			l.BlackHole()
		} else {
			l.Delay(n.delay)
		}
	}
}

// remove kills whatever still runs in the namespaces and deletes them
// with their veths; then checks that nothing is left.
func (n *regionNet) remove(hostDev map[string]string) {
	t := n.t
	for _, region := range []string{"a", "b"} {
		ns := n.ns[region]
		// Nothing may outlive the test (its NATS servers, its nodes): kill
		// every process in the namespace and wait until none is left.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			out, err := exec.Command("ip", "netns", "pids", ns).Output()
			pids := strings.Fields(string(out))
			if err != nil || len(pids) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("processes %v still run in %s", pids, ns)
				break
			}
			for _, pid := range pids {
				exec.Command("kill", "-KILL", pid).Run()
			}
		}
		// Deleting a namespace deletes its devices, and so their peers.
		exec.Command("ip", "netns", "del", ns).Run()
		exec.Command("ip", "link", "del", hostDev[region]).Run()
	}
	for _, region := range []string{"a", "b"} {
		if exec.Command("ip", "netns", "pids", n.ns[region]).Run() == nil {
			t.Errorf("network namespace %s is still there", n.ns[region])
		}
		if exec.Command("ip", "link", "show", hostDev[region]).Run() == nil {
			t.Errorf("veth %s is still there", hostDev[region])
		}
	}
}

// forwardPG listens on each region's root-side address and forwards to
// the test's PostgreSQL (which listens on the root namespace's loopback);
// it returns dsn rewritten for each region.
func (n *regionNet) forwardPG(dsn string) map[string]string {
	t := n.t
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, region := range []string{"a", "b"} {
		p, err := faultproxy.StartOn(net.JoinHostPort(n.hostIP[region], "0"), u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		v := *u
		v.Host = p.Addr()
		out[region] = v.String()
	}
	return out
}

// natsProc is one NATS server of the cluster, in a region.
type natsProc struct {
	name, ns, conf string
	self           string // the test binary, which runs the server
	cmd            *exec.Cmd
	done           chan struct{}
	log            *syncBuffer
}

// natsServerSpec is a server of the cluster: its name, region, client and
// route ports.
type natsServerSpec struct {
	name, region      string
	clientPort, route int
}

// startNATSCluster starts the servers with JetStream (file storage,
// sync_interval: always), each routed to every other: directly within a
// region, over a link (delayed, cuttable) between regions. It waits until
// a 3-replica stream can be created.
func (n *regionNet) startNATSCluster(specs []natsServerSpec) map[string]*natsProc {
	t := n.t
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	route := func(from, to natsServerSpec) string {
		if from.region == to.region {
			return fmt.Sprintf("nats-route://%s:%d", n.nodeIP[to.region], to.route)
		}
		return "nats-route://" + n.link(from.region, to.region, to.route)
	}
	procs := map[string]*natsProc{}
	for _, s := range specs {
		dir := t.TempDir()
		conf := filepath.Join(dir, "nats.conf")
		var others []string
		for _, o := range specs {
			if o.name != s.name {
				others = append(others, fmt.Sprintf("%q", route(s, o)))
			}
		}
		text := fmt.Sprintf(`server_name: %q
host: "0.0.0.0"
port: %d
jetstream { store_dir: %q, sync_interval: always }
cluster {
  name: "parley-regions"
  host: %q
  port: %d
  no_advertise: true
  routes: [%s]
}
`, s.name, s.clientPort, filepath.Join(dir, "js"), n.nodeIP[s.region], s.route, strings.Join(others, ", "))
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		p := &natsProc{name: s.name, ns: n.ns[s.region], conf: conf, self: self}
		p.start(t)
		procs[s.name] = p
	}
	// JetStream is clustered once a meta leader exists and every server is
	// a peer: a stream kept by all three can then be made.
	nc := n.natsConn(fmt.Sprintf("nats://%s:%d", n.nodeIP[specs[0].region], specs[0].clientPort))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the NATS cluster to make a 3-replica stream", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "REGION_TEST_PROBE", Subjects: []string{"region-test.probe"},
			Replicas: 3, Storage: jetstream.FileStorage})
		return err == nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := js.DeleteStream(ctx, "REGION_TEST_PROBE"); err != nil {
		t.Fatal(err)
	}
	return procs
}

// natsConn connects the test (root namespace) to a server.
func (n *regionNet) natsConn(url string) *nats.Conn {
	n.t.Helper()
	var nc *nats.Conn
	waitUntil(n.t, 20*time.Second, "NATS at "+url, func() bool {
		var err error
		nc, err = nats.Connect(url, nats.Timeout(time.Second))
		return err == nil
	})
	n.t.Cleanup(nc.Close)
	return nc
}

// start starts the server (again, after kill: same name, configuration
// and JetStream directory, as a restarted server would be).
func (p *natsProc) start(t *testing.T) {
	t.Helper()
	p.cmd = exec.Command("ip", "netns", "exec", p.ns, p.self)
	p.cmd.Env = append(cleanEnv(), natsHelperEnv+"="+p.conf)
	p.log = &syncBuffer{}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start nats %s: %v", p.name, err)
	}
	p.done = make(chan struct{})
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("nats %s log:\n%s", p.name, p.log)
		}
	})
}

// kill stops the server at once (SIGKILL), as a crashed region's would.
func (p *natsProc) kill() {
	select {
	case <-p.done:
	default:
		p.cmd.Process.Kill()
		<-p.done
	}
}
