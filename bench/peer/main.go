// Command peer runs the same fan-out workload against Parley and against
// Centrifugo v5 (the peer), one server process at a time, and prints for
// each size:
//
//   - deliveries per server CPU-second (the server's utime+stime from
//     /proc/<pid>/stat over a publishing round, drain included), and the
//     server's and the generator's cores (CPU-seconds per wall second) for
//     the publish window and the drain separately;
//   - delivery latency p50/p99, from each message's scheduled time to its
//     receipt (the scheduled time is stamped into the payload);
//   - the achieved publish rate beside the asked one, and late starts;
//   - RSS per connection: the server's VmRSS with every subscriber
//     connected and idle, minus its VmRSS before they connected, over the
//     subscribers;
//   - lost and duplicated deliveries, and the Parley/Centrifugo ratios.
//
// The workload: N subscribers of one channel (Parley: N seeded users in
// #general, each identified with its own token; Centrifugo: N anonymous
// clients subscribed to bench:room over its JSON protocol), and a
// publisher posting messages open-loop through each server's HTTP API
// (Parley: POST a message, which is committed to its store first;
// Centrifugo: /api/publish of Parley's message object for the same text,
// memory only, no history): message i is due at i/rate and is sent then
// whether or not the earlier publishes have returned (internal/openloop),
// up to -max-in-flight calls at once. A round whose achieved rate is
// below 95 % of the asked one is marked not comparable. The subscribers
// are lean nbio WebSocket readers (bench/internal/benchkit) spread over
// -pollers poller goroutines, the same engine for every server.
//
// With -capacity (or -ramp), each size runs a ramp of short rounds at
// rising rates on the same connections and stops at the first that fails
// (p99 above -p99-limit, a lost delivery, a publish error, or below 95 %
// of the rate); the last rate passed is the server's capacity. The server
// "null" (null.go) only sends: it gives the generator's own ceiling.
//
// With -wire, no load runs: one message with -size bytes of the corpus is
// delivered by each server to a client that offers permessage-deflate and
// to one that does not, and the frames' bytes on the wire are printed
// (wire.go; docs/benchmarks.md, "Bytes on the wire").
//
// Centrifugo is built from the Go module proxy into a cache directory the
// first time (see installCentrifugo). `make bench-peer` and `make
// bench-capacity` run the sizes of docs/benchmarks.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lesismal/nbio/logging"

	"parley/bench/internal/benchkit"
)

func main() {
	maybeServeNull()
	var cfg Config
	var sizes, servers, cfVersion, cacheDir, goBin, ramp, serverCPUs string
	var capacity bool
	flag.StringVar(&cfg.Parley, "parley", "bin/parley", "the parley binary to run (make build)")
	flag.StringVar(&cfg.Centrifugo, "centrifugo", "", "a centrifugo binary to use (default: build -centrifugo-version into -cache)")
	flag.StringVar(&cfVersion, "centrifugo-version", "v5.4.9", "the Centrifugo v5 release to build from the module proxy")
	flag.StringVar(&cacheDir, "cache", defaultCacheDir(), "where the built centrifugo is kept")
	flag.StringVar(&goBin, "go", "go", "the go command that builds centrifugo")
	flag.StringVar(&servers, "servers", "parley,centrifugo", "servers to measure, in order (parley, centrifugo, null)")
	flag.StringVar(&sizes, "subscribers", "1000,10000", "subscriber counts, comma-separated")
	flag.Float64Var(&cfg.Rate, "rate", 2, "messages per second")
	flag.DurationVar(&cfg.Duration, "duration", 20*time.Second, "how long one round publishes")
	flag.IntVar(&cfg.Rounds, "rounds", 3, "publishing rounds on the same connections (the table gives the medians)")
	flag.IntVar(&cfg.TextBytes, "size", 200, "bytes of text per message")
	flag.IntVar(&cfg.ConnectWorkers, "connect-workers", 32, "subscribers connecting at once")
	flag.IntVar(&cfg.Pollers, "pollers", runtime.GOMAXPROCS(0), "the load generator's poller goroutines (the subscriber sockets are spread over them)")
	flag.IntVar(&cfg.MaxInFlight, "max-in-flight", 256, "publish calls running at once; a message due beyond it starts late")
	flag.DurationVar(&cfg.Late, "late", time.Millisecond, "a publish that starts this far past its scheduled time counts as late")
	flag.BoolVar(&capacity, "capacity", false, "find each server's capacity with the -ramp (default ramp "+defaultRamp+", rounds of -duration)")
	flag.StringVar(&ramp, "ramp", "", "rates of the capacity ramp, ascending, comma-separated (implies -capacity)")
	flag.DurationVar(&cfg.P99Limit, "p99-limit", 500*time.Millisecond, "capacity: the highest p99 a passing round may have")
	flag.StringVar(&serverCPUs, "server-cpus", "", "pin the servers to these CPUs (taskset -c list, e.g. 1); pin the generator with taskset -c 0 go run …")
	flag.IntVar(&cfg.ReadBuffer, "read-buffer", 8<<10, "bytes read from a socket at once")
	flag.DurationVar(&cfg.Settle, "settle", 5*time.Second, "idle time after connecting, before RSS is read")
	flag.DurationVar(&cfg.Drain, "drain", 20*time.Second, "longest wait for the last deliveries")
	wire := flag.Bool("wire", false, "instead of the load: measure one delivered message's bytes on the wire from each server, with and without permessage-deflate (wire.go)")
	corpus := flag.String("corpus", "gateway/testdata/corpus.txt", "-wire: the text's source (its first -size bytes)")
	flag.StringVar(&cfg.ParleyLive, "parley-live", "", `live configuration set on Parley's server before its subscribers connect, as JSON, e.g. '{"hot_on_rate":5,"hot_off_rate":2}' for a hot round`)
	jsonOut := flag.String("json", "", "also write the results as JSON to this file")
	verbose := flag.Bool("v", false, "log progress")
	flag.Parse()

	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	} else {
		logging.SetLevel(logging.LevelError) // nbio logs each engine's start and stop on stdout
	}
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if capacity && ramp == "" {
		ramp = defaultRamp
	}
	if ramp != "" {
		var err error
		if cfg.Ramp, err = parseRates(ramp); err != nil {
			fmt.Fprintln(os.Stderr, "peer:", err)
			os.Exit(2)
		}
	}
	benchkit.PinServers(serverCPUs)
	if *wire {
		if err := runWire(ctx, &cfg, servers, cfVersion, cacheDir, goBin, *corpus, *jsonOut); err != nil {
			fmt.Fprintln(os.Stderr, "peer:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, &cfg, sizes, servers, cfVersion, cacheDir, goBin, *jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg *Config, sizes, servers, cfVersion, cacheDir, goBin, jsonOut string) error {
	var err error
	if cfg.Subscribers, err = parseSizes(sizes); err != nil {
		return err
	}
	cfg.Servers = strings.Split(servers, ",")
	for _, s := range cfg.Servers {
		if s == "centrifugo" && cfg.Centrifugo == "" {
			if cfg.Centrifugo, err = installCentrifugo(ctx, goBin, cfVersion, cacheDir, cfg.Log); err != nil {
				return err
			}
		}
	}
	results, err := Run(ctx, *cfg)
	if err != nil {
		return err
	}
	Print(os.Stdout, *cfg, results)
	if jsonOut != "" {
		b, _ := json.MarshalIndent(map[string]any{"results": results, "ratios": Ratios(results)}, "", "  ")
		if err := os.WriteFile(jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if len(cfg.Ramp) > 0 {
		return nil // a ramp ends with a failing round by design
	}
	for _, r := range results {
		if r.Lost != 0 || r.Duplicates != 0 {
			return fmt.Errorf("%s at %d subscribers lost %d and duplicated %d deliveries", r.Server, r.Subscribers, r.Lost, r.Duplicates)
		}
	}
	return nil
}

// runWire is the -wire mode.
func runWire(ctx context.Context, cfg *Config, servers, cfVersion, cacheDir, goBin, corpus, jsonOut string) error {
	if strings.Contains(servers, "centrifugo") && cfg.Centrifugo == "" {
		var err error
		if cfg.Centrifugo, err = installCentrifugo(ctx, goBin, cfVersion, cacheDir, cfg.Log); err != nil {
			return err
		}
	}
	rows, err := measureWire(ctx, *cfg, corpus)
	if err != nil {
		return err
	}
	printWire(os.Stdout, *cfg, rows)
	if jsonOut != "" {
		b, _ := json.MarshalIndent(rows, "", "  ")
		return os.WriteFile(jsonOut, append(b, '\n'), 0o644)
	}
	return nil
}

// defaultRamp is the capacity ramp: rates doubling from 5 messages/s.
const defaultRamp = "5,10,20,40,80,160,320,640,1280,2560"

// parseRates reads "5,10,20".
func parseRates(s string) ([]float64, error) {
	var out []float64
	for f := range strings.SplitSeq(s, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || r <= 0 || (len(out) > 0 && r <= out[len(out)-1]) {
			return nil, fmt.Errorf("ramp %q: want positive rates in ascending order, separated by commas", s)
		}
		out = append(out, r)
	}
	return out, nil
}

// parseSizes reads "1000,10000".
func parseSizes(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("subscribers %q: want positive counts separated by commas", s)
		}
		out = append(out, n)
	}
	return out, nil
}
