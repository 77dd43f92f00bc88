package presence

import (
	"container/heap"
	"time"

	"parley"
)

// Deadlines of local users. One goroutine per tracker (the sweeper) applies
// them every SweepInterval; there is no timer or goroutine per user.

const (
	dlAway uint8 = iota
	dlGrace
)

type deadline struct {
	at   int64 // unix ns
	u    *localUser
	kind uint8
}

// deadlineHeap is a min-heap by at. A user has at most one entry of each
// kind (awayQueued, graceQueued); entries of deleted users are skipped.
type deadlineHeap []deadline

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h deadlineHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap) Push(x any)        { *h = append(*h, x.(deadline)) }
func (h *deadlineHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	old[len(old)-1] = deadline{}
	*h = old[:len(old)-1]
	return d
}

func (h *deadlineHeap) push(d deadline) { heap.Push(h, d) }

// purge drops a dead node's contributions (of incarnation boot) at `at`,
// unless the node came back meanwhile.
type purge struct {
	node string
	boot int64
	at   int64
}

func (t *Tracker) sweepLoop(every time.Duration) {
	defer t.wg.Done()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-t.done:
			return
		case <-tick.C:
			t.sweep()
		}
	}
}

// sweep applies every deadline that is due: local away and grace, dead
// nodes' expiry and purge, query timeouts, and this node's heartbeat.
func (t *Tracker) sweep() {
	now := t.now()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	for len(t.deadlines) > 0 && t.deadlines[0].at <= now {
		d := heap.Pop(&t.deadlines).(deadline)
		switch d.kind {
		case dlAway:
			t.fireAway(d.u, now)
		case dlGrace:
			t.fireGrace(d.u, now)
		}
	}
	t.sweepNodes(now)
	for _, q := range t.queries {
		switch {
		case now >= q.deadline:
			t.m.queryTimeouts.Inc()
			t.completeQuery(q)
		case len(q.expect) == 0 && now >= t.startupUntil:
			t.completeQuery(q)
		}
	}
	if t.hbEvery > 0 && now >= t.nextAlive {
		t.nextAlive = now + t.hbEvery
		t.out = append(t.out, t.ctlEvent(parley.EventPresenceAlive, parley.TopicPresenceControl, ctlMsg{}))
	}
	out := t.takeOut()
	t.mu.Unlock()
	t.publish(out)
	t.checkReconnect()
}

// checkReconnect notices that the bus connection came back: messages may
// have been lost meanwhile, so the node re-announces itself and asks again
// for the presence of every user it watches.
func (t *Tracker) checkReconnect() {
	if t.bus == nil {
		return
	}
	up := t.bus.Connected()
	back := up && !t.wasConnected && t.everConnected
	t.wasConnected = up
	if up {
		t.everConnected = true
	}
	if !back {
		return
	}
	t.log.Info("presence resync after bus reconnect")
	now := t.now()
	t.mu.Lock()
	if t.hbEvery > 0 {
		t.nextAlive = now + t.hbEvery
		t.out = append(t.out, t.ctlEvent(parley.EventPresenceAlive, parley.TopicPresenceControl, ctlMsg{}))
	}
	t.requery("", now)
	t.manualSynced = false
	for id, p := range t.peers {
		if p.live {
			t.syncManual(id)
			break
		}
	}
	out := t.takeOut()
	t.mu.Unlock()
	t.publish(out)
}

// ctlEvent builds a control message from this node; topic is the control
// topic or a node topic.
func (t *Tracker) ctlEvent(typ, topic string, m ctlMsg) parley.Event {
	m.NodeID = t.node
	m.Boot = t.boot
	return newEvent(typ, topic, m, t.now())
}
