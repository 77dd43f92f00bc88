// Command peer runs the same fan-out workload against Parley and against
// Centrifugo v5 (the peer), one server process at a time, and prints for
// each size:
//
//   - deliveries per server CPU-second (the server's utime+stime from
//     /proc/<pid>/stat over a publishing round, drain included);
//   - delivery latency p50/p99, from the publish call to the receipt (the
//     send time is stamped into the 200-byte payload);
//   - RSS per connection: the server's VmRSS with every subscriber
//     connected and idle, minus its VmRSS before they connected, over the
//     subscribers;
//   - lost and duplicated deliveries, and the Parley/Centrifugo ratios.
//
// The workload: N subscribers of one channel (Parley: N seeded users in
// #general, each identified with its own token; Centrifugo: N anonymous
// clients subscribed to bench:room over its JSON protocol), and one
// publisher posting messages at a fixed rate through each server's HTTP
// API (Parley: POST a message, which is committed to its store first;
// Centrifugo: /api/publish, memory only, no history), in -rounds rounds
// on the same connections; the figures are the medians over the rounds
// (the max latency is the largest of all). The subscribers are
// lean nbio WebSocket readers (bench/internal/benchkit), the same engine
// for both servers.
//
// Centrifugo is built from the Go module proxy into a cache directory the
// first time (see installCentrifugo). `make bench-peer` runs the sizes of
// docs/benchmarks.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lesismal/nbio/logging"
)

func main() {
	var cfg Config
	var sizes, servers, cfVersion, cacheDir, goBin string
	flag.StringVar(&cfg.Parley, "parley", "bin/parley", "the parley binary to run (make build)")
	flag.StringVar(&cfg.Centrifugo, "centrifugo", "", "a centrifugo binary to use (default: build -centrifugo-version into -cache)")
	flag.StringVar(&cfVersion, "centrifugo-version", "v5.4.9", "the Centrifugo v5 release to build from the module proxy")
	flag.StringVar(&cacheDir, "cache", defaultCacheDir(), "where the built centrifugo is kept")
	flag.StringVar(&goBin, "go", "go", "the go command that builds centrifugo")
	flag.StringVar(&servers, "servers", "parley,centrifugo", "servers to measure, in order")
	flag.StringVar(&sizes, "subscribers", "1000,10000", "subscriber counts, comma-separated")
	flag.Float64Var(&cfg.Rate, "rate", 2, "messages per second")
	flag.DurationVar(&cfg.Duration, "duration", 20*time.Second, "how long one round publishes")
	flag.IntVar(&cfg.Rounds, "rounds", 3, "publishing rounds on the same connections (the table gives the medians)")
	flag.IntVar(&cfg.TextBytes, "size", 200, "bytes of text per message")
	flag.IntVar(&cfg.ConnectWorkers, "connect-workers", 32, "subscribers connecting at once")
	flag.IntVar(&cfg.Pollers, "pollers", 1, "the load generator's poller goroutines")
	flag.IntVar(&cfg.ReadBuffer, "read-buffer", 8<<10, "bytes read from a socket at once")
	flag.DurationVar(&cfg.Settle, "settle", 5*time.Second, "idle time after connecting, before RSS is read")
	flag.DurationVar(&cfg.Drain, "drain", 20*time.Second, "longest wait for the last deliveries")
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
	for _, r := range results {
		if r.Lost != 0 || r.Duplicates != 0 {
			return fmt.Errorf("%s at %d subscribers lost %d and duplicated %d deliveries", r.Server, r.Subscribers, r.Lost, r.Duplicates)
		}
	}
	return nil
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
