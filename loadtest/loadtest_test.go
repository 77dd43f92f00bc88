package loadtest

import (
	"bytes"
	"encoding/xml"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestHistQuantilesWithinABucket(t *testing.T) {
	var h Hist
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	d := HistData(h.Sparse())
	for _, c := range []struct{ q, want float64 }{{0.5, 500}, {0.9, 900}, {0.99, 990}, {1, 1000}} {
		got := d.Quantile(c.q)
		if got < c.want || got > c.want*1.07 {
			t.Errorf("q%.2f = %.1f ms, want %.0f ms to 7 %% above", c.q, got, c.want)
		}
	}
	if d.Count() != 1000 || (HistData{}).Quantile(0.5) != 0 {
		t.Fatalf("count %d", d.Count())
	}
	for v := uint64(0); v < 1<<20; v = v*9/8 + 1 { // buckets are contiguous and ordered
		b := bucketOf(v)
		if bucketLow(b) > v || bucketLow(b+1) <= v {
			t.Fatalf("value %d in bucket %d [%d, %d)", v, b, bucketLow(b), bucketLow(b+1))
		}
	}
}

func TestCheckerCountsLostDuplicatedOutOfOrder(t *testing.T) {
	var c checker
	c.declare("a", 10) // had up to 10 at boot
	for _, s := range []int64{11, 12, 12, 14, 13, 16} {
		c.observe("a", s)
	}
	c.observe("b", 5) // joined during the run: owed from 5 on
	c.observe("b", 6)
	c.observe("x", 3) // no head known: not counted
	heads := map[string]int64{"a": 17, "b": 7}
	if c.caughtUp(heads) {
		t.Fatal("caught up with 15, 17 and 7 missing")
	}
	lost, dups, ooo := c.tally(heads)
	if lost != 3 || dups != 1 || ooo != 1 { // 15, 17 of a; 7 of b
		t.Fatalf("lost %d dups %d ooo %d, want 3 1 1", lost, dups, ooo)
	}
	c.observe("a", 15)
	c.observe("a", 17)
	c.observe("b", 7)
	if !c.caughtUp(heads) {
		t.Fatal("not caught up after the missing seqs arrived")
	}
	if lost, _, _ := c.tally(heads); lost != 0 {
		t.Fatalf("lost %d after catch-up", lost)
	}
}

func TestParseSourceIPs(t *testing.T) {
	got, err := ParseSourceIPs("127.0.0.1-127.0.0.3, 127.0.1.9")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"),
		netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("127.0.1.9")}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v", got)
	}
	for _, bad := range []string{"127.0.0.3-127.0.0.1", "nope", "127.0.0.1-::1", "10.0.0.0-10.1.0.0"} {
		if _, err := ParseSourceIPs(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if got, err := ParseSourceIPs(""); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v %v", got, err)
	}
}

func TestDataMergeAcrossProcesses(t *testing.T) {
	start := time.Now().Add(-3 * time.Second)
	a, b := NewRecorder(start), NewRecorder(start)
	a.Conns.Store(5)
	a.SampleConns(start.Add(500 * time.Millisecond))
	b.Conns.Store(7)
	b.SampleConns(start.Add(500 * time.Millisecond))
	a.Delivery(start.Add(1500*time.Millisecond), 10*time.Millisecond, true, a.Hist("delivery"))
	b.Delivery(start.Add(2500*time.Millisecond), 30*time.Millisecond, true, b.Hist("delivery"))
	b.Error(start.Add(2500*time.Millisecond), "post: rate_limited")
	a.SetExtra("storm_all_back_s", 2)
	b.SetExtra("storm_all_back_s", 3)
	a.SetExtra("storm_dropped", 5)
	b.SetExtra("storm_dropped", 7)
	d := a.Data()
	d.Merge(b.Data())
	if len(d.Seconds) != 3 || d.Seconds[2].Conns != 12 || d.Seconds[0].Conns != 12 {
		t.Fatalf("seconds %+v", d.Seconds)
	}
	if d.Seconds[1].Deliveries != 1 || d.Seconds[2].Deliveries != 1 || d.Seconds[2].Errors["post: rate_limited"] != 1 {
		t.Fatalf("seconds %+v", d.Seconds)
	}
	if d.Extra["storm_all_back_s"] != 3 || d.Extra["storm_dropped"] != 12 {
		t.Fatalf("extra %v: times are maxima, counts add", d.Extra)
	}
	if s := d.Hists["delivery"].Summarize(); s.Count != 2 || s.Max < 30 || s.P50 > 11 {
		t.Fatalf("delivery %+v", s)
	}
}

func TestMessageTextCarriesSendTime(t *testing.T) {
	now := time.Now()
	txt := messageText(now, 200)
	if len(txt) != 200 {
		t.Fatalf("len %d", len(txt))
	}
	got, ok := sentAt([]byte(`{"message":{"id":"m1","text":"` + txt + `"}}`))
	if !ok || !got.Equal(time.Unix(0, now.UnixNano())) {
		t.Fatalf("sentAt %v %v, want %v", got, ok, now)
	}
	if _, ok := sentAt([]byte(`{"message":{"text":"hello"}}`)); ok {
		t.Fatal("a plain message has a send time")
	}
}

func TestHTMLReportIsSelfContainedSVG(t *testing.T) {
	r := &Result{Scenario: "hot-channel", URL: "http://127.0.0.1:8080", Pass: true,
		Latency: map[string]Summary{"delivery": {Count: 3, P50: 1, P90: 2, P99: 3, Max: 4}},
		Errors:  map[string]int64{"post: <script>": 1}}
	for i := range 5 {
		r.Timeline = append(r.Timeline, Point{T: i, Deliveries: int64(100 * i), Conns: 10, P99: float64(i), Measured: uint64(i % 3)})
	}
	var buf bytes.Buffer
	if err := r.HTML(&buf); err != nil {
		t.Fatal(err)
	}
	s := buf.String()
	if strings.Count(s, "<svg") != 5 || strings.Contains(s, "<script>") || strings.Contains(s, "src=") {
		t.Fatalf("report:\n%s", s)
	}
	// Each plot is well-formed XML.
	for _, part := range strings.Split(s, "<svg")[1:] {
		svg := "<svg" + part[:strings.Index(part, "</svg>")+len("</svg>")]
		if err := xml.Unmarshal([]byte(svg), new(struct{})); err != nil {
			t.Fatalf("svg does not parse: %v\n%s", err, svg)
		}
	}
}

func TestCheckerFirstEventsOutOfOrderAndSeqsPastHead(t *testing.T) {
	var c checker
	// A channel joined during the run whose first two events came swapped:
	// the later arrival is out of order, not a duplicate.
	c.observe("c", 5)
	if dup, ooo := c.observe("c", 4); dup || !ooo {
		t.Fatalf("seq 4 after 5 on an undeclared channel: dup %v ooo %v, want false true", dup, ooo)
	}
	if dup, _ := c.observe("c", 4); !dup {
		t.Fatal("seq 4 again is a duplicate")
	}
	// A seq past the head does not stand in for a missing one below it.
	c.declare("a", 10)
	c.observe("a", 11)
	c.observe("a", 13)
	heads := map[string]int64{"a": 12, "c": 5}
	if c.caughtUp(heads) {
		t.Fatal("caught up with seq 12 of a missing")
	}
	lost, dups, ooo := c.tally(heads)
	if lost != 1 || dups != 1 || ooo != 1 {
		t.Fatalf("lost %d dups %d ooo %d, want 1 1 1", lost, dups, ooo)
	}
	c.observe("a", 12)
	if !c.caughtUp(heads) {
		t.Fatal("not caught up after seq 12 arrived")
	}
}

// The schedules' extras become the offered-load rows; a schedule below 95 %
// of its asked rate is marked not comparable.
func TestOfferedLoadFromExtras(t *testing.T) {
	extra := map[string]float64{
		"post_asked_rate": 100, "post_achieved_rate": 94.9, "post_late_starts": 12, "post_at_cap": 3,
		"join_asked_rate": 200, "join_achieved_rate": 199, "join_late_starts": 0,
		"storm_all_back_s": 2,
	}
	got := offered(extra)
	want := []Offered{
		{Name: "join", Asked: 200, Achieved: 199, Comparable: true},
		{Name: "post", Asked: 100, Achieved: 94.9, Late: 12, AtCap: 3},
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("offered %+v, want %+v", got, want)
	}
	var b strings.Builder
	(&Result{Offered: got, Extra: extra}).Print(&b)
	out := b.String()
	if !strings.Contains(out, "post rate (open-loop)") || !strings.Contains(out, "100.0/s asked, 94.9/s achieved, 12 late starts (3 at the in-flight cap)  NOT COMPARABLE") ||
		strings.Contains(out, "199.0/s achieved, 0 late starts (0 at the in-flight cap)  NOT") ||
		strings.Contains(out, "post_at_cap") ||
		strings.Contains(out, "post_late_starts") || !strings.Contains(out, "storm_all_back_s") {
		t.Fatalf("summary:\n%s", out)
	}
}

// A channel.summary covers the seqs after the user's position up to its
// last_seq: they count as received, a hole before the position stays lost,
// an event the summary covered that still arrives is a duplicate, and a
// summary behind the position covers nothing.
func TestCheckerSummariesCover(t *testing.T) {
	var c checker
	c.declare("g", 10)
	c.observe("g", 11)
	c.observe("g", 13) // 12 missing: a hole before the summary
	if n := c.cover("g", 20); n != 7 {
		t.Fatalf("covered %d, want 7 (14…20)", n)
	}
	if n := c.cover("g", 18); n != 0 {
		t.Fatalf("a summary behind the position covered %d", n)
	}
	if dup, ooo := c.observe("g", 21); dup || ooo {
		t.Fatal("21 after a summary to 20: neither duplicate nor out of order")
	}
	c.observe("g", 19) // covered by the summary, sent anyway
	c.cover("s", 40)   // a channel first heard of by its summary: owed from 41
	c.observe("s", 41)
	heads := map[string]int64{"g": 22, "s": 42}
	lost, dups, ooo := c.tally(heads)
	if lost != 3 || dups != 1 || ooo != 0 { // 12 and 22 of g, 42 of s
		t.Fatalf("lost %d dups %d ooo %d, want 3 1 0", lost, dups, ooo)
	}
	if covered, behind := c.summarized(); covered != 7 || behind != 1 {
		t.Fatalf("covered %d behind %d, want 7 1", covered, behind)
	}
	c.observe("g", 12)
	if c.caughtUp(heads) {
		t.Fatal("caught up with 22 and 42 missing")
	}
	c.cover("g", 22)
	c.cover("s", 42)
	if !c.caughtUp(heads) {
		t.Fatal("not caught up after summaries to the heads")
	}
}
