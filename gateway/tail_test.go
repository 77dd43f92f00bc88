package gateway

import (
	"testing"
	"time"
)

func tailEv(channelID string, seq int64, at time.Time) *event {
	return &event{channelID: channelID, seq: seq, recv: at}
}

func seqsOf(es []*event) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.seq
	}
	return out
}

func wantWindow(t *testing.T, tl *streamTail, channelID string, after int64, limit int, want []int64) {
	t.Helper()
	es, ok := tl.window(channelID, after, limit)
	if want == nil {
		if ok {
			t.Fatalf("window(%s, %d, %d) = %v, want no answer", channelID, after, limit, seqsOf(es))
		}
		return
	}
	if !ok || len(es) != len(want) {
		t.Fatalf("window(%s, %d, %d) = %v %v, want %v", channelID, after, limit, seqsOf(es), ok, want)
	}
	for i := range want {
		if es[i].seq != want[i] {
			t.Fatalf("window(%s, %d, %d) = %v, want %v", channelID, after, limit, seqsOf(es), want)
		}
	}
}

// TestStreamTailWindow: the tail answers only a position it holds the
// next event of, gap-free up to its newest; it starts afresh past a gap.
func TestStreamTailWindow(t *testing.T) {
	now := time.Now()
	tl := newStreamTail(4, time.Minute)
	wantWindow(t, tl, "c", 0, 10, nil) // nothing yet
	for seq := int64(10); seq <= 12; seq++ {
		tl.add(tailEv("c", seq, now))
	}
	tl.add(&event{channelID: "c", ephemeral: true, recv: now}) // typing: not kept
	tl.add(tailEv("", 5, now))                                 // not a channel's
	wantWindow(t, tl, "c", 9, 10, []int64{10, 11, 12})
	wantWindow(t, tl, "c", 10, 1, []int64{11})
	wantWindow(t, tl, "c", 8, 10, nil)  // 9 was never seen
	wantWindow(t, tl, "c", 12, 10, nil) // nothing past the newest
	wantWindow(t, tl, "c", -1, 10, nil)
	wantWindow(t, tl, "c", 9, 0, nil)
	wantWindow(t, tl, "other", 9, 10, nil)

	// At most 4 kept.
	tl.add(tailEv("c", 13, now))
	tl.add(tailEv("c", 14, now))
	wantWindow(t, tl, "c", 9, 10, nil)
	wantWindow(t, tl, "c", 10, 10, []int64{11, 12, 13, 14})

	// Past a gap (the node took the channel again elsewhere): afresh.
	tl.add(tailEv("c", 20, now))
	wantWindow(t, tl, "c", 14, 10, nil)
	wantWindow(t, tl, "c", 19, 10, []int64{20})
	// Behind (a stale copy): afresh too, never a seq twice.
	tl.add(tailEv("c", 3, now))
	wantWindow(t, tl, "c", 19, 10, nil)
	wantWindow(t, tl, "c", 2, 10, []int64{3})

	tl.drop("c")
	wantWindow(t, tl, "c", 2, 10, nil)
}

// TestStreamTailAges: entries older than the age go, as events come and
// at a sweep, and a channel left empty is forgotten.
func TestStreamTailAges(t *testing.T) {
	t0 := time.Now()
	tl := newStreamTail(100, time.Minute)
	tl.add(tailEv("c", 1, t0))
	tl.add(tailEv("c", 2, t0.Add(30*time.Second)))
	tl.add(tailEv("d", 7, t0))
	tl.add(tailEv("c", 3, t0.Add(70*time.Second))) // 1 is now too old
	wantWindow(t, tl, "c", 0, 10, nil)
	wantWindow(t, tl, "c", 1, 10, []int64{2, 3})
	tl.sweep(t0.Add(100 * time.Second)) // 2 and d's 7 too
	wantWindow(t, tl, "c", 2, 10, []int64{3})
	wantWindow(t, tl, "d", 6, 10, nil)
	if n := tl.size(); n != 1 {
		t.Fatalf("%d events kept, want 1", n)
	}
	tl.sweep(t0.Add(200 * time.Second))
	if n := len(tl.chans); n != 0 {
		t.Fatalf("%d channels kept, want none", n)
	}
	tl.add(tailEv("c", 4, t0.Add(200*time.Second))) // goes on from an empty tail
	wantWindow(t, tl, "c", 3, 10, []int64{4})
}

// TestStreamTailOff: a tail of no events answers nothing.
func TestStreamTailOff(t *testing.T) {
	tl := newStreamTail(-1, time.Minute)
	tl.add(tailEv("c", 1, time.Now()))
	wantWindow(t, tl, "c", 0, 10, nil)
	var none *streamTail
	none.add(tailEv("c", 1, time.Now()))
	wantWindow(t, none, "c", 0, 10, nil)
	none.drop("c")
	none.sweep(time.Now())
}

// TestStreamTailBounded: a long stream keeps the tail at its bound, its
// backing array included.
func TestStreamTailBounded(t *testing.T) {
	now := time.Now()
	tl := newStreamTail(8, time.Minute)
	for seq := int64(1); seq <= 10_000; seq++ {
		tl.add(tailEv("c", seq, now))
	}
	wantWindow(t, tl, "c", 9992, 100, []int64{9993, 9994, 9995, 9996, 9997, 9998, 9999, 10000})
	if c := tl.chans["c"]; cap(c.evs) > 2*8+1 {
		t.Fatalf("backing array of %d for 8 events", cap(c.evs))
	}
}
