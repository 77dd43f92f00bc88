package presence

import (
	"encoding/json"
	"fmt"
	"time"

	"parley"
	"parley/nodes"
)

// The tracker's side of the cluster: other nodes (peers) and their
// liveness, their contributions to watched users, queries and answers.

// peer is another node as this one knows it.
type peer struct {
	boot     int64 // its incarnation; 0 until heard from (met through Membership)
	lastSeen int64 // unix ns of its last message
	live     bool  // counted in queries; its contributions stand
	member   bool  // listed by Membership: alive whatever lastSeen says
	gone     bool  // said bye (this incarnation)
}

// query asks the other nodes for their contributions to some users.
type query struct {
	id       uint64
	users    []string
	expect   map[string]struct{} // nodes yet to answer
	deadline int64
	sync     bool // the first status of users waits for it
	// probe is set for OnlineUsers' queries: the users some node answered
	// online for; done is closed when the query completes.
	probe map[string]bool
	done  chan struct{}
}

// startBus subscribes the control topics and announces this node.
func (t *Tracker) startBus() error {
	for _, topic := range []string{parley.TopicPresenceControl, nodeTopic(t.node)} {
		unsub, err := t.bus.Subscribe(topic, t.onControl)
		if err != nil {
			for _, u := range t.unsubs {
				_ = u()
			}
			return fmt.Errorf("presence: subscribe %s: %w", topic, err)
		}
		t.unsubs = append(t.unsubs, unsub)
	}
	// The subscriptions must be in place on the server before anyone can
	// answer our announcement.
	if err := t.bus.Flush(); err != nil {
		t.log.Warn("presence: bus flush at start", "err", err)
	}
	t.wasConnected = t.bus.Connected()
	t.everConnected = t.wasConnected
	now := t.now()
	t.mu.Lock()
	// Until every live node has been heard from, an empty set of known
	// nodes does not mean there are none: queries wait out this window. A
	// node hears the others' answers to its first heartbeat within a round
	// trip, and their regular heartbeats within Heartbeat.
	t.startupUntil = now + min(t.qTimeout, t.startupWait)
	// A node met later than that (Membership may take its own interval to
	// list everyone) may hold users whose first status was reported here
	// without its answer: while young, this node asks each node it meets.
	t.youngUntil = now + max(t.expiry, t.startupWait)
	if t.hbEvery > 0 {
		t.nextAlive = now + t.hbEvery
		t.out = append(t.out, t.ctlEvent(parley.EventPresenceAlive, parley.TopicPresenceControl, ctlMsg{}))
	}
	out := t.takeOut()
	t.mu.Unlock()
	t.publish(out)
	if t.members != nil {
		t.onMembers(t.members.Live())
		t.stopMembers = t.members.Subscribe(t.onMembers)
	}
	return nil
}

// onChanged handles a node's contribution on a watched user's topic.
func (t *Tracker) onChanged(ev parley.Event) {
	if ev.Type != parley.EventPresenceChanged {
		return
	}
	var d changedData
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		t.badMessage(ev, err)
		return
	}
	st, ok := parseStatus(d.Presence)
	if !ok || d.UserID == "" || d.NodeID == "" {
		t.badMessage(ev, fmt.Errorf("bad presence %q of user %q from node %q", d.Presence, d.UserID, d.NodeID))
		return
	}
	now := t.now()
	t.mu.Lock()
	if !t.closed && t.seenPeer(d.NodeID, d.Boot, now) {
		if wu := t.watched[d.UserID]; wu != nil {
			t.applyContrib(d.UserID, wu, d.NodeID, d.Boot, d.V, st)
		}
	}
	out := t.takeOut()
	t.mu.Unlock()
	t.publish(out)
}

// onControl handles the control topic and this node's own topic.
func (t *Tracker) onControl(ev parley.Event) {
	var m ctlMsg
	if err := json.Unmarshal(ev.Data, &m); err != nil {
		t.badMessage(ev, err)
		return
	}
	if m.NodeID == "" {
		t.badMessage(ev, fmt.Errorf("no node id"))
		return
	}
	now := t.now()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	if ev.Type == parley.EventPresenceBye {
		t.peerGone(m.NodeID, m.Boot, now)
	} else if t.seenPeer(m.NodeID, m.Boot, now) {
		switch ev.Type {
		case parley.EventPresenceAlive:
			// seenPeer did it all
		case parley.EventPresenceQuery:
			t.answerQuery(m)
		case parley.EventPresenceState:
			t.applyState(m, now)
		case parley.EventPresenceManual:
			t.applyManual(m.UserID, m.Away, m.At, now)
		case parley.EventPresenceManualSync:
			t.answerManualSync(m.NodeID)
		case parley.EventPresenceManualSet:
			for _, e := range m.Manual {
				t.applyManual(e.UserID, true, e.At, now)
			}
		}
	}
	out := t.takeOut()
	t.mu.Unlock()
	t.publish(out)
}

func (t *Tracker) badMessage(ev parley.Event, err error) {
	t.m.badMessages.Inc()
	t.log.Warn("presence: bad message", "type", ev.Type, "topics", ev.Topics, "err", err)
}

// seenPeer notes a message from node id (incarnation boot) and reports
// whether the message is to be used: not from this node, not from an
// earlier incarnation, not after the node said bye.
func (t *Tracker) seenPeer(id string, boot, now int64) bool {
	if id == t.node {
		return false
	}
	p := t.peers[id]
	switch {
	case p == nil:
		t.peers[id] = &peer{boot: boot, lastSeen: now, live: true}
		t.peerMet(id)
		if now < t.youngUntil {
			t.requery(id, now)
		}
		return true
	case boot < p.boot:
		return false
	case boot > p.boot:
		if p.boot != 0 {
			// Restarted: the sessions of its earlier incarnation are gone.
			t.schedulePurge(id, p.boot, now)
			t.log.Info("presence: node restarted", "peer", id)
		}
		met := p.boot != 0 || !p.live
		p.boot, p.gone, p.live, p.lastSeen = boot, false, true, now
		if met {
			t.peerMet(id)
		}
		return true
	case p.gone:
		return false
	}
	p.lastSeen = now
	if !p.live {
		// Back from the dead (a pause or a partition): what it published
		// meanwhile may not have reached us.
		t.log.Info("presence: node is back", "peer", id)
		p.live = true
		t.peerMet(id)
		t.requery(id, now)
	}
	return true
}

// peerMet runs when a node is met (or met again): it learns about this one
// at once, and a starting node fetches the manual-away set.
func (t *Tracker) peerMet(id string) {
	if t.hbEvery > 0 {
		t.out = append(t.out, t.ctlEvent(parley.EventPresenceAlive, nodeTopic(id), ctlMsg{}))
	}
	if !t.manualSynced {
		t.syncManual(id)
	}
}

func (t *Tracker) syncManual(id string) {
	t.manualSynced = true
	t.out = append(t.out, t.ctlEvent(parley.EventPresenceManualSync, nodeTopic(id), ctlMsg{}))
}

// peerGone handles a node's bye: its users stay for Grace (their clients
// are reconnecting elsewhere), then go.
func (t *Tracker) peerGone(id string, boot, now int64) {
	p := t.peers[id]
	if id == t.node || p == nil || boot != p.boot || p.gone {
		return
	}
	p.gone = true
	t.log.Info("presence: node left", "peer", id)
	if p.live {
		t.markDead(id, p, now)
	}
}

func (t *Tracker) markDead(id string, p *peer, now int64) {
	p.live = false
	t.schedulePurge(id, p.boot, now)
	for _, q := range t.queries {
		delete(q.expect, id)
		if len(q.expect) == 0 && now >= t.startupUntil {
			t.completeQuery(q)
		}
	}
}

// schedulePurge lets a node's contributions of incarnation boot go after
// Grace: the same bound as for a session that closed.
func (t *Tracker) schedulePurge(id string, boot, now int64) {
	t.purges = append(t.purges, purge{node: id, boot: boot, at: now + t.grace})
}

// deadPeerTTL is how long a dead node is remembered. A node back within it
// is asked again about every watched user; one back later is met as new.
const deadPeerTTL = int64(time.Hour)

// sweepNodes expires silent nodes and runs due purges.
func (t *Tracker) sweepNodes(now int64) {
	live := 0
	for id, p := range t.peers {
		if !p.live && now-p.lastSeen > deadPeerTTL && !t.purgePending(id) {
			delete(t.peers, id)
			continue
		}
		if p.live && !p.member && now-p.lastSeen > t.expiry {
			t.log.Warn("presence: node silent, letting its users go", "peer", id,
				"silent_for_ms", (now-p.lastSeen)/1e6)
			t.markDead(id, p, now)
		}
		if p.live {
			live++
		}
	}
	t.m.peers.Set(float64(live))
	if len(t.purges) == 0 {
		return
	}
	var due []purge
	keep := t.purges[:0]
	for _, pg := range t.purges {
		if now < pg.at {
			keep = append(keep, pg)
		} else {
			due = append(due, pg)
		}
	}
	t.purges = keep
	for _, pg := range due {
		t.runPurge(pg)
	}
}

func (t *Tracker) purgePending(id string) bool {
	for _, pg := range t.purges {
		if pg.node == id {
			return true
		}
	}
	return false
}

func (t *Tracker) runPurge(pg purge) {
	p := t.peers[pg.node]
	if p != nil && p.live && p.boot == pg.boot {
		return // it came back
	}
	for user, wu := range t.watched {
		n := len(wu.remote)
		wu.remote = deleteFunc(wu.remote, func(c contrib) bool { return c.node == pg.node && c.boot <= pg.boot })
		if len(wu.remote) != n {
			t.userChanged(user)
		}
	}
	// The dead peer itself is kept (deadPeerTTL): if it is heard from
	// again, it is asked again about the users whose contributions were
	// just dropped.
}

// deleteFunc is slices.DeleteFunc without zeroing the tail (contrib holds
// only a node id shared with the peers map).
func deleteFunc(s []contrib, del func(contrib) bool) []contrib {
	out := s[:0]
	for _, c := range s {
		if !del(c) {
			out = append(out, c)
		}
	}
	return out
}

// applyContrib records node's contribution to a watched user if it is
// newer than what is known.
func (t *Tracker) applyContrib(user string, wu *watchedUser, node string, boot int64, v uint64, st status) {
	for i := range wu.remote {
		c := &wu.remote[i]
		if c.node != node {
			continue
		}
		if c.boot > boot || (c.boot == boot && c.v >= v) {
			return
		}
		c.boot, c.v, c.status = boot, v, st
		t.userChanged(user)
		return
	}
	if st == stOffline {
		return // nothing to take back
	}
	wu.remote = append(wu.remote, contrib{node: node, boot: boot, v: v, status: st})
	t.userChanged(user)
}

// livePeers is the set of nodes a query waits for.
func (t *Tracker) livePeers() map[string]struct{} {
	out := make(map[string]struct{}, len(t.peers))
	for id, p := range t.peers {
		if p.live {
			out[id] = struct{}{}
		}
	}
	return out
}

// startSync asks every node about users newly watched here; their first
// status is reported once every live node answered, or at QueryTimeout.
func (t *Tracker) startSync(users []string, now int64) {
	for len(users) > 0 {
		chunk := users[:min(len(users), maxBatch)]
		users = users[len(chunk):]
		q := &query{users: chunk, expect: t.livePeers(), deadline: now + t.qTimeout, sync: true}
		t.nextQID++
		q.id = t.nextQID
		for _, u := range chunk {
			t.watched[u].syncQ = q.id
		}
		if t.bus == nil {
			t.completeQuery(q)
			continue
		}
		// Sent even when no other node is known: nodes not known yet
		// answer too, and their answers count as changes.
		t.m.queries.Inc()
		t.out = append(t.out, t.ctlEvent(parley.EventPresenceQuery, parley.TopicPresenceControl, ctlMsg{QID: q.id, UserIDs: chunk}))
		if len(q.expect) == 0 && now >= t.startupUntil {
			t.completeQuery(q)
			continue
		}
		t.queries[q.id] = q
	}
}

// requery asks node target (every live node when "") again about every
// watched user, after messages may have been lost.
func (t *Tracker) requery(target string, now int64) {
	if t.bus == nil || len(t.watched) == 0 {
		return
	}
	expect, topic := t.livePeers(), parley.TopicPresenceControl
	if target != "" {
		expect, topic = map[string]struct{}{target: {}}, nodeTopic(target)
	}
	if len(expect) == 0 {
		return
	}
	users := make([]string, 0, len(t.watched))
	for u := range t.watched {
		users = append(users, u)
	}
	for len(users) > 0 {
		chunk := users[:min(len(users), maxBatch)]
		users = users[len(chunk):]
		t.nextQID++
		exp := make(map[string]struct{}, len(expect))
		for id := range expect {
			exp[id] = struct{}{}
		}
		q := &query{id: t.nextQID, users: chunk, expect: exp, deadline: now + t.qTimeout}
		t.queries[q.id] = q
		t.m.queries.Inc()
		t.out = append(t.out, t.ctlEvent(parley.EventPresenceQuery, topic, ctlMsg{QID: q.id, UserIDs: chunk}))
	}
}

func (t *Tracker) completeQuery(q *query) {
	delete(t.queries, q.id)
	if q.done != nil {
		select {
		case <-q.done:
		default:
			close(q.done)
		}
	}
	if !q.sync {
		return
	}
	for _, u := range q.users {
		if wu := t.watched[u]; wu != nil && !wu.synced && wu.syncQ == q.id {
			t.markSynced(u, wu)
		}
	}
}

// answerQuery tells the asking node this node's contributions to the users
// it asked about; users not in the answer have no session here.
func (t *Tracker) answerQuery(m ctlMsg) {
	var states []userState
	for _, id := range m.UserIDs {
		if u := t.local[id]; u != nil {
			states = append(states, userState{UserID: id, Presence: u.status.String(), V: u.v})
		}
	}
	t.out = append(t.out, t.ctlEvent(parley.EventPresenceState, nodeTopic(m.NodeID), ctlMsg{QID: m.QID, V: t.v, States: states}))
}

// applyState takes a node's answer to one of this node's queries.
func (t *Tracker) applyState(m ctlMsg, now int64) {
	var answered map[string]struct{}
	if len(m.States) > 0 {
		answered = make(map[string]struct{}, len(m.States))
	}
	for _, s := range m.States {
		st, ok := parseStatus(s.Presence)
		if !ok {
			continue
		}
		answered[s.UserID] = struct{}{}
		if wu := t.watched[s.UserID]; wu != nil {
			t.applyContrib(s.UserID, wu, m.NodeID, m.Boot, s.V, st)
		}
	}
	q := t.queries[m.QID]
	if q == nil {
		return // late: only what the answer says is used
	}
	if q.probe != nil {
		for _, s := range m.States {
			if s.Presence == Online {
				q.probe[s.UserID] = true
			}
		}
	}
	// Users left out of the answer have no session on that node (as of
	// version m.V): anything older it said about them is void.
	for _, u := range q.users {
		if _, ok := answered[u]; ok {
			continue
		}
		if wu := t.watched[u]; wu != nil {
			t.applyContrib(u, wu, m.NodeID, m.Boot, m.V, stOffline)
		}
	}
	delete(q.expect, m.NodeID)
	if len(q.expect) == 0 && now >= t.startupUntil {
		t.completeQuery(q)
	}
}

// answerManualSync sends the manual-away set to a starting node.
func (t *Tracker) answerManualSync(to string) {
	batch := make([]manualEntry, 0, min(len(t.manual), maxBatch))
	for id, at := range t.manual {
		batch = append(batch, manualEntry{UserID: id, At: at})
		if len(batch) == maxBatch {
			t.out = append(t.out, t.ctlEvent(parley.EventPresenceManualSet, nodeTopic(to), ctlMsg{Manual: batch}))
			batch = make([]manualEntry, 0, maxBatch)
		}
	}
	if len(batch) > 0 {
		t.out = append(t.out, t.ctlEvent(parley.EventPresenceManualSet, nodeTopic(to), ctlMsg{Manual: batch}))
	}
}

// onMembers applies the live node set from Membership.
func (t *Tracker) onMembers(live []nodes.Node) {
	now := t.now()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	in := make(map[string]struct{}, len(live))
	for _, n := range live {
		id := n.ID
		if id == t.node || id == "" {
			continue
		}
		in[id] = struct{}{}
		p := t.peers[id]
		if p == nil {
			t.peers[id] = &peer{lastSeen: now, live: true, member: true}
			t.peerMet(id)
			if now < t.youngUntil {
				t.requery(id, now)
			}
			continue
		}
		p.member = true
		if !p.live && !p.gone {
			p.live, p.lastSeen = true, now
			t.peerMet(id)
			t.requery(id, now)
		}
	}
	for id, p := range t.peers {
		if _, ok := in[id]; ok || !p.member {
			continue
		}
		p.member = false
		if p.live {
			t.log.Info("presence: node no longer a member", "peer", id)
			t.markDead(id, p, now)
		}
	}
	out := t.takeOut()
	t.mu.Unlock()
	t.publish(out)
}
