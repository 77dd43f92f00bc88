package loadtest

import (
	"maps"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Hist is a latency histogram in microseconds with log-linear buckets
// (16 per power of two, so about 6 % wide). Recording is lock-free; a Hist
// merges with others (several worker processes) and serializes sparsely.
type Hist struct {
	counts [histBuckets]atomic.Uint64
}

const histBuckets = 16 * 64

// bucketOf maps a value to its bucket.
func bucketOf(v uint64) int {
	if v < 16 {
		return int(v)
	}
	e := bits.Len64(v) - 5 // keep the top 5 bits
	return 16*e + int(v>>e)
}

// bucketLow is the smallest value of bucket i.
func bucketLow(i int) uint64 {
	if i < 32 {
		return uint64(i)
	}
	e := i/16 - 1
	return uint64(16+i%16) << e
}

// Record adds one latency.
func (h *Hist) Record(d time.Duration) {
	us := max(d.Microseconds(), 0)
	h.counts[bucketOf(uint64(us))].Add(1)
}

// Sparse returns the non-empty buckets, bucket index → count.
func (h *Hist) Sparse() map[int]uint64 {
	out := map[int]uint64{}
	for i := range h.counts {
		if n := h.counts[i].Load(); n > 0 {
			out[i] = n
		}
	}
	return out
}

// HistData is a histogram as it travels between processes and into the
// result file: bucket index → count.
type HistData map[int]uint64

// Merge adds o into d.
func (d HistData) Merge(o HistData) {
	for k, v := range o {
		d[k] += v
	}
}

// Count is the number of values.
func (d HistData) Count() uint64 {
	var n uint64
	for _, v := range d {
		n += v
	}
	return n
}

// Quantile returns the q-quantile (0 < q ≤ 1) in milliseconds: the upper
// bound of the bucket that holds it (0 for an empty histogram).
func (d HistData) Quantile(q float64) float64 {
	total := d.Count()
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for _, k := range slices.Sorted(maps.Keys(d)) {
		seen += d[k]
		if seen >= rank {
			return float64(bucketLow(k+1)) / 1000
		}
	}
	return 0
}

// Summary are a histogram's figures in milliseconds.
type Summary struct {
	Count uint64  `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// Summarize computes the percentiles.
func (d HistData) Summarize() Summary {
	return Summary{Count: d.Count(), P50: d.Quantile(0.5), P90: d.Quantile(0.9), P99: d.Quantile(0.99), Max: d.Quantile(1)}
}

// second accumulates one second of the run.
type second struct {
	deliveries atomic.Int64 // durable events received (any source)
	posts      atomic.Int64 // actions sent (messages, joins, reactions…)
	latency    Hist         // action → delivery of live messages and joins

	mu     sync.Mutex
	errors map[string]int64 // guarded by mu
}

// maxSeconds bounds a run's timeline.
const maxSeconds = 4 * 3600

// Recorder collects a run's measurements. It is safe for concurrent use.
type Recorder struct {
	start time.Time
	secs  []atomic.Pointer[second]

	// Gauges and totals.
	Conns      atomic.Int64 // sessions live now
	Dials      atomic.Int64 // connections attempted
	Deliveries atomic.Int64
	Posts      atomic.Int64
	Errors     atomic.Int64

	// Whole-run histograms by series name (delivery, connect, boot,
	// resume, join, post).
	mu    sync.Mutex
	hists map[string]*Hist   // guarded by mu
	errs  map[string]int64   // by kind; guarded by mu
	conns map[int]int64      // connections at the end of each second; guarded by mu
	extra map[string]float64 // scenario figures; guarded by mu
}

// NewRecorder starts a recorder whose timeline begins at start.
func NewRecorder(start time.Time) *Recorder {
	return &Recorder{start: start, secs: make([]atomic.Pointer[second], maxSeconds),
		hists: map[string]*Hist{}, errs: map[string]int64{}, conns: map[int]int64{}, extra: map[string]float64{}}
}

func (r *Recorder) sec(t time.Time) *second {
	i := int(t.Sub(r.start) / time.Second)
	i = min(max(i, 0), maxSeconds-1)
	if s := r.secs[i].Load(); s != nil {
		return s
	}
	s := &second{}
	if r.secs[i].CompareAndSwap(nil, s) {
		return s
	}
	return r.secs[i].Load()
}

// Hist returns the named whole-run histogram.
func (r *Recorder) Hist(name string) *Hist {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.hists[name]
	if h == nil {
		h = &Hist{}
		r.hists[name] = h
	}
	return h
}

// Delivery records a received durable event; when live, lat is its
// action → delivery latency (a message's post, a member's join), recorded
// in the second's timeline and in all.
func (r *Recorder) Delivery(now time.Time, lat time.Duration, live bool, all *Hist) {
	r.Deliveries.Add(1)
	s := r.sec(now)
	s.deliveries.Add(1)
	if live {
		s.latency.Record(lat)
		all.Record(lat)
	}
}

// Post records one action sent.
func (r *Recorder) Post(now time.Time) {
	r.Posts.Add(1)
	r.sec(now).posts.Add(1)
}

// Error records a failure of a kind ("post", "connect: rate_limited"…).
func (r *Recorder) Error(now time.Time, kind string) {
	r.Errors.Add(1)
	s := r.sec(now)
	s.mu.Lock()
	if s.errors == nil {
		s.errors = map[string]int64{}
	}
	s.errors[kind]++
	s.mu.Unlock()
	r.mu.Lock()
	r.errs[kind]++
	r.mu.Unlock()
}

// SampleConns notes the live connections at now (once a second).
func (r *Recorder) SampleConns(now time.Time) {
	i := int(now.Sub(r.start) / time.Second)
	r.mu.Lock()
	r.conns[i] = r.Conns.Load()
	r.mu.Unlock()
}

// SetExtra records a scenario figure such as "storm_all_back_s".
func (r *Recorder) SetExtra(name string, v float64) {
	r.mu.Lock()
	r.extra[name] = v
	r.mu.Unlock()
}

// AddExtra adds v to a scenario figure.
func (r *Recorder) AddExtra(name string, v float64) {
	r.mu.Lock()
	r.extra[name] += v
	r.mu.Unlock()
}

// extraValue reads a scenario figure (0 if unset).
func (r *Recorder) extraValue(name string) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.extra[name]
}

// SecondData is one second of the timeline.
type SecondData struct {
	T          int              `json:"t"` // seconds since the start
	Deliveries int64            `json:"deliveries"`
	Posts      int64            `json:"posts"`
	Conns      int64            `json:"conns"`
	Errors     map[string]int64 `json:"errors,omitempty"`
	Latency    HistData         `json:"latency,omitempty"`
}

// Data is a recorder's content, mergeable with other processes'.
type Data struct {
	Seconds []SecondData        `json:"seconds"`
	Hists   map[string]HistData `json:"hists"`
	Errors  map[string]int64    `json:"errors"`
	Extra   map[string]float64  `json:"extra,omitempty"`
}

// Data snapshots the recorder.
func (r *Recorder) Data() Data {
	d := Data{Hists: map[string]HistData{}, Errors: map[string]int64{}, Extra: map[string]float64{}}
	r.mu.Lock()
	for k, h := range r.hists {
		d.Hists[k] = h.Sparse()
	}
	maps.Copy(d.Errors, r.errs)
	maps.Copy(d.Extra, r.extra)
	conns := maps.Clone(r.conns)
	r.mu.Unlock()
	last := 0
	for i := range r.secs {
		if r.secs[i].Load() != nil {
			last = i
		}
	}
	for i := range conns {
		last = max(last, i)
	}
	var prevConns int64
	for i := 0; i <= last; i++ {
		sd := SecondData{T: i}
		if c, ok := conns[i]; ok {
			prevConns = c
		}
		sd.Conns = prevConns
		if s := r.secs[i].Load(); s != nil {
			sd.Deliveries, sd.Posts = s.deliveries.Load(), s.posts.Load()
			sd.Latency = s.latency.Sparse()
			s.mu.Lock()
			if len(s.errors) > 0 {
				sd.Errors = maps.Clone(s.errors)
			}
			s.mu.Unlock()
		}
		d.Seconds = append(d.Seconds, sd)
	}
	return d
}

// Merge adds another process's data into d (same timeline origin).
func (d *Data) Merge(o Data) {
	var dLast int64 // d's last connection count carries on past its end
	if n := len(d.Seconds); n > 0 {
		dLast = d.Seconds[n-1].Conns
	}
	for len(d.Seconds) < len(o.Seconds) {
		d.Seconds = append(d.Seconds, SecondData{T: len(d.Seconds), Conns: dLast})
	}
	for i, s := range o.Seconds {
		t := &d.Seconds[i]
		t.Deliveries += s.Deliveries
		t.Posts += s.Posts
		t.Conns += s.Conns
		for k, v := range s.Errors {
			if t.Errors == nil {
				t.Errors = map[string]int64{}
			}
			t.Errors[k] += v
		}
		if len(s.Latency) > 0 {
			if t.Latency == nil {
				t.Latency = HistData{}
			}
			t.Latency.Merge(s.Latency)
		}
	}
	// A process whose timeline is shorter keeps its last connection count.
	if n := len(o.Seconds); n > 0 {
		for i := n; i < len(d.Seconds); i++ {
			d.Seconds[i].Conns += o.Seconds[n-1].Conns
		}
	}
	if d.Hists == nil {
		d.Hists = map[string]HistData{}
	}
	for k, h := range o.Hists {
		if d.Hists[k] == nil {
			d.Hists[k] = HistData{}
		}
		d.Hists[k].Merge(h)
	}
	if d.Errors == nil {
		d.Errors = map[string]int64{}
	}
	for k, v := range o.Errors {
		d.Errors[k] += v
	}
	if d.Extra == nil {
		d.Extra = map[string]float64{}
	}
	for k, v := range o.Extra {
		// Times ("_s") are maxima: the slowest process decides; counts add.
		if strings.HasSuffix(k, "_s") {
			d.Extra[k] = max(d.Extra[k], v)
		} else {
			d.Extra[k] += v
		}
	}
}
