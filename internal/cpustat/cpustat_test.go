package cpustat

import (
	"os"
	"testing"
	"time"
)

// The CPU time of /proc/<pid>/stat: fields 14 and 15 in clock ticks,
// counted after the command name, which may hold spaces and parentheses.
func TestParseStat(t *testing.T) {
	line := "1234 (my (odd) cmd) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 4 0 100 0 0"
	d, err := parseStat([]byte(line))
	if err != nil || d != 3250*time.Millisecond {
		t.Fatalf("cpu %v %v, want 3.25s", d, err)
	}
	if _, err := parseStat([]byte("1234 (x) S 1 2")); err == nil {
		t.Fatal("short stat accepted")
	}
	if _, err := Process(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	// Burn some CPU: Self must see it.
	before := Self()
	deadline := time.Now().Add(50 * time.Millisecond)
	for n := 0; time.Now().Before(deadline); n++ {
	}
	if Self() <= before {
		t.Fatalf("self CPU did not grow from %v", before)
	}
	if Cores(time.Second, 2*time.Second) != 0.5 || Cores(time.Second, 0) != 0 {
		t.Fatal("cores")
	}
}
