// Command gatewaybench measures the WebSocket gateway end to end on one
// machine: it seeds a workspace with `parley seed`, starts `parley serve`
// (SQLite, embedded NATS) as a separate process, connects S identified
// sessions (each with its own user and token; read by a lean nbio reader,
// benchkit's raw reader, or by package client's Conn with -reader client), posts
// messages into the channel they all share through the HTTP API — steadily
// or in bursts — and reports:
//
//   - deliveries per server CPU-second (the server's utime+stime from
//     /proc/<pid>/stat over the posting phase, drain included);
//   - latency from post to receipt, p50/p99/max (the send time is in the
//     message text);
//   - lost and duplicated deliveries (must be zero);
//   - RSS per idle identified session: the server's VmRSS with S sessions
//     connected and idle, minus its VmRSS before they connected, over S.
//
// `make bench-gateway` runs the two sizes of docs/benchmarks.md.
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
	"syscall"
	"time"
)

func main() {
	var cfg Config
	flag.StringVar(&cfg.Parley, "parley", "bin/parley", "the parley binary to run (make build)")
	flag.StringVar(&cfg.Reader, "reader", "raw", `how sessions read: "raw" (lean nbio reader, frames handled inline) or "client" (package client's Conn)`)
	flag.BoolVar(&cfg.Deflate, "deflate", false, "raw reader: sessions negotiate permessage-deflate, as browsers do")
	flag.IntVar(&cfg.Pollers, "pollers", runtime.GOMAXPROCS(0), "raw reader: poller goroutines reading the sessions' sockets (spread over them)")
	flag.IntVar(&cfg.ReadBuffer, "read-buffer", 8<<10, "raw reader: bytes read from a socket at once (nbio parses each read's frames in time quadratic in their number)")
	flag.IntVar(&cfg.Sessions, "sessions", 1000, "identified sessions, one user each, all in #general")
	flag.Float64Var(&cfg.Rate, "rate", 1, "steady mode: messages per second")
	flag.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long to post")
	flag.IntVar(&cfg.Burst, "burst", 0, "burst mode: messages posted back to back per burst (0: steady mode)")
	flag.DurationVar(&cfg.BurstEvery, "burst-every", 2*time.Second, "burst mode: time between the starts of two bursts")
	flag.IntVar(&cfg.BurstPosters, "burst-posters", 1, "burst mode: goroutines posting each burst at once (1: one after another)")
	flag.IntVar(&cfg.TextBytes, "text", 200, "bytes of text per message")
	flag.IntVar(&cfg.ConnectWorkers, "connect-workers", 32, "sessions connecting at once")
	flag.DurationVar(&cfg.Settle, "settle", 5*time.Second, "idle time after connecting, before RSS is read")
	flag.DurationVar(&cfg.Drain, "drain", 20*time.Second, "longest wait for the last deliveries after the last post")
	flag.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write the server's CPU profile of the posting phase to this file")
	flag.StringVar(&cfg.HeapProfile, "heapprofile", "", "write the server's heap profile, taken with the sessions idle, to this file")
	flag.StringVar(&cfg.LoadProfile, "loadprofile", "", "write the load generator's own CPU profile of the posting phase to this file")
	flag.StringVar(&cfg.DB, "db", "", "PostgreSQL URL of an empty database for the server (default: SQLite in -data)")
	flag.StringVar(&cfg.DataDir, "data", "", "data directory for the server (default: a temporary one, removed after)")
	flag.StringVar(&cfg.Live, "live", "", `live configuration set before the sessions connect, as JSON: '{"hot_on_rate":5,"hot_batch_ms":0}'`)
	jsonOut := flag.String("json", "", "also write the result as JSON to this file")
	verbose := flag.Bool("v", false, "log progress")
	flag.Parse()

	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gatewaybench:", err)
		os.Exit(1)
	}
	res.Print(os.Stdout)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gatewaybench:", err)
			os.Exit(1)
		}
	}
	if res.Lost != 0 || res.Duplicates != 0 {
		os.Exit(2)
	}
}
