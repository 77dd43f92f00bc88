package benchkit

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestStampRoundTrip(t *testing.T) {
	before := time.Now().UnixNano()
	s := Stamp("pcmp", 42, 200)
	if len(s) != 200 || !strings.HasPrefix(s, "pcmp|42|") {
		t.Fatalf("stamp %q (%d bytes)", s, len(s))
	}
	// Embedded in a JSON payload, as the servers deliver it.
	idx, sent, ok := ParseStamp([]byte("pcmp"), []byte(`{"text":"`+s+`"}`))
	if !ok || idx != 42 || sent < before || sent > time.Now().UnixNano() {
		t.Fatalf("parsed %d %d %v", idx, sent, ok)
	}
	for _, bad := range []string{`{"text":"hello"}`, `pcmpx|1|2|`, `pcmp|1|`, `pcmp|x|2|`, `pcmp|1|y|`} {
		if _, _, ok := ParseStamp([]byte("pcmp"), []byte(bad)); ok {
			t.Errorf("ParseStamp accepted %q", bad)
		}
	}
}

func TestPercentile(t *testing.T) {
	ns := []int64{5e6, 1e6, 4e6, 2e6, 3e6}
	if p := Percentile(ns, 50); p != 3 {
		t.Errorf("p50 %v ms, want 3", p)
	}
	if p := Percentile(ns, 100); p != 5 {
		t.Errorf("max %v ms, want 5", p)
	}
	if p := Percentile(nil, 99); p != 0 {
		t.Errorf("p99 of nothing %v", p)
	}
	if ns[0] != 5e6 {
		t.Error("Percentile sorted its input")
	}
}

// This process's own readings are there and plausible.
func TestOwnReadings(t *testing.T) {
	if _, err := CPUTime(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if rss, err := RSSBytes(os.Getpid()); err != nil || rss <= 0 {
		t.Fatalf("rss %d %v", rss, err)
	}
}

// Quantiles of the histogram land within its 3 % buckets of the truth.
func TestHistQuantile(t *testing.T) {
	var h Hist
	if h.Quantile(99) != 0 {
		t.Fatal("quantile of nothing")
	}
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	h.Record(-time.Second) // a clock step: counted as 0
	for _, tc := range []struct{ p, want float64 }{{50, 500}, {99, 990}, {100, 1000}} {
		got := h.Quantile(tc.p)
		if got > tc.want || got < tc.want*0.97 {
			t.Errorf("p%v = %v ms, want within 3 %% below %v", tc.p, got, tc.want)
		}
	}
	if h.Count() != 1001 || h.Quantile(0) != 0 {
		t.Fatalf("count %d, min %v", h.Count(), h.Quantile(0))
	}
	for us := range uint64(1 << 20) {
		if b := histBucket(us); histLow(b) > us || (b+1 < histBuckets && histLow(b+1) <= us) {
			t.Fatalf("%d µs in bucket %d [%d, %d)", us, b, histLow(b), histLow(b+1))
		}
	}
}

// A pinned server runs on the CPUs asked, under its own pid.
func TestPinServers(t *testing.T) {
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("no taskset")
	}
	PinServers("0")
	defer PinServers("")
	p, err := StartProc(t.Context(), exec.Command("sleep", "30"), 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	// taskset execs sleep: poll until the pid's command is sleep.
	deadline := time.Now().Add(10 * time.Second)
	for {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p.PID()))
		if strings.TrimSpace(string(comm)) == "sleep" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d is %q, not sleep", p.PID(), comm)
		}
		time.Sleep(5 * time.Millisecond)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID()))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(status), "Cpus_allowed_list:\t0\n") {
		t.Fatalf("status:\n%s", status)
	}
}
