// Command filebench measures file uploads against a real `parley serve`
// process (docs/benchmarks.md, "Files"): one big file streamed in one
// request while the server's resident memory is sampled from /proc, then
// many small uploads at once; on the local directory storage (SQLite) and,
// with -s3, on a versitygw it starts (internal/s3test's build).
//
//	go run ./bench/filebench -big-mb 200 -n 100 -small-kb 1024 [-s3]
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"net/http"

	"parley/client"
	"parley/internal/s3test"
)

func main() {
	bigMB := flag.Int("big-mb", 200, "size of the big upload in MiB (0: skip)")
	n := flag.Int("n", 100, "concurrent small uploads (0: skip)")
	smallKB := flag.Int("small-kb", 1024, "size of each small upload in KiB")
	useS3 := flag.Bool("s3", false, "store files on a versitygw started for the run instead of the data directory")
	flag.Parse()
	if err := run(*bigMB, *n, *smallKB, *useS3); err != nil {
		log.Fatal(err)
	}
}

func run(bigMB, n, smallKB int, useS3 bool) error {
	tmp, err := os.MkdirTemp("", "filebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "parley")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/parley").CombinedOutput(); err != nil {
		return fmt.Errorf("build parley: %v\n%s", err, out)
	}
	args := []string{"serve", "--listen", "127.0.0.1:0", "--admin", "off", "--data", filepath.Join(tmp, "data"),
		"--rate-write-user", "off", "--rate-write-ip", "off", "--log-level", "warn"}
	storage := "local directory (SQLite)"
	if useS3 {
		gw, err := s3test.Build()
		if err != nil {
			return err
		}
		srv, stop, err := s3test.Run(gw, filepath.Join(tmp, "s3"))
		if err != nil {
			return err
		}
		defer stop()
		args = append(args, "--s3-endpoint", srv.Endpoint, "--s3-bucket", "bench", "--s3-create-bucket",
			"--s3-access-key", srv.AccessKey, "--s3-secret-key", srv.SecretKey)
		storage = "S3 (versitygw " + s3test.Version + ", posix backend; SQLite metadata)"
	}
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	base, err := readURL(stdout)
	if err != nil {
		return err
	}
	go io.Copy(io.Discard, stdout)
	ctx := context.Background()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 200}} // no timeout: a big upload takes what it takes
	c := client.New(base, client.WithHTTPClient(hc))
	h := "bench" + strconv.Itoa(rand.IntN(1e6))
	if _, err := c.Signup(ctx, h+"@example.com", "correct horse battery", "Bench", h); err != nil {
		return err
	}
	ws, err := c.CreateWorkspace(ctx, "Bench", h)
	if err != nil {
		return err
	}
	fmt.Printf("storage: %s\nserver pid %d, RSS at rest %.1f MiB\n", storage, cmd.Process.Pid, rssMiB(cmd.Process.Pid, "VmRSS"))

	if bigMB > 0 {
		size := int64(bigMB) << 20
		stop := make(chan struct{})
		var peak atomic.Int64
		var sampler sync.WaitGroup
		sampler.Go(func() {
			t := time.NewTicker(20 * time.Millisecond)
			defer t.Stop()
			for {
				if r := int64(rssMiB(cmd.Process.Pid, "VmRSS") * 1024); r > peak.Load() {
					peak.Store(r)
				}
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
		})
		before := rssMiB(cmd.Process.Pid, "VmRSS")
		sum := sha256.New()
		src := io.TeeReader(io.LimitReader(&noise{r: rand.New(rand.NewPCG(1, 2))}, size), sum)
		start := time.Now()
		f, err := c.UploadFile(ctx, ws.ID, "big.bin", src, size)
		el := time.Since(start)
		close(stop)
		sampler.Wait()
		if err != nil {
			return fmt.Errorf("big upload: %w", err)
		}
		rc, err := c.DownloadFile(ctx, f.ID, false)
		if err != nil {
			return err
		}
		back := sha256.New()
		dstart := time.Now()
		got, err := io.Copy(back, rc)
		del := time.Since(dstart)
		rc.Close()
		if err != nil || got != size || string(back.Sum(nil)) != string(sum.Sum(nil)) {
			return fmt.Errorf("download: %d bytes, %v, same bytes %v", got, err, string(back.Sum(nil)) == string(sum.Sum(nil)))
		}
		fmt.Printf("big upload: %d MiB in %.2fs (%.0f MiB/s); server RSS before %.1f MiB, peak during %.1f MiB (+%.1f MiB), VmHWM %.1f MiB\n",
			bigMB, el.Seconds(), float64(bigMB)/el.Seconds(), before, float64(peak.Load())/1024, float64(peak.Load())/1024-before,
			rssMiB(cmd.Process.Pid, "VmHWM"))
		fmt.Printf("big download: %d MiB in %.2fs (%.0f MiB/s), bytes identical\n", bigMB, del.Seconds(), float64(bigMB)/del.Seconds())
	}

	if n > 0 {
		size := int64(smallKB) << 10
		payload := make([]byte, size)
		for i := range payload {
			payload[i] = byte(rand.IntN(256))
		}
		lat := make([]time.Duration, n)
		var failed atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for i := range n {
			wg.Go(func() {
				t0 := time.Now()
				if _, err := c.UploadFile(ctx, ws.ID, fmt.Sprintf("f%03d.bin", i), strings.NewReader(string(payload)), size); err != nil {
					failed.Add(1)
					log.Printf("upload %d: %v", i, err)
				}
				lat[i] = time.Since(t0)
			})
		}
		wg.Wait()
		el := time.Since(start)
		sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
		mib := float64(int64(n)*size) / (1 << 20)
		fmt.Printf("%d concurrent uploads of %d KiB: %.2fs wall, %.1f uploads/s, %.1f MiB/s; latency p50 %v p90 %v max %v; failed %d; server VmHWM %.1f MiB\n",
			n, smallKB, el.Seconds(), float64(n)/el.Seconds(), mib/el.Seconds(),
			lat[n/2].Round(time.Millisecond), lat[n*9/10].Round(time.Millisecond), lat[n-1].Round(time.Millisecond), failed.Load(),
			rssMiB(cmd.Process.Pid, "VmHWM"))
	}
	return nil
}

// readURL reads the server's banner for its URL.
func readURL(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if _, after, ok := strings.Cut(sc.Text(), "Parley is running at "); ok {
			return strings.TrimSuffix(after, "/"), nil
		}
	}
	return "", fmt.Errorf("the server exited before printing its URL")
}

// rssMiB reads a Vm* field of /proc/<pid>/status in MiB.
func rssMiB(pid int, field string) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// noise is an endless pseudo-random byte stream.
type noise struct {
	r *rand.Rand
	v uint64
}

func (n *noise) Read(p []byte) (int, error) {
	for i := range p {
		if i%8 == 0 {
			n.v = n.r.Uint64()
		}
		p[i] = byte(n.v >> (8 * (i % 8)))
	}
	return len(p), nil
}
