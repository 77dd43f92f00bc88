package presence

import (
	"context"
	"time"

	"parley"
)

// OnlineUsers returns those of userIDs who are online (not away, not
// offline) anywhere in the cluster, asking every live node when this one
// cannot tell: unlike Status, it sees a user whose sessions are all on
// other nodes and whom no session here watches. For decisions that can
// afford a bus round trip (whether to email someone), not for every
// message: it costs one query per 500 users not online here, and waits for
// every live node's answer or QueryTimeout, or until ctx is done.
//
// A user set away by hand is away everywhere, and not online. When a node
// does not answer in time, what it would have said is unknown and its
// users count as not online (the caller's fallback: they get the email).
func (t *Tracker) OnlineUsers(ctx context.Context, userIDs []string) []string {
	now := t.now()
	t.mu.Lock()
	var out, ask []string
	for _, id := range userIDs {
		if _, away := t.manual[id]; away {
			continue
		}
		if u := t.local[id]; u != nil && len(u.sessions) > 0 && u.status == stOnline {
			out = append(out, id)
			continue
		}
		ask = append(ask, id)
	}
	if t.bus == nil || t.closed || len(ask) == 0 {
		t.mu.Unlock()
		return out
	}
	var qs []*query
	for len(ask) > 0 {
		chunk := ask[:min(len(ask), maxBatch)]
		ask = ask[len(chunk):]
		t.nextQID++
		q := &query{id: t.nextQID, users: chunk, expect: t.livePeers(), deadline: now + t.qTimeout,
			probe: map[string]bool{}, done: make(chan struct{})}
		if len(q.expect) == 0 && now >= t.startupUntil {
			continue // this node is alone: nobody else has sessions
		}
		t.queries[q.id] = q
		qs = append(qs, q)
		t.m.queries.Inc()
		t.out = append(t.out, t.ctlEvent(parley.EventPresenceQuery, parley.TopicPresenceControl, ctlMsg{QID: q.id, UserIDs: chunk}))
	}
	out2 := t.takeOut()
	t.mu.Unlock()
	t.publish(out2)

	// The sweeper completes a query at its deadline; the timer is a
	// backstop in case this tracker closes meanwhile.
	timeout := time.NewTimer(time.Duration(t.qTimeout) + time.Second)
	defer timeout.Stop()
	for _, q := range qs {
		select {
		case <-q.done:
		case <-ctx.Done():
		case <-timeout.C:
		case <-t.done:
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, q := range qs {
		delete(t.queries, q.id)
		for _, id := range q.users {
			if _, away := t.manual[id]; q.probe[id] && !away {
				out = append(out, id)
			}
		}
	}
	return out
}
