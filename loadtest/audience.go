package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"

	"parley"
	"parley/client"
	"parley/internal/openloop"
)

// The audience scenario (issue 19, "Subscriptions, not broadcasts"): who
// receives what. The first --users users of the seed hold a session each;
// every session keeps a view of about --view users as the web client
// would (presence_sub, profiles fetched over HTTP when the view is set);
// then three open-loop phases — status changes, joins into one public
// channel, workspace joins through an invite — and every event frame each
// session receives is counted by phase and type, attributed to the action
// it reports, and checked against the audience the event should have.
// At the end every session's picture of the users in its view (name,
// status, presence) is compared with the server's.
//
// The rules, all deterministic (plan indices are the seed's user order):
//
//   - A session's channel is its user's first channel besides #general
//     (seed "spread": user i is in load-(i mod M + 1)); it focuses it.
//   - Recent posters: in each such channel, the members in index order
//     taken every len/P-th, P = view - view/5, post one message during the
//     setup. A session's view is the authors of its channel's last 50
//     messages (fetched over HTTP, as the client renders them; itself left
//     out) plus view/5 DM partners: users (i·7919 + d·104729) mod N, d =
//     1…, over the whole workspace (not opened as DMs: the sidebar entry is
//     what matters).
//   - Admins: users 0…--admins-1 (online) are promoted to admin.
//   - Status changes: half by online users, half by offline users; within
//     each half, alternately a recent poster (in many views) and another
//     user (in a few DM partners' views), spread over the index order.
//   - Channel joins: into the first channel besides #general, by users not
//     in it, one in five online, the rest offline.
//   - Workspace joins: users signed up during the setup accept one invite
//     of the owner; accepting also joins #general, whose member.joined
//     goes to #general's members (everyone): it is counted apart.

// The phases of the audience scenario, in order.
const (
	phaseSetup = iota
	phaseStatus
	phaseJoin
	phaseWorkspaceJoin
	phaseEnd
	nPhases
)

var phaseNames = [nPhases]string{"setup", "status", "join", "workspace_join", "end"}

// audiencePlan is what the setup chose (plan indices into Plan.Users).
type audiencePlan struct {
	JoinChannel string         `json:"join_channel"`
	UserChannel map[int]string `json:"user_channel"` // a user's channel besides #general
	JoinMembers map[int]bool   `json:"join_members"` // the join channel's members before the phase
	Admins      []int          `json:"admins"`
	Changers    []int          `json:"changers"`
	Joiners     []int          `json:"joiners"`
	NewUsers    []PlanUser     `json:"new_users"`
	Invite      string         `json:"invite"`
	Posters     int            `json:"posters"` // posters per channel
	DMs         int            `json:"dms"`     // DM partners per view
}

// prepareAudience makes the audience scenario's setup through the API.
func prepareAudience(ctx context.Context, cfg *Config, p *Plan, hcs []*http.Client) error {
	if len(p.Channels) < 2 {
		return errors.New("audience: the workspace needs a channel besides #general (seed --channels)")
	}
	owner := client.New(cfg.URL, client.WithHTTPClient(hcs[0]), client.WithToken(p.Owner.Token), client.WithLogger(cfg.Log))
	idx := make(map[string]int, len(p.Users))
	for i, u := range p.Users {
		idx[u.ID] = i
	}
	ap := &audiencePlan{JoinChannel: p.Channels[1], UserChannel: map[int]string{}, JoinMembers: map[int]bool{}}
	ap.DMs = cfg.View / 5
	ap.Posters = cfg.View - ap.DMs
	members := map[string][]int{}
	for _, ch := range p.Channels[1:] {
		for cursor := ""; ; {
			page, err := owner.ListMembers(ctx, ch, cursor, parley.MaxLimit)
			if err != nil {
				return fmt.Errorf("audience: members of %s: %w", ch, err)
			}
			for _, m := range page.Members {
				if i, ok := idx[m.UserID]; ok {
					members[ch] = append(members[ch], i)
				}
			}
			if cursor = page.NextCursor; cursor == "" || len(page.Members) == 0 {
				break
			}
		}
		slices.Sort(members[ch])
		for _, i := range members[ch] {
			if _, ok := ap.UserChannel[i]; !ok {
				ap.UserChannel[i] = ch
			}
		}
	}
	for _, i := range members[ap.JoinChannel] {
		ap.JoinMembers[i] = true
	}
	for i := range min(cfg.Admins, cfg.Users) {
		if err := owner.SetMemberRole(ctx, p.WorkspaceID, p.Users[i].ID, parley.RoleAdmin); err != nil {
			return fmt.Errorf("audience: promote an admin: %w", err)
		}
		ap.Admins = append(ap.Admins, i)
	}

	// The recent posters post.
	poster := map[int]bool{}
	type post struct {
		i  int
		ch string
	}
	var posts []post
	for _, ch := range p.Channels[1:] {
		ms := members[ch]
		stride := max(1, len(ms)/max(ap.Posters, 1))
		for k := 0; k < len(ms) && k/stride < ap.Posters; k += stride {
			posts = append(posts, post{ms[k], ch})
			poster[ms[k]] = true
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for n, ps := range posts {
		g.Go(func() error {
			u := p.Users[ps.i]
			c := client.New(cfg.URL, client.WithHTTPClient(hcs[n%len(hcs)]), client.WithToken(u.Token), client.WithLogger(cfg.Log))
			_, err := c.PostMessage(gctx, ps.ch, parley.NewMessage{Text: "audience: a recent post by user " + strconv.Itoa(ps.i)})
			if err != nil {
				return fmt.Errorf("audience: recent post: %w", err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}

	// Status changers: half online, half offline; posters and others
	// alternately.
	var lists [2][2][]int // [offline][poster]
	for i := range p.Users {
		off, po := 0, 0
		if i >= cfg.Users {
			off = 1
		}
		if poster[i] {
			po = 1
		}
		lists[off][po] = append(lists[off][po], i)
	}
	used := map[int]bool{}
	take := func(l []int, k, n int) (int, bool) { // the k-th of n picks spread over l, unused
		for j := range l {
			c := l[(k*len(l)/max(n, 1)+j)%len(l)]
			if !used[c] {
				used[c] = true
				return c, true
			}
		}
		return 0, false
	}
	half := cfg.StatusChanges / 2
	for j := range cfg.StatusChanges {
		off, k, n := 0, j, half
		if j >= half {
			off, k, n = 1, j-half, cfg.StatusChanges-half
		}
		po := 1 - k%2
		for _, try := range [][2]int{{off, po}, {off, 1 - po}, {1 - off, po}, {1 - off, 1 - po}} {
			if c, ok := take(lists[try[0]][try[1]], k/2, (n+1)/2); ok {
				ap.Changers = append(ap.Changers, c)
				break
			}
		}
	}

	// Channel joiners: one in five online.
	var non [2][]int
	for i := range p.Users {
		if ap.JoinMembers[i] {
			continue
		}
		off := 0
		if i >= cfg.Users {
			off = 1
		}
		non[off] = append(non[off], i)
	}
	on := min((cfg.Joins+4)/5, len(non[0]))
	off := min(cfg.Joins-on, len(non[1]))
	on = min(cfg.Joins-off, len(non[0]))
	for k := range on {
		ap.Joiners = append(ap.Joiners, non[0][k*len(non[0])/on])
	}
	for k := range off {
		ap.Joiners = append(ap.Joiners, non[1][k*len(non[1])/off])
	}
	// Online and offline joins interleave.
	slices.SortFunc(ap.Joiners, func(a, b int) int { return (a*7919)%1000003 - (b*7919)%1000003 })

	// The newcomers sign up now (argon2 each: not part of any phase).
	run := strconv.FormatInt(time.Now().UnixNano()%1e12, 36)
	ap.NewUsers = make([]PlanUser, cfg.WorkspaceJoins)
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(4)
	for k := range cfg.WorkspaceJoins {
		g.Go(func() error {
			c := client.New(cfg.URL, client.WithHTTPClient(hcs[k%len(hcs)]), client.WithLogger(cfg.Log))
			a, err := signup(gctx, c, "aud"+run+"-"+strconv.Itoa(k+1), "loadtest-password-1")
			if err != nil {
				return fmt.Errorf("audience: newcomer signup: %w", err)
			}
			ap.NewUsers[k] = PlanUser{ID: a.User.ID, Token: a.Token}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if cfg.WorkspaceJoins > 0 {
		inv, err := owner.CreateInvite(ctx, p.WorkspaceID, parley.InviteParams{})
		if err != nil {
			return fmt.Errorf("audience: invite: %w", err)
		}
		ap.Invite = inv.Code
	}
	p.Audience = ap
	return nil
}

// picture is what a session shows of a user.
type picture struct {
	name, emoji, text, presence string
	updated                     time.Time
}

func (p *picture) setUser(u *parley.User) {
	if u.UpdatedAt.Before(p.updated) {
		return // older than what the session has
	}
	p.name, p.emoji, p.text, p.updated = u.Name, "", "", u.UpdatedAt
	if u.Status != nil {
		p.emoji, p.text = u.Status.Emoji, u.Status.Text
	}
}

// audience is the scenario's state in the runner.
type audience struct {
	r      *runner
	ap     *audiencePlan
	idx    map[string]int // user id → plan index
	online int            // plan indices below it hold a session

	phase     atomic.Int32
	lastFrame atomic.Int64 // unix ns of the last frame received

	// Static after the views are set (under mu before that).
	mu      sync.Mutex
	views   map[int]map[string]bool     // session (plan index) → users in view
	viewers map[string]int              // user → sessions that have them in view
	pics    map[int]map[string]*picture // session → its picture; guarded by mu

	isAdmin    map[int]bool
	changers   map[string]bool
	joiners    map[string]bool
	newUsers   map[string]bool
	joinEnd    map[int]bool // the join channel's members after the phase
	newcomers  map[string]bool
	frames     [nPhases]map[string]int64 // by type; guarded by mu
	misdirect  [nPhases]map[string]int64 // frames outside the type's audience, by type; guarded by mu
	perAction  [nPhases]map[string]int64 // subject → frames of the phase's own event; guarded by mu
	general    map[string]int64          // newcomer → #general member.joined frames; guarded by mu
	joinedOK   atomic.Int64
	phaseStats []AudiencePhase
}

func newAudience(r *runner) *audience {
	ap := r.plan.Audience
	a := &audience{r: r, ap: ap, online: r.cfg.Users, idx: make(map[string]int, len(r.plan.Users)),
		views: map[int]map[string]bool{}, viewers: map[string]int{}, pics: map[int]map[string]*picture{},
		isAdmin: map[int]bool{}, changers: map[string]bool{}, joiners: map[string]bool{}, newUsers: map[string]bool{},
		joinEnd: map[int]bool{}, general: map[string]int64{}}
	for i, u := range r.plan.Users {
		a.idx[u.ID] = i
	}
	for _, i := range ap.Admins {
		a.isAdmin[i] = true
	}
	for _, i := range ap.Changers {
		a.changers[r.plan.Users[i].ID] = true
	}
	for i := range ap.JoinMembers {
		a.joinEnd[i] = true
	}
	for _, i := range ap.Joiners {
		a.joiners[r.plan.Users[i].ID] = true
		a.joinEnd[i] = true
	}
	for _, u := range ap.NewUsers {
		a.newUsers[u.ID] = true
	}
	for k := range nPhases {
		a.frames[k], a.misdirect[k], a.perAction[k] = map[string]int64{}, map[string]int64{}, map[string]int64{}
	}
	return a
}

// dmPartners are user i's DM partners (plan indices).
func (a *audience) dmPartners(i int) []int {
	n := len(a.r.plan.Users)
	var out []int
	for d := 1; len(out) < a.ap.DMs && d <= 4*a.ap.DMs+4; d++ {
		j := (i*7919 + d*104729) % n
		if j != i && !slices.Contains(out, j) {
			out = append(out, j)
		}
	}
	return out
}

// audiencePayload is the part of a user, member or workspace event the
// scenario reads.
type audiencePayload struct {
	User      *parley.User `json:"user"`
	UserID    string       `json:"user_id"`
	ChannelID string       `json:"channel_id"`
	Presence  string       `json:"presence"`
}

// observe takes one event frame pushed to session u.
func (a *audience) observe(u *user, ev client.Event, now time.Time) {
	a.lastFrame.Store(now.UnixNano())
	ph := int(a.phase.Load())
	var d audiencePayload
	switch ev.Type {
	case parley.EventUserStatus, parley.EventUserUpdated, parley.EventPresenceChanged, parley.EventMemberJoined,
		parley.EventMemberLeft, parley.EventWorkspaceMemberJoined, parley.EventChannelCreated, parley.EventChannelUpdated,
		parley.EventChannelArchived:
		_ = json.Unmarshal(ev.Data, &d)
	}
	subject := d.UserID
	if d.User != nil && subject == "" {
		subject = d.User.ID
	}
	self := a.r.plan.Users[u.idx].ID
	a.mu.Lock()
	defer a.mu.Unlock()
	a.frames[ph][ev.Type]++
	allowed := true
	switch ev.Type {
	case parley.EventUserStatus, parley.EventUserUpdated, parley.EventPresenceChanged:
		allowed = subject == self || a.views[u.idx][subject]
		if pic := a.pics[u.idx][subject]; pic != nil {
			if d.User != nil {
				pic.setUser(d.User)
			}
			if ev.Type == parley.EventPresenceChanged {
				pic.presence = d.Presence
			}
		}
		if a.changers[subject] && ev.Type != parley.EventPresenceChanged {
			a.perAction[ph][subject]++
		}
	case parley.EventMemberJoined, parley.EventMemberLeft, parley.EventChannelCreated, parley.EventChannelUpdated, parley.EventChannelArchived:
		allowed = subject == self || a.memberOf(u.idx, ev.ChannelID)
		switch {
		case ev.ChannelID == a.ap.JoinChannel && a.joiners[subject]:
			a.perAction[phaseJoin][subject]++
		case ev.ChannelID == a.r.plan.General && a.newUsers[subject]:
			a.general[subject]++
		}
	case parley.EventWorkspaceMemberJoined, parley.EventWorkspaceMemberLeft:
		allowed = subject == self || a.isAdmin[u.idx]
		if a.newUsers[subject] {
			a.perAction[phaseWorkspaceJoin][subject]++
		}
	}
	if !allowed {
		a.misdirect[ph][ev.Type]++
	}
}

// memberOf says whether user i is a member of ch once the join phase is
// over (members only grow during the run).
func (a *audience) memberOf(i int, ch string) bool {
	switch ch {
	case a.r.plan.General:
		return true
	case a.ap.JoinChannel:
		return a.joinEnd[i]
	}
	return a.ap.UserChannel[i] == ch
}

// setViews gives every connected session its view: presence_sub, focus
// on its channel, and the users' profiles over HTTP.
func (a *audience) setViews(ctx context.Context, conns []*user) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for _, u := range conns {
		g.Go(func() error {
			ch := a.ap.UserChannel[u.idx]
			var ids []string
			seen := map[string]bool{a.r.plan.Users[u.idx].ID: true}
			if ch != "" {
				page, err := u.c.ListMessages(gctx, ch, parley.HistoryQuery{Limit: 50})
				if err != nil {
					return fmt.Errorf("audience: history: %w", err)
				}
				for k := len(page.Messages) - 1; k >= 0 && len(ids) < a.ap.Posters; k-- {
					m := page.Messages[k]
					if _, ok := a.idx[m.UserID]; ok && !seen[m.UserID] {
						seen[m.UserID] = true
						ids = append(ids, m.UserID)
					}
				}
			}
			for _, j := range a.dmPartners(u.idx) {
				if id := a.r.plan.Users[j].ID; !seen[id] {
					seen[id] = true
					ids = append(ids, id)
				}
			}
			view := map[string]bool{}
			pics := map[string]*picture{}
			for _, id := range ids {
				view[id] = true
				pics[id] = &picture{}
			}
			a.mu.Lock()
			a.views[u.idx], a.pics[u.idx] = view, pics
			for _, id := range ids {
				a.viewers[id]++
			}
			a.mu.Unlock()
			conn := u.Conn()
			if ch != "" {
				_ = conn.Focus([]string{ch})
			}
			if err := conn.PresenceSub(ids); err != nil {
				return fmt.Errorf("audience: presence_sub: %w", err)
			}
			for len(ids) > 0 {
				n := min(len(ids), parley.MaxBatchUsers)
				us, err := u.c.UsersBatch(gctx, ids[:n])
				if err != nil {
					return fmt.Errorf("audience: users: %w", err)
				}
				a.mu.Lock()
				for k := range us {
					if p := pics[us[k].ID]; p != nil {
						p.setUser(&us[k])
					}
				}
				a.mu.Unlock()
				ids = ids[n:]
			}
			return nil
		})
	}
	return g.Wait()
}

// quiet waits until no frame has come for d (and at least d), or until
// limit.
func (a *audience) quiet(ctx context.Context, d, limit time.Duration) {
	end := time.Now().Add(limit)
	_ = sleep(ctx, d)
	for time.Now().Before(end) && ctx.Err() == nil {
		if time.Since(time.Unix(0, a.lastFrame.Load())) >= d {
			return
		}
		_ = sleep(ctx, d/5)
	}
}

// runAudience is the scenario.
func (r *runner) audience(ctx context.Context) error {
	a := newAudience(r)
	r.aud = a
	r.connectAll(ctx)
	conns := r.connected()
	if len(conns) == 0 {
		return errors.New("audience: no user connected")
	}
	if err := a.setViews(ctx, conns); err != nil {
		return err
	}
	a.quiet(ctx, time.Second, r.cfg.CatchUp)
	// The node's idle cost (heartbeats of every session), for scale.
	m := r.markCPU()
	_ = sleep(ctx, time.Second)
	r.noteCores("idle", m)

	owner := client.New(r.cfg.URL, client.WithHTTPClient(r.hcs[0]), client.WithToken(r.plan.Owner.Token), client.WithLogger(r.cfg.Log))
	bg := context.Background() // an action runs to completion once started
	phases := []struct {
		ph   int
		name string
		n    int
		fn   func(i int) error
	}{
		{phaseStatus, "status", len(a.ap.Changers), func(i int) error {
			u := r.plan.Users[a.ap.Changers[i]]
			c := client.New(r.cfg.URL, client.WithHTTPClient(r.hcs[i%len(r.hcs)]), client.WithToken(u.Token), client.WithLogger(r.cfg.Log))
			_, err := c.SetStatus(bg, parley.Status{Emoji: "rocket", Text: "audience " + strconv.Itoa(i)})
			return err
		}},
		{phaseJoin, "join", len(a.ap.Joiners), func(i int) error {
			u := r.plan.Users[a.ap.Joiners[i]]
			c := client.New(r.cfg.URL, client.WithHTTPClient(r.hcs[i%len(r.hcs)]), client.WithToken(u.Token), client.WithLogger(r.cfg.Log))
			_, err := c.JoinChannel(bg, a.ap.JoinChannel)
			return err
		}},
		{phaseWorkspaceJoin, "ws_join", len(a.ap.NewUsers), func(i int) error {
			u := a.ap.NewUsers[i]
			c := client.New(r.cfg.URL, client.WithHTTPClient(r.hcs[i%len(r.hcs)]), client.WithToken(u.Token), client.WithLogger(r.cfg.Log))
			_, err := c.AcceptInvite(bg, a.ap.Invite)
			return err
		}},
	}
	for _, ph := range phases {
		var ok, failed atomic.Int64
		m := r.markCPU()
		a.phase.Store(int32(ph.ph))
		t0 := time.Now()
		r.schedule(ctx, ph.name, r.cfg.Rate, ph.n, func(act openloop.Action) {
			r.rec.Post(act.Due)
			if err := ph.fn(act.I); err != nil {
				failed.Add(1)
				r.rec.Error(time.Now(), ph.name+codeSuffix(err))
				return
			}
			ok.Add(1)
			r.rec.Hist(ph.name + "_api").Record(time.Since(act.Due))
		})
		a.quiet(ctx, 500*time.Millisecond, r.cfg.CatchUp)
		to := r.markCPU()
		a.phaseStats = append(a.phaseStats, AudiencePhase{Name: ph.name, Actions: ph.n, OK: int(ok.Load()), Failed: int(failed.Load()),
			Seconds: to.at.Sub(t0).Seconds(), ServerCPUSeconds: (to.server - m.server).Seconds(),
			GeneratorCPUSeconds: (to.gen - m.gen).Seconds()})
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	a.phase.Store(phaseEnd)
	return a.audit(ctx, owner, len(conns))
}

// truth is the server's picture of the users in view, fetched fresh.
func (a *audience) truth(ctx context.Context, owner *client.Client) (map[string]*picture, error) {
	a.mu.Lock()
	var ids []string
	for id := range a.viewers {
		ids = append(ids, id)
	}
	a.mu.Unlock()
	slices.Sort(ids)
	out := make(map[string]*picture, len(ids))
	for k := 0; k < len(ids); k += parley.MaxBatchUsers {
		us, err := owner.UsersBatch(ctx, ids[k:min(k+parley.MaxBatchUsers, len(ids))])
		if err != nil {
			return nil, fmt.Errorf("audience: users at the end: %w", err)
		}
		for i := range us {
			p := &picture{}
			p.setUser(&us[i])
			out[us[i].ID] = p
		}
	}
	// Presence has no HTTP read: a fresh session of the owner subscribes
	// to them, 100 at a time, and takes the current presence the gateway
	// sends for each newly watched user. (Not 500 at a time: the gateway
	// drops ephemeral events for a session whose send queue is half full,
	// 128 frames by default, so most of 500 answers would be lost.)
	var mu sync.Mutex
	got := map[string]string{}
	conn, err := owner.Connect(ctx, a.r.plan.WorkspaceID, client.ConnectOptions{DeclaredOnly: true, Handler: func(ev client.Event) {
		if ev.Type != parley.EventPresenceChanged {
			return
		}
		var d audiencePayload
		if json.Unmarshal(ev.Data, &d) == nil {
			mu.Lock()
			got[d.UserID] = d.Presence
			mu.Unlock()
		}
	}})
	if err != nil {
		return nil, fmt.Errorf("audience: auditor session: %w", err)
	}
	defer func() { conn.Close(); <-conn.Done() }()
	const chunk = 100
	for k := 0; k < len(ids); k += chunk {
		part := ids[k:min(k+chunk, len(ids))]
		if err := conn.PresenceSub(part); err != nil {
			return nil, fmt.Errorf("audience: auditor presence_sub: %w", err)
		}
		deadline := time.Now().Add(a.r.cfg.CatchUp)
		for {
			mu.Lock()
			n := 0
			for _, id := range part {
				if _, ok := got[id]; ok {
					n++
				}
			}
			mu.Unlock()
			if n == len(part) || time.Now().After(deadline) {
				break
			}
			_ = sleep(ctx, 20*time.Millisecond)
		}
	}
	mu.Lock()
	for id, p := range out {
		p.presence = got[id]
	}
	mu.Unlock()
	return out, nil
}

// stale counts the entries of the sessions' pictures that differ from
// the server's.
func (a *audience) stale(truth map[string]*picture) (stale, entries int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, pics := range a.pics {
		for id, p := range pics {
			entries++
			t := truth[id]
			if t == nil || p.name != t.name || p.emoji != t.emoji || p.text != t.text || p.presence != t.presence {
				stale++
			}
		}
	}
	return stale, entries
}

// audit fetches the server's picture, waits up to CatchUp for every
// session's to equal it, and sums the run up.
func (a *audience) audit(ctx context.Context, owner *client.Client, sessions int) error {
	tt := time.Now()
	truth, err := a.truth(ctx, owner)
	if err != nil {
		return err
	}
	a.r.rec.SetExtra("audit_truth_s", time.Since(tt).Seconds())
	t0 := time.Now()
	st, entries := a.stale(truth)
	for st > 0 && time.Since(t0) < a.r.cfg.CatchUp && ctx.Err() == nil {
		_ = sleep(ctx, 100*time.Millisecond)
		st, entries = a.stale(truth)
	}
	res := &AudienceResult{Sessions: sessions, StaleEntries: st, Entries: entries, StaleWaitS: time.Since(t0).Seconds(),
		IdleServerCores: a.r.rec.extraValue("idle_server_cores")}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.isAdmin {
		if i < a.online && a.r.users[i].everReady.Load() {
			res.AdminSessions++
		}
	}
	var viewSum int
	for _, v := range a.views {
		viewSum += len(v)
	}
	if len(a.views) > 0 {
		res.ViewMean = float64(viewSum) / float64(len(a.views))
	}
	res.ViewUsers = len(a.viewers)
	onlineMembersEnd := 0
	for i := range a.joinEnd {
		if i < a.online {
			onlineMembersEnd++
		}
	}
	for k, ph := range a.phaseStats {
		p := phaseStatus + k
		ph.FramesByType = a.frames[p]
		ph.Misdirected = a.misdirect[p]
		for _, n := range a.frames[p] {
			ph.Frames += n
		}
		ph.OnlineSessions = sessions
		var bound func(subject string) int64
		var subjects []string
		events := int64(1)
		switch p {
		case phaseStatus:
			for _, i := range a.ap.Changers {
				subjects = append(subjects, a.r.plan.Users[i].ID)
			}
			bound = func(s string) int64 {
				b := int64(a.viewers[s])
				if a.idx[s] < a.online {
					b++
				}
				return b
			}
		case phaseJoin:
			for _, i := range a.ap.Joiners {
				subjects = append(subjects, a.r.plan.Users[i].ID)
			}
			bound = func(string) int64 { return int64(onlineMembersEnd) + 1 }
		case phaseWorkspaceJoin:
			for _, u := range a.ap.NewUsers {
				subjects = append(subjects, u.ID)
			}
			bound = func(string) int64 { return int64(res.AdminSessions) + 1 }
			events = 2 // workspace.member_joined and #general's member.joined
			for _, n := range a.general {
				ph.GeneralFrames += n
			}
		}
		for _, s := range subjects {
			f, b := a.perAction[p][s], bound(s)
			ph.ActionFrames += f
			ph.BoundFrames += b
			ph.MaxActionFrames = max(ph.MaxActionFrames, f)
			if f > b {
				ph.OverBound++
			}
		}
		ph.BroadcastFrames = int64(ph.OK) * int64(sessions) * events
		res.Phases = append(res.Phases, ph)
	}
	res.evaluate()
	a.r.audResult = res
	return nil
}

// AudiencePhase is one phase of the audience scenario.
type AudiencePhase struct {
	Name    string `json:"name"` // status, join, ws_join
	Actions int    `json:"actions"`
	OK      int    `json:"ok"`
	Failed  int    `json:"failed"`
	// Seconds is the phase's window: from its first action until no frame
	// came for 500 ms after its last one returned.
	Seconds             float64 `json:"seconds"`
	ServerCPUSeconds    float64 `json:"server_cpu_s"` // with --server-pid
	GeneratorCPUSeconds float64 `json:"generator_cpu_s"`
	// Frames are every event frame the sessions received in the window.
	Frames       int64            `json:"frames"`
	FramesByType map[string]int64 `json:"frames_by_type"`
	// Misdirected are frames a session got outside the event type's
	// audience (not in view, not a member, not an admin, not the user).
	Misdirected map[string]int64 `json:"misdirected"`
	// ActionFrames are the frames of the phase's own event (user.status or
	// user.updated of the changer; the join channel's member.joined of the
	// joiner; workspace.member_joined of the newcomer), BoundFrames the sum
	// of the per-action targets, OverBound the actions above theirs.
	ActionFrames    int64 `json:"action_frames"`
	BoundFrames     int64 `json:"bound_frames"`
	MaxActionFrames int64 `json:"max_action_frames"`
	OverBound       int   `json:"over_bound"`
	// GeneralFrames (workspace joins): #general's member.joined of the
	// newcomers; #general holds everyone.
	GeneralFrames  int64 `json:"general_frames,omitempty"`
	OnlineSessions int   `json:"online_sessions"`
	// BroadcastFrames is what sending the phase's events to every online
	// session would cost: OK × sessions × events per action (2 for a
	// workspace join: workspace.member_joined and #general's member.joined).
	BroadcastFrames int64 `json:"broadcast_frames"`
}

// AudienceTarget is one of the targets.
type AudienceTarget struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Pass  bool   `json:"pass"`
}

// AudienceResult is the audience scenario's own figures.
type AudienceResult struct {
	Sessions        int              `json:"sessions"`
	AdminSessions   int              `json:"admin_sessions"`
	ViewMean        float64          `json:"view_mean"`
	ViewUsers       int              `json:"view_users"` // distinct users in some view
	IdleServerCores float64          `json:"idle_server_cores"`
	Phases          []AudiencePhase  `json:"phases"`
	StaleEntries    int              `json:"stale_entries"`
	Entries         int              `json:"entries"`
	StaleWaitS      float64          `json:"stale_wait_s"`
	MixRatio        float64          `json:"mix_ratio"`     // broadcast frames / frames of the actions, all of them
	MixRatioOwn     float64          `json:"mix_ratio_own"` // the same without #general's member.joined of newcomers
	Targets         []AudienceTarget `json:"targets"`
	TargetsPass     bool             `json:"targets_pass"`
}

func (res *AudienceResult) evaluate() {
	var bcast, sent, bcastOwn, sentOwn int64
	res.TargetsPass = true
	add := func(name, value string, pass bool) {
		res.Targets = append(res.Targets, AudienceTarget{Name: name, Value: value, Pass: pass})
		res.TargetsPass = res.TargetsPass && pass
	}
	for _, ph := range res.Phases {
		var mis int64
		for _, n := range ph.Misdirected {
			mis += n
		}
		bcast += ph.BroadcastFrames
		sent += ph.ActionFrames + ph.GeneralFrames
		bcastOwn += ph.BroadcastFrames
		sentOwn += ph.ActionFrames
		what := map[string]string{
			"status":  "a status change reaches at most its viewers' sessions + its own",
			"join":    "a channel join reaches at most the channel's members' sessions + 1",
			"ws_join": "a workspace join's workspace.member_joined reaches at most the admins' sessions + 1",
		}[ph.Name]
		per := 0.0
		if ph.OK > 0 {
			per = float64(ph.ActionFrames) / float64(ph.OK)
		}
		add(what, fmt.Sprintf("%.1f frames/action (max %d; bounds sum %d; %d actions over; %d misdirected frames)",
			per, ph.MaxActionFrames, ph.BoundFrames, ph.OverBound, mis), ph.OverBound == 0 && mis == 0 && ph.Failed == 0)
		if ph.Name == "ws_join" {
			bcastOwn -= int64(ph.OK) * int64(ph.OnlineSessions) // without #general's copy
		}
	}
	if sent > 0 {
		res.MixRatio = float64(bcast) / float64(sent)
	}
	if sentOwn > 0 {
		res.MixRatioOwn = float64(bcastOwn) / float64(sentOwn)
	}
	add("the mix: ≥ 20× fewer frames than broadcasting (all frames the actions caused)", fmt.Sprintf("%.1f×", res.MixRatio), res.MixRatio >= 20)
	res.Targets = append(res.Targets, AudienceTarget{Name: "the mix without #general's member.joined of newcomers (not a target)",
		Value: fmt.Sprintf("%.1f×", res.MixRatioOwn), Pass: res.MixRatioOwn >= 20})
	add("stale entries in the sessions' pictures (name, status, presence)", fmt.Sprintf("%d of %d", res.StaleEntries, res.Entries), res.StaleEntries == 0)
}

// Print writes the audience tables.
func (res *AudienceResult) Print(w io.Writer) {
	fmt.Fprintf(w, "\naudience: %d sessions (%d admins'), views of %.1f users on average (%d distinct users in some view); idle server %.2f cores\n",
		res.Sessions, res.AdminSessions, res.ViewMean, res.ViewUsers, res.IdleServerCores)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  phase\tactions ok/asked\twindow s\tframes\tframes/action (own event)\t#general frames/action\tbroadcast frames/action\tserver CPU-s/action\tmisdirected\tby type")
	for _, ph := range res.Phases {
		per := func(n int64) float64 {
			if ph.OK == 0 {
				return 0
			}
			return float64(n) / float64(ph.OK)
		}
		var mis int64
		for _, n := range ph.Misdirected {
			mis += n
		}
		var types []string
		for _, k := range slices.Sorted(maps.Keys(ph.FramesByType)) {
			types = append(types, fmt.Sprintf("%s=%d", k, ph.FramesByType[k]))
		}
		cpu := 0.0
		if ph.OK > 0 {
			cpu = ph.ServerCPUSeconds / float64(ph.OK)
		}
		fmt.Fprintf(tw, "  %s\t%d/%d\t%.1f\t%d\t%.1f\t%.1f\t%.0f\t%.4f\t%d\t%s\n", ph.Name, ph.OK, ph.Actions, ph.Seconds, ph.Frames,
			per(ph.ActionFrames), per(ph.GeneralFrames), per(ph.BroadcastFrames), cpu, mis, strings.Join(types, " "))
	}
	tw.Flush()
	verdict := map[bool]string{true: "PASS", false: "FAIL"}
	for _, t := range res.Targets {
		fmt.Fprintf(w, "  %s  %s: %s\n", verdict[t.Pass], t.Name, t.Value)
	}
}
