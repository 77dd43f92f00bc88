package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"parley/internal/promutil"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
)

// Just-in-time users (Slack's just-in-time annotation, done in the
// gateway): a session is never sent a message that mentions or is authored
// by a user it has not been sent. Each session keeps the set of users it
// has been sent; a message.created or message.updated event whose author
// or mentioned users are missing from it goes to that session with the
// missing user objects in a top-level "users" field beside "d".
//
// The work is split so that the fan-out stays cheap:
//
//   - Once per event per node, before the partitions see it (hub.dispatch;
//     for a session's catch-up read, once per read), the referenced users
//     are resolved through the UserDirectory, each encoded once, and given
//     small interned numbers.
//   - Per session, the partition checks those numbers against the
//     session's sorted set: no allocation, and the shared frame is used as
//     is when nothing is missing (the common case).
//   - A session missing some users gets a variant of the event whose tail
//     carries them; sessions of one partition missing the same users share
//     one variant. The variant is what goes into the session's ring, so a
//     resume (here or on another node) replays the frame exactly as sent.

// UserDirectory resolves the users that message events reference, within
// one workspace. The query cache (querycache.Cache) implements it; without
// one, cmd/parley wires a store-backed stand-in.
type UserDirectory interface {
	// Users returns the users of the workspace among ids; ids that are not
	// users of the workspace are left out.
	Users(ctx context.Context, workspaceID string, ids []string) ([]parley.User, error)
	// UsersByHandle returns the users of the workspace with these handles;
	// handles that name no user of the workspace are left out.
	UsersByHandle(ctx context.Context, workspaceID string, handles []string) ([]parley.User, error)
}

const (
	// maxEventUsers bounds the users attached to one event (the author and
	// the first mentions); a session's missing ones are a bit mask.
	maxEventUsers = 64
	// maxKnownUsers bounds a session's set of users sent (4 bytes each).
	// A full set forgets one user to take another: that user is sent
	// again the next time, which is harmless.
	maxKnownUsers = 512
	// jitTimeout bounds the lookups for one event or one catch-up read.
	jitTimeout = 2 * time.Second
)

// userRef is one user an event references: its interned number and its
// JSON object, encoded once for every session.
type userRef struct {
	n    uint32
	json []byte
}

// jitUsers resolves and interns the users of message events. Its methods
// are safe for concurrent use.
type jitUsers struct {
	dir UserDirectory // nil: no annotation
	log *slog.Logger

	mu   sync.Mutex
	nums map[string]uint32 // user id → number (from 1); guarded by mu
	ids  []string          // number-1 → user id; guarded by mu

	attached     prometheus.Counter
	lookupErrors prometheus.Counter
}

func newJITUsers(dir UserDirectory, log *slog.Logger, reg prometheus.Registerer) *jitUsers {
	j := &jitUsers{
		dir:  dir,
		log:  log,
		nums: map[string]uint32{},
		attached: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_jit_users_attached_total",
			Help: "User objects attached to event frames for sessions that had not been sent them."}),
		lookupErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_jit_lookup_errors_total",
			Help: "Failed user lookups for just-in-time users (the events went out without them)."}),
	}
	j.attached = promutil.Register(reg, j.attached)
	j.lookupErrors = promutil.Register(reg, j.lookupErrors)
	return j
}

// num interns a user id.
func (j *jitUsers) num(id string) uint32 {
	j.mu.Lock()
	defer j.mu.Unlock()
	n, ok := j.nums[id]
	if !ok {
		j.ids = append(j.ids, id)
		n = uint32(len(j.ids))
		j.nums[id] = n
	}
	return n
}

// idOf is the user id of an interned number.
func (j *jitUsers) idOf(n uint32) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if n == 0 || int(n) > len(j.ids) {
		return ""
	}
	return j.ids[n-1]
}

// carriesUsers reports whether events of type typ get just-in-time users:
// the message events, and thread.updated, which carries a reply to
// followers who may not be members of its channel. (mention goes only to
// members, who get the message itself, users and all, on the channel; and
// being one event per mentioned user it would cost a lookup each.)
func carriesUsers(typ string) bool {
	switch typ {
	case parley.EventMessageCreated, parley.EventMessageUpdated, parley.EventThreadUpdated:
		return true
	}
	return false
}

// prepare builds the events of evs (a catch-up read) and resolves their
// users with one pair of lookups for the whole read.
func (g *Gateway) prepare(evs []parley.Event, recv time.Time) []*event {
	es := make([]*event, len(evs))
	for i, ev := range evs {
		es[i] = newEvent(ev, recv)
	}
	g.jit.annotate(es, evs)
	return es
}

// messageRefs is who a message event references: its author and the
// handles its text mentions.
type messageRefs struct {
	author  string
	handles []string
}

func decodeMessageRefs(data json.RawMessage) (messageRefs, bool) {
	var d struct {
		Message *struct {
			UserID string `json:"user_id"`
			Text   string `json:"text"`
		} `json:"message"`
	}
	if json.Unmarshal(data, &d) != nil || d.Message == nil {
		return messageRefs{}, false
	}
	r := messageRefs{author: d.Message.UserID}
	for _, h := range parley.Mentions(d.Message.Text) {
		if !parley.IsBroadcastMention(h) {
			r.handles = append(r.handles, h)
		}
	}
	return r, true
}

// annotate gives the message events among es (built from evs) their user
// references. It looks the users up once per workspace for all of them.
func (j *jitUsers) annotate(es []*event, evs []parley.Event) {
	if j.dir == nil {
		return
	}
	refs := make([]messageRefs, len(evs))
	var workspaces []string
	for i, ev := range evs {
		if !carriesUsers(ev.Type) || ev.WorkspaceID == "" {
			continue
		}
		r, ok := decodeMessageRefs(ev.Data)
		if !ok {
			continue
		}
		refs[i] = r
		if !slices.Contains(workspaces, ev.WorkspaceID) {
			workspaces = append(workspaces, ev.WorkspaceID)
		}
	}
	for _, ws := range workspaces {
		j.annotateWorkspace(ws, es, evs, refs)
	}
}

func (j *jitUsers) annotateWorkspace(ws string, es []*event, evs []parley.Event, refs []messageRefs) {
	var ids, handles []string
	for i, ev := range evs {
		if ev.WorkspaceID != ws {
			continue
		}
		if a := refs[i].author; a != "" && !slices.Contains(ids, a) {
			ids = append(ids, a)
		}
		for _, h := range refs[i].handles {
			if !slices.Contains(handles, h) {
				handles = append(handles, h)
			}
		}
	}
	if len(ids) == 0 && len(handles) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), jitTimeout)
	defer cancel()
	byID := map[string]*userRef{}
	byHandle := map[string]*userRef{}
	add := func(users []parley.User) {
		for _, u := range users {
			if ref := byID[u.ID]; ref != nil {
				byHandle[u.Handle] = ref
				continue
			}
			u.Email = "" // never shown to other users
			b, err := json.Marshal(u)
			if err != nil {
				continue
			}
			ref := &userRef{n: j.num(u.ID), json: b}
			byID[u.ID], byHandle[u.Handle] = ref, ref
		}
	}
	if len(ids) > 0 {
		users, err := j.dir.Users(ctx, ws, ids)
		if err != nil {
			j.lookupFailed(ws, err)
		}
		add(users)
	}
	if len(handles) > 0 {
		users, err := j.dir.UsersByHandle(ctx, ws, handles)
		if err != nil {
			j.lookupFailed(ws, err)
		}
		add(users)
	}
	for i, ev := range evs {
		if ev.WorkspaceID != ws {
			continue
		}
		var out []userRef
		put := func(ref *userRef) {
			if ref == nil || len(out) == maxEventUsers {
				return
			}
			for _, o := range out {
				if o.n == ref.n {
					return
				}
			}
			out = append(out, *ref)
		}
		if a := refs[i].author; a != "" {
			put(byID[a])
		}
		for _, h := range refs[i].handles {
			put(byHandle[h])
		}
		es[i].users = out
	}
}

func (j *jitUsers) lookupFailed(ws string, err error) {
	j.lookupErrors.Inc()
	j.log.Warn("gateway: just-in-time user lookup failed; events go out without users",
		"workspace_id", ws, "err", err)
}

// userSet is a session's users already sent: interned numbers, sorted. It
// starts empty and without a buffer (idle sessions that never got a
// message cost nothing) and holds at most maxKnownUsers. Owned by the
// session's partition.
type userSet struct {
	nums []uint32
}

func (u *userSet) has(n uint32) bool {
	_, ok := slices.BinarySearch(u.nums, n)
	return ok
}

func (u *userSet) add(n uint32) {
	i, ok := slices.BinarySearch(u.nums, n)
	if ok {
		return
	}
	if len(u.nums) >= maxKnownUsers {
		// Forget one, chosen by n so that it varies.
		drop := int(n * 2654435761 % uint32(len(u.nums)))
		u.nums = slices.Delete(u.nums, drop, drop+1)
		if drop < i {
			i--
		}
	}
	if len(u.nums) == cap(u.nums) {
		nb := make([]uint32, len(u.nums), min(maxKnownUsers, max(4, 2*cap(u.nums))))
		copy(nb, u.nums)
		u.nums = nb
	}
	u.nums = slices.Insert(u.nums, i, n)
}

func (u *userSet) len() int { return len(u.nums) }

// jitMemo keeps the variants of the event a partition is delivering, one
// per distinct set of missing users, so that sessions missing the same
// users share one encoding. Owned by the partition.
type jitMemo struct {
	ev       *event
	variants []jitVariant
}

type jitVariant struct {
	missing uint64
	ev      *event
}

func (m *jitMemo) variant(e *event, missing uint64) *event {
	if m.ev != e {
		clear(m.variants)
		m.ev, m.variants = e, m.variants[:0]
	}
	for _, v := range m.variants {
		if v.missing == missing {
			return v.ev
		}
	}
	v := withUsersTail(e, missing)
	m.variants = append(m.variants, jitVariant{missing: missing, ev: v})
	return v
}

// withUsersTail copies e with the users of the missing mask in its tail:
// `,"t":…,"d":…,"users":[…]}`.
func withUsersTail(e *event, missing uint64) *event {
	size := len(e.tail) + len(`,"users":[]`)
	for i := range e.users {
		if missing&(1<<i) != 0 {
			size += len(e.users[i].json) + 1
		}
	}
	tail := make([]byte, 0, size)
	tail = append(tail, e.tail[:len(e.tail)-1]...) // without the closing brace
	tail = append(tail, `,"users":[`...)
	first := true
	for i := range e.users {
		if missing&(1<<i) == 0 {
			continue
		}
		if !first {
			tail = append(tail, ',')
		}
		first = false
		tail = append(tail, e.users[i].json...)
	}
	tail = append(tail, "]}"...)
	v := *e
	v.tail, v.users = tail, nil
	v.z = new(deflated)
	return &v
}

// knownUserIDs lists the users a session has been sent, for a handover.
func (g *Gateway) knownUserIDs(s *session) []string {
	if s.known.len() == 0 {
		return nil
	}
	out := make([]string, 0, s.known.len())
	for _, n := range s.known.nums {
		if id := g.jit.idOf(n); id != "" {
			out = append(out, id)
		}
	}
	return out
}

// learnUsers adds handed-over user ids to a session's set.
func (g *Gateway) learnUsers(s *session, ids []string) {
	for _, id := range ids {
		s.known.add(g.jit.num(id))
	}
}
