package querycache

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"parley"
	"parley/internal/testpg"
	"parley/natsbus"
	"parley/sqlstore"
)

// Query cache benchmarks; docs/benchmarks.md ("Query cache") has the
// commands, the machine and the results.
//
// The workspace: 200,000 users, #general with all of them, 2,000 more
// channels (70% of 3–30 members, 25% of 30–500, 5% of 500–10,000), 20,000
// DMs and 2,000 group DMs; about 1.4 million memberships.

var bigConfig = genConfig{users: 200_000, channels: 2_000, dms: 20_000, groupDMs: 2_000, seed: 1, workspace: "WBIG"}

// bigFixture is the 200,000-user workspace loaded into a cache, shared by
// the latency benchmarks.
type bigFixture struct {
	g      *genDir
	c      *Cache
	actors []string // users with DMs, who act in the switcher
	// channels for mention suggestions: #general (everyone), the largest
	// channel after it, and a small one.
	general, large, small string
}

var benchBig = sync.OnceValues(func() (*bigFixture, error) {
	g := newGenDir(bigConfig)
	bus, err := natsbus.Start(natsbus.Config{Logger: quietLogger()})
	if err != nil {
		return nil, err
	}
	f := &bigFixture{g: g, c: New(Config{Store: g, Bus: bus, Logger: quietLogger()})}
	if _, err := f.c.Switcher(context.Background(), g.userID(0), g.cfg.workspace, "", 1); err != nil {
		return nil, err
	}
	seen := map[uint32]bool{}
	largest := 0
	for i, ch := range g.chans {
		switch {
		case i == 0:
			f.general = ch.id
		case ch.kind == parley.KindDM:
			for _, u := range ch.members {
				if !seen[u] {
					seen[u] = true
					f.actors = append(f.actors, g.userID(u))
				}
			}
		case ch.kind == parley.KindPublic && len(ch.members) > largest:
			largest, f.large = len(ch.members), ch.id
		case ch.kind == parley.KindPublic && len(ch.members) < 10 && f.small == "":
			f.small = ch.id
		}
	}
	return f, nil
})

func mustBig(b *testing.B) *bigFixture {
	b.Helper()
	f, err := benchBig()
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// query is one query of the mix, with its kind for the per-kind figures.
type query struct{ kind, q string }

// switcherMix is what people type into a quick switcher, mostly the first
// letters of a first name: short prefixes, longer ones, "first l", handle
// prefixes, fuzzy abbreviations of handles, channel names, and misses.
func switcherMix(n int, seed uint64) []query {
	r := rand.New(rand.NewPCG(seed, 11))
	out := make([]query, n)
	for i := range out {
		u := r.IntN(bigConfig.users)
		first, last := genName(u)
		handle := genHandle(u)
		switch x := r.IntN(100); {
		case x < 30:
			out[i] = query{"prefix-1to3", first[:min(len(first), 1+r.IntN(3))]}
		case x < 55:
			out[i] = query{"prefix-4plus", first[:min(len(first), 4+r.IntN(4))]}
		case x < 70:
			out[i] = query{"first+last", first + " " + last[:min(len(last), 1+r.IntN(3))]}
		case x < 80:
			out[i] = query{"handle", handle[:min(len(handle), len(first)+2+r.IntN(3))]}
		case x < 90:
			var b strings.Builder
			for j := 0; j < len(handle); j++ {
				if j == 0 || r.IntN(10) < 5 {
					b.WriteByte(handle[j])
				}
			}
			out[i] = query{"fuzzy", b.String()}
		case x < 95:
			w := channelWords[r.IntN(len(channelWords))]
			out[i] = query{"channel", w[:min(len(w), 2+r.IntN(3))]}
		default:
			out[i] = query{"miss", string([]byte{'q', 'z', byte('a' + r.IntN(26)), 'x'})}
		}
	}
	return out
}

// mentionMix is what follows "@": nothing yet, or the first letters of
// someone's first or last name.
func mentionMix(n int, seed uint64) []query {
	r := rand.New(rand.NewPCG(seed, 13))
	out := make([]query, n)
	for i := range out {
		first, last := genName(r.IntN(bigConfig.users))
		switch x := r.IntN(100); {
		case x < 10:
			out[i] = query{"empty", ""}
		case x < 70:
			out[i] = query{"first", first[:min(len(first), 1+r.IntN(5))]}
		default:
			out[i] = query{"last", last[:min(len(last), 1+r.IntN(5))]}
		}
	}
	return out
}

// latencies collects one duration per query and reports percentiles: wall
// time, and the time the query's thread was on a CPU (the benchmark locks
// its goroutine to its thread), which leaves out the time the machine gave
// to other processes. The two differ on a busy machine.
type latencies struct {
	all    []time.Duration
	cpu    []time.Duration
	byKind map[string][]time.Duration
}

// timer measures one query.
type timer struct{ wall, cpu time.Time }

func threadCPU() time.Time {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return time.Time{}
	}
	return time.Unix(ts.Unix())
}

func startTimer() timer { return timer{wall: time.Now(), cpu: threadCPU()} }

func (l *latencies) add(kind string, t timer) {
	d := time.Since(t.wall)
	if l.byKind == nil {
		l.byKind = map[string][]time.Duration{}
	}
	l.all = append(l.all, d)
	l.cpu = append(l.cpu, threadCPU().Sub(t.cpu))
	l.byKind[kind] = append(l.byKind[kind], d)
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func (l *latencies) report(b *testing.B) {
	b.ReportMetric(float64(pct(l.all, 0.50).Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(pct(l.all, 0.99).Nanoseconds())/1e3, "p99-µs")
	b.ReportMetric(float64(pct(l.all, 1).Nanoseconds())/1e3, "max-µs")
	b.ReportMetric(float64(pct(l.cpu, 0.50).Nanoseconds())/1e3, "cpu-p50-µs")
	b.ReportMetric(float64(pct(l.cpu, 0.99).Nanoseconds())/1e3, "cpu-p99-µs")
	if len(l.all) < 1000 {
		return
	}
	kinds := make([]string, 0, len(l.byKind))
	for k := range l.byKind {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		ds := l.byKind[k]
		b.Logf("%-14s n=%-6d p50 %7.1f µs  p99 %7.1f µs", k, len(ds),
			float64(pct(ds, 0.5).Nanoseconds())/1e3, float64(pct(ds, 0.99).Nanoseconds())/1e3)
	}
}

// BenchmarkSwitcher200k: one op is one quick-switcher query (limit 10) by
// a random user with DMs, over the mix.
func BenchmarkSwitcher200k(b *testing.B) {
	f := mustBig(b)
	qs := switcherMix(20_000, 1)
	ctx := context.Background()
	var lat latencies
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		q := qs[i%len(qs)]
		actor := f.actors[i%len(f.actors)]
		t := startTimer()
		if _, err := f.c.Switcher(ctx, actor, f.g.cfg.workspace, q.q, 10); err != nil {
			b.Fatal(err)
		}
		lat.add(q.kind, t)
	}
	b.StopTimer()
	lat.report(b)
}

// BenchmarkMentions200k: one op is one mention-suggestion query (limit 10)
// in #general (200,000 members), a large channel or a small one.
func BenchmarkMentions200k(b *testing.B) {
	f := mustBig(b)
	for _, tc := range []struct{ name, channel string }{
		{"general", f.general}, {"large", f.large}, {"small", f.small},
	} {
		b.Run(tc.name, func(b *testing.B) {
			qs := mentionMix(20_000, 2)
			ctx := context.Background()
			var lat latencies
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				q := qs[i%len(qs)]
				t := startTimer()
				if _, err := f.c.MentionSuggestions(ctx, f.g.userID(0), tc.channel, q.q, 10); err != nil {
					b.Fatal(err)
				}
				lat.add(q.kind, t)
			}
			b.StopTimer()
			lat.report(b)
		})
	}
}

// BenchmarkDirectory200k: one op is one directory page (50 users) for a
// prefix of a first name, or no query.
func BenchmarkDirectory200k(b *testing.B) {
	f := mustBig(b)
	qs := mentionMix(20_000, 3)
	ctx := context.Background()
	var lat latencies
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		q := qs[i%len(qs)]
		t := startTimer()
		if _, err := f.c.Directory(ctx, f.g.userID(0), f.g.cfg.workspace, parley.UserQuery{Q: q.q}); err != nil {
			b.Fatal(err)
		}
		lat.add(q.kind, t)
	}
	b.StopTimer()
	lat.report(b)
}

// heapAfterGC returns the live heap after a full collection.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkMemory measures the heap a loaded workspace takes: the 200,000-
// user workspace alone, then a second workspace of 100,000 users of whom
// half are also in the first (held once). Run it on its own (-bench
// Memory) so that nothing else is on the heap.
func BenchmarkMemory(b *testing.B) {
	ctx := context.Background()
	first := newGenDir(bigConfig)
	second := newGenDir(genConfig{users: 100_000, channels: 1_000, dms: 10_000, groupDMs: 1_000, seed: 2,
		workspace: "WTWO", userOffset: 150_000}) // its users 0–49,999 are the first's 150,000–199,999
	users := newGenDir(genConfig{users: 200_000, seed: 3, workspace: "WUSERS", userOffset: 1_000_000})
	bus, err := natsbus.Start(natsbus.Config{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer bus.Close()
	for range b.N {
		c := New(Config{Store: multiDir{first, second, users}, Bus: bus, Logger: quietLogger()})
		load := func(g *genDir) (bytes uint64, took time.Duration) {
			before := heapAfterGC()
			start := time.Now()
			if _, err := c.Users(ctx, g.cfg.workspace, nil); err != nil {
				b.Fatal(err)
			}
			took = time.Since(start)
			return heapAfterGC() - before, took
		}
		onlyUsers, _ := load(users)
		full, took := load(first)
		more, _ := load(second)
		b.ReportMetric(float64(full)/2/1e6, "MB/100k-users")
		b.ReportMetric(float64(onlyUsers)/2/1e6, "MB/100k-users-no-channels")
		b.ReportMetric(float64(more)/1e6, "MB-second-ws")
		b.ReportMetric(took.Seconds(), "s-build-200k")
		b.Logf("200k users, %d channels, %d memberships: %.1f MB (%.0f B/user); users only: %.1f MB (%.0f B/user); built in %v",
			len(first.chans), first.memberships(), float64(full)/1e6, float64(full)/2e5, float64(onlyUsers)/1e6, float64(onlyUsers)/2e5, took)
		b.Logf("second workspace, 100k users (50k shared), %d memberships: %.1f MB; node holds %d distinct users",
			second.memberships(), float64(more)/1e6, c.Stats().Users)
		c.Close()
	}
}

// BenchmarkWarm: time to warm the 200,000-user workspace from the store,
// after a bulk insert of it. One op is one load: the directory read
// (reported alone as read-s) plus building the indexes.
func BenchmarkWarm(b *testing.B) {
	for _, d := range []sqlstore.Dialect{sqlstore.SQLite, sqlstore.Postgres} {
		b.Run(string(d), func(b *testing.B) {
			ctx := context.Background()
			g := newGenDir(bigConfig)
			cfg := sqlstore.Config{Logger: quietLogger()}
			driver, dsn := "pgx", ""
			if d == sqlstore.Postgres {
				cfg.PostgresURL = testpg.New(b)
				dsn = cfg.PostgresURL
			} else {
				cfg.Path = filepath.Join(b.TempDir(), "big.db")
				driver, dsn = "sqlite", "file:"+cfg.Path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)"
			}
			st, err := sqlstore.Open(ctx, cfg) // creates the schema
			if err != nil {
				b.Fatal(err)
			}
			st.Close()
			raw, err := sql.Open(driver, dsn)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if err := g.bulkInsert(ctx, raw, d == sqlstore.Postgres); err != nil {
				b.Fatal(err)
			}
			raw.Close()
			b.Logf("%s: inserted %d users, %d channels, %d memberships in %v", d, g.cfg.users, len(g.chans), g.memberships(), time.Since(start))
			st, err = sqlstore.Open(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			bus, err := natsbus.Start(natsbus.Config{Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer bus.Close()

			var read, warm time.Duration
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				rows := 0
				count := func(...any) { rows++ }
				if err := st.ReadDirectory(ctx, g.cfg.workspace, parley.DirectoryVisitor{
					User:    func(*parley.User, parley.Role) { count() },
					Channel: func(*parley.Channel) { count() },
					Member:  func(string, string) { count() },
				}); err != nil {
					b.Fatal(err)
				}
				read += time.Since(start)

				c := New(Config{Store: st, Bus: bus, Logger: quietLogger()})
				start = time.Now()
				res, err := c.Switcher(ctx, g.userID(0), g.cfg.workspace, "james", 10)
				if err != nil || len(res.Users) == 0 {
					b.Fatal(err, res)
				}
				warm += time.Since(start)
				c.Close()
				if want := g.cfg.users + len(g.chans) + g.memberships(); rows != want {
					b.Fatalf("read %d rows, want %d", rows, want)
				}
			}
			b.StopTimer()
			b.ReportMetric(read.Seconds()/float64(b.N), "read-s")
			b.ReportMetric(warm.Seconds()/float64(b.N), "warm-s")
			b.Logf("%s: %s", d, fmt.Sprintf("directory read %v, whole warm (read + build) %v", read/time.Duration(b.N), warm/time.Duration(b.N)))
		})
	}
}
