package presence

import (
	"slices"
)

// Watcher is one consumer's set of watched users (a gateway session's
// presence_sub). Its function is called with each watched user's current
// presence when the user is added, then with every change of that user's
// aggregated presence.
//
// Calls come from the tracker's one dispatcher goroutine, in order, with no
// tracker lock held: fn must be quick (enqueue and return) and may call the
// Tracker. A watcher is never told the same status twice in a row. After
// Close returns no new call starts, though one already under way may still
// be running.
type Watcher struct {
	t      *Tracker
	fn     func(userID, status string)
	users  []string // guarded by t.mu; sorted, no duplicates
	closed bool     // guarded by t.mu
}

// watchedUser is a user that some local watcher wants: the node holds the
// user's presence topic subscription and every other node's contribution.
type watchedUser struct {
	watchers map[*Watcher]bool // true once told the user's status (notified)
	remote   []contrib         // other nodes' contributions, at most one per node
	unsub    func() error
	syncQ    uint64 // the query whose answers give the first status
	synced   bool   // first status known; watchers are told
	status   status // current aggregate
	notified status // last aggregate told to every watcher marked true
}

// contrib is another node's report of a user: that node's sessions of the
// user make them online or away there, or the node has none (offline).
type contrib struct {
	node   string
	boot   int64
	v      uint64
	status status
}

// note is a pending notification: w set — tell w the current status of
// user (it was just added); w nil — tell every watcher of user its change.
type note struct {
	w    *Watcher
	user string
}

// call is a notification ready to run outside the lock.
type call struct {
	fn     func(userID, status string)
	user   string
	status string
}

// Watch calls fn with the current presence of each of userIDs, then on
// every change of their aggregated presence, until cancel is called. See
// Watcher for when and how fn is called.
func (t *Tracker) Watch(userIDs []string, fn func(userID, status string)) (cancel func()) {
	w := t.NewWatcher(fn)
	w.Set(userIDs)
	return w.Close
}

// NewWatcher returns a watcher of no users yet; Set gives it its users.
func (t *Tracker) NewWatcher(fn func(userID, status string)) *Watcher {
	return &Watcher{t: t, fn: fn}
}

// Set replaces the watched users. Users newly added get their current
// presence at once; users kept are not told again; users removed are not
// told any more. This is what a gateway calls on presence_sub.
func (w *Watcher) Set(userIDs []string) {
	next := slices.Clone(userIDs)
	slices.Sort(next)
	next = slices.Compact(next)
	if len(next) > 0 && next[0] == "" {
		next = next[1:]
	}
	t := w.t
	now := t.now()
	t.mu.Lock()
	if w.closed || t.closed {
		t.mu.Unlock()
		return
	}
	var added []string // users new to this node
	prev := w.users
	i, j := 0, 0
	for i < len(prev) || j < len(next) {
		switch {
		case j == len(next) || (i < len(prev) && prev[i] < next[j]):
			t.unwatch(prev[i], w)
			i++
		case i == len(prev) || next[j] < prev[i]:
			if t.watch(next[j], w) {
				added = append(added, next[j])
			}
			j++
		default:
			i++
			j++
		}
	}
	t.m.watchers.Add(float64(len(next) - len(prev)))
	w.users = next
	if len(added) > 0 {
		t.startSync(added, now)
	}
	out := t.takeOut()
	t.mu.Unlock()
	t.publish(out)
}

// Close ends the watcher: no more calls.
func (w *Watcher) Close() {
	t := w.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	if !t.closed {
		for _, id := range w.users {
			t.unwatch(id, w)
		}
	}
	t.m.watchers.Sub(float64(len(w.users)))
	w.users = nil
}

// watch adds w to the watchers of user. It reports whether the user is new
// to this node (then subscribed to, and to be asked about).
func (t *Tracker) watch(user string, w *Watcher) bool {
	wu := t.watched[user]
	fresh := wu == nil
	if fresh {
		wu = &watchedUser{watchers: make(map[*Watcher]bool, 1)}
		t.watched[user] = wu
		t.m.watchedUsers.Inc()
		unsub, err := t.subscribe(topicOf(user), t.onTopic)
		if err != nil {
			t.log.Error("presence subscribe", "user_id", user, "err", err)
		}
		wu.unsub = unsub
	}
	wu.watchers[w] = false
	if wu.synced {
		t.addNote(note{w: w, user: user})
	}
	return fresh
}

// unwatch removes w from the watchers of user; the last one out ends the
// node's subscription to the user's presence topic.
func (t *Tracker) unwatch(user string, w *Watcher) {
	wu := t.watched[user]
	if wu == nil {
		return
	}
	delete(wu.watchers, w)
	if len(wu.watchers) == 0 {
		t.unsubscribeUser(user, wu)
		delete(t.watched, user)
		t.m.watchedUsers.Dec()
	}
}

func (t *Tracker) unsubscribeUser(user string, wu *watchedUser) {
	if wu.unsub == nil {
		return
	}
	if err := wu.unsub(); err != nil {
		t.log.Debug("presence unsubscribe", "user_id", user, "err", err)
	}
	wu.unsub = nil
}

// aggregate is the user's presence over every node: online if any node
// says online, else away if any says away, else offline; a user set away
// by hand who is anywhere is away.
func (t *Tracker) aggregate(user string, wu *watchedUser) status {
	s := stOffline
	if u := t.local[user]; u != nil {
		s = u.status
	}
	for i := range wu.remote {
		s = max(s, wu.remote[i].status)
	}
	if s != stOffline {
		if _, ok := t.manual[user]; ok {
			s = stAway
		}
	}
	return s
}

// userChanged re-aggregates a watched user after any input changed, and
// queues a notification when the result differs.
func (t *Tracker) userChanged(user string) {
	wu := t.watched[user]
	if wu == nil {
		return
	}
	s := t.aggregate(user, wu)
	if s == wu.status {
		return
	}
	wu.status = s
	if wu.synced {
		t.addNote(note{user: user})
	}
}

// markSynced makes the user's first status known and tells every watcher.
func (t *Tracker) markSynced(user string, wu *watchedUser) {
	wu.synced = true
	wu.status = t.aggregate(user, wu)
	wu.notified = wu.status
	for w := range wu.watchers {
		t.addNote(note{w: w, user: user})
	}
}

func (t *Tracker) addNote(n note) {
	t.notes = append(t.notes, n)
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// dispatchLoop turns notes into calls. It reads the status when it
// dispatches, not when the note was queued, so a flap that comes and goes
// before the dispatcher runs is never reported. A new watcher is first told
// `notified`, what the others were last told; changes after that reach it
// like everyone else, so it sees neither a repeat nor a stale status.
func (t *Tracker) dispatchLoop() {
	defer t.wg.Done()
	var notes []note
	var calls []call
	for {
		select {
		case <-t.done:
			return
		case <-t.wake:
		}
		for {
			t.mu.Lock()
			notes, t.notes = t.notes, notes[:0]
			for _, n := range notes {
				calls = t.appendCalls(calls, n)
			}
			t.mu.Unlock()
			clear(notes)
			if len(calls) == 0 {
				break
			}
			for _, c := range calls {
				c.fn(c.user, c.status)
			}
			t.m.notifications.Add(float64(len(calls)))
			clear(calls)
			calls = calls[:0]
			select {
			case <-t.done:
				return
			default:
			}
		}
	}
}

func (t *Tracker) appendCalls(calls []call, n note) []call {
	wu := t.watched[n.user]
	if wu == nil || !wu.synced {
		return calls
	}
	if n.w != nil {
		if told, ok := wu.watchers[n.w]; ok && !told && !n.w.closed {
			wu.watchers[n.w] = true
			calls = append(calls, call{fn: n.w.fn, user: n.user, status: wu.notified.String()})
		}
		return calls
	}
	if wu.status == wu.notified {
		return calls
	}
	wu.notified = wu.status
	s := wu.status.String()
	for w, told := range wu.watchers {
		if told {
			calls = append(calls, call{fn: w.fn, user: n.user, status: s})
		}
	}
	return calls
}
