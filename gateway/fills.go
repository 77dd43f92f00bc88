package gateway

import (
	"context"
	"sync"
	"time"

	"parley"
)

// fillPool runs the node's catch-up reads: the reads of a channel's log
// that bring sessions which fell behind the node's stream back to it. It is
// shared by every partition. At most limit reads run at once, each on one
// of at most limit goroutines; a session whose read must wait is an entry
// in a job's list, not a goroutine. Sessions that need the same channel
// share one read: a request joins the channel's queued job (which then
// reads from the lowest position asked for) or the read in flight from the
// same position. A session given events it already has skips them
// (fillDone), so a shared read never gives anything twice.
//
// The results go back to each session's partition through its inbox, one
// request per partition and read, so session state stays the partition
// goroutine's alone.
type fillPool struct {
	limit    int                     // Config.FillConcurrency
	live     parley.LiveConfigSource // GatewayFillConcurrency > 0 overrides limit
	readLog  func(ctx context.Context, channelID string, after int64, limit int) ([]parley.Event, error)
	tail     *streamTail // answers first, when it holds the position asked for
	prepare  func(evs []parley.Event, recv time.Time) []*event
	now      func() time.Time
	metrics  *metrics
	logPanic func(where string, v any, attrs ...any)
	// stuck: a read in flight this long takes no more joiners (its answer
	// is overdue; partitionEnv.fillStuck asks again for its sessions).
	stuck time.Duration

	mu       sync.Mutex
	queue    []*fillJob           // waiting for a worker, oldest first
	queued   map[string]*fillJob  // by channel: its job in queue, if any
	inflight map[fillKey]*fillJob // being read
	running  int                  // worker goroutines
}

type fillKey struct {
	channelID string
	after     int64
}

// fillJob is one read of a channel's log and the sessions waiting for it,
// by partition.
type fillJob struct {
	fillKey
	waiters map[*partition][]*session // guarded by fillPool.mu
	started time.Time                 // when its read began; guarded by fillPool.mu
	// orphan: overdue and replaced; its worker no longer counts toward
	// the limit and ends after its read. Guarded by fillPool.mu.
	orphan bool
}

func newFillPool(limit int, g *Gateway) *fillPool {
	return &fillPool{
		limit:    limit,
		live:     g.cfg.Live,
		readLog:  g.store.ChannelLog,
		tail:     g.tail,
		prepare:  g.prepare,
		now:      g.now,
		metrics:  g.metrics,
		logPanic: g.logPanic,
		stuck:    fillStuck,
		queued:   map[string]*fillJob{},
		inflight: map[fillKey]*fillJob{},
	}
}

func (j *fillJob) add(p *partition, s *session) {
	j.waiters[p] = append(j.waiters[p], s)
}

// sessions counts the sessions waiting for j (for a log line).
func (f *fillPool) sessions(j *fillJob) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, ss := range j.waiters {
		n += len(ss)
	}
	return n
}

// request asks for the channel's log after after on behalf of session s of
// partition p; p.fillDone (or p.fillPanicked) gets the answer. Called on
// p's goroutine; it never blocks on the store. When the node's tail of the
// channel's stream holds after+1 onwards, that is the answer, with no read
// (it comes back through p's inbox like a read's, so the session's state
// moves the same way).
func (f *fillPool) request(p *partition, s *session, channelID string, after int64) {
	if es, ok := f.tail.window(channelID, after, fillLimit); ok {
		f.metrics.fillStream.Inc()
		p.postAsync(func() { p.fillAnswer(s, channelID, es, nil, false) })
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if j := f.inflight[fillKey{channelID, after}]; j != nil {
		if f.now().Sub(j.started) < f.stuck {
			j.add(p, s)
			return
		}
		// Overdue: its answer may never come. A new read takes its place
		// for joiners, on a worker of its own; its own waiters still get
		// its answer if it does come.
		delete(f.inflight, j.fillKey)
		j.orphan = true
		f.running--
	}
	if j := f.queued[channelID]; j != nil {
		j.after = min(j.after, after)
		j.add(p, s)
		return
	}
	j := &fillJob{fillKey: fillKey{channelID, after}, waiters: map[*partition][]*session{}}
	j.add(p, s)
	f.queued[channelID] = j
	f.queue = append(f.queue, j)
	if f.running < f.limitNow() {
		f.running++
		go f.work()
	}
}

// limitNow is how many reads may run at once: the live key's, if set.
func (f *fillPool) limitNow() int {
	if f.live != nil {
		if n := f.live.LiveConfig().GatewayFillConcurrency; n > 0 {
			return n
		}
	}
	return f.limit
}

// work runs queued jobs until none is left.
func (f *fillPool) work() {
	for {
		f.mu.Lock()
		// A lowered limit takes effect as workers finish their reads.
		if len(f.queue) == 0 || f.running > f.limitNow() {
			f.running--
			f.mu.Unlock()
			return
		}
		j := f.queue[0]
		f.queue[0] = nil
		f.queue = f.queue[1:]
		delete(f.queued, j.channelID)
		// Another job of this channel from the same position may be in
		// flight (this one's position was lowered to it): then this one
		// takes no new joiners.
		if f.inflight[j.fillKey] == nil {
			f.inflight[j.fillKey] = j
		}
		j.started = f.now()
		f.mu.Unlock()
		f.run(j)
		f.mu.Lock()
		orphan := j.orphan
		f.mu.Unlock()
		if orphan {
			return // replaced while it read: no longer counted in running
		}
	}
}

// run reads the log for one job and hands the result to its sessions.
func (f *fillPool) run(j *fillJob) {
	f.metrics.fillReads.Inc()
	f.metrics.fillsInFlight.Inc()
	es, err, panicked := f.read(j)
	f.metrics.fillsInFlight.Dec()
	f.mu.Lock()
	if f.inflight[j.fillKey] == j {
		delete(f.inflight, j.fillKey)
	}
	waiters := j.waiters
	j.waiters = nil
	f.mu.Unlock()
	for p, ss := range waiters {
		channelID := j.channelID
		p.post(func() {
			for _, s := range ss {
				p.fillAnswer(s, channelID, es, err, panicked)
			}
		})
	}
}

func (f *fillPool) read(j *fillJob) (es []*event, err error, panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			f.logPanic(panicFill, v, "channel_id", j.channelID, "sessions", f.sessions(j))
			es, err, panicked = nil, nil, true
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	evs, err := f.readLog(ctx, j.channelID, j.after, fillLimit)
	return f.prepare(evs, f.now()), err, false
}
