package presence

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// Hot paths and memory per user. Run with
//
//	go test -run '^$' -bench . -benchmem ./presence/
//	go test -run 'TestMemoryPer' -v ./presence/

func BenchmarkActivity(b *testing.B) {
	tr, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	const users = 10_000
	ids := make([]string, users)
	for i := range ids {
		ids[i] = "U" + strconv.Itoa(i)
		tr.Connect(ids[i], "s")
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			tr.Activity(ids[i%users], "s")
			i++
		}
	})
}

func BenchmarkConnectDisconnect(b *testing.B) {
	tr, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	tr.Connect("U1", "s0") // keeps the record: measures the session path
	b.ReportAllocs()
	for b.Loop() {
		tr.Connect("U1", "s1")
		tr.Disconnect("U1", "s1")
	}
}

func BenchmarkWatchSet(b *testing.B) {
	tr, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	sets := make([][]string, 2)
	for s := range sets {
		for i := range 100 {
			sets[s] = append(sets[s], fmt.Sprintf("U%d", s*50+i)) // half overlap
		}
	}
	w := tr.NewWatcher(func(string, string) {})
	defer w.Close()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		w.Set(sets[i%2])
		i++
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestMemoryPerUser reports the heap cost of a connected user and of a
// watched user (without the bus subscription, which NATS accounts for).
func TestMemoryPerUser(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	const n = 100_000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "U" + strconv.Itoa(1_000_000+i) // ids are the gateway's: not counted
	}
	sessions := make([]string, n)
	for i := range sessions {
		sessions[i] = "node1.s" + strconv.Itoa(i)
	}
	tr, err := New(Config{AwayAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	before := heapInUse()
	for i, id := range ids {
		tr.Connect(id, sessions[i])
	}
	connected := heapInUse()
	// One watcher per user watching 10 users: every user watched 10 times.
	var watchers []*Watcher
	for i := 0; i < n; i++ {
		w := tr.NewWatcher(func(string, string) {})
		set := make([]string, 10)
		for j := range set {
			set[j] = ids[(i+j*7919)%n]
		}
		w.Set(set)
		watchers = append(watchers, w)
	}
	watched := heapInUse()
	t.Logf("per connected user: %d B; per watched user with 10 watchers (incl. the watchers' sets): %d B",
		(connected-before)/n, (watched-connected)/n)
	runtime.KeepAlive(watchers)
}
