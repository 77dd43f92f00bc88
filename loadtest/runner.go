package loadtest

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"parley"
	"parley/client"
	"parley/internal/cpustat"
	"parley/internal/openloop"
)

// runner runs one part of a scenario: all of it in one process, or the
// users i with i mod procs == part in worker process part.
type runner struct {
	cfg   *Config
	plan  *Plan
	part  int
	parts int
	hcs   []*http.Client
	rec   *Recorder
	users []*user
	bar   func(name string) error // waits until every part reaches the barrier

	deliveryHist *Hist
	joinHist     *Hist
	otherHist    *Hist    // hot-channel: messages of the other channels
	passiveHist  *Hist    // hot-channel: #general's messages to non-viewers
	joinStarts   sync.Map // user id → time.Time the join was sent

	ephemeral atomic.Int64 // typing, presence and other non-durable events received
	caughtUp  atomic.Int64 // durable events that came by fill or catch-up, not live
	storming  atomic.Bool  // drops are the scenario's, not errors
	back      atomic.Int64 // sessions back after a drop

	roots sync.Map // channel id → id of a recent message (threads, reactions)

	frames      atomic.Int64 // event frames the gateway pushed, of every type
	spikeFrames atomic.Int64 // of them, member.joined of join-spike's channel
	frames0     int64        // frames when join-spike's load began

	summaries atomic.Int64 // channel.summary frames received
	hot       hotMarks     // hot-channel: readings at the load's start and end

	aud       *audience       // the audience scenario's state
	audResult *AudienceResult // its figures, once it is over
}

// Part is what one process measured, merged by the parent.
type Part struct {
	Data       Data  `json:"data"`
	Users      int   `json:"users"`
	Connected  int   `json:"connected"` // users whose first session became ready
	Checked    int   `json:"checked"`   // (user, channel) streams checked
	Lost       int64 `json:"lost"`
	Duplicated int64 `json:"duplicated"`
	OutOfOrder int64 `json:"out_of_order"`
	Ephemeral  int64 `json:"ephemeral"`
	CaughtUp   int64 `json:"caught_up"`
	ConnStats  client.Stats
	Audience   *AudienceResult `json:"audience,omitempty"`
}

func newRunner(cfg *Config, plan *Plan, part, parts int, bar func(string) error) *runner {
	r := &runner{cfg: cfg, plan: plan, part: part, parts: max(parts, 1), bar: bar,
		hcs: httpClients(cfg.SourceIPs), rec: NewRecorder(plan.Start)}
	r.deliveryHist = r.rec.Hist("delivery")
	r.joinHist = r.rec.Hist("join_delivery")
	if cfg.Scenario == ScenarioHotChannel {
		r.otherHist = r.rec.Hist("other_delivery")
		r.passiveHist = r.rec.Hist("passive_delivery")
	}
	n := len(plan.Users)
	if cfg.Users > 0 {
		n = min(n, cfg.Users)
	}
	for i := part; i < n; i += r.parts {
		pu := plan.Users[i]
		c := client.New(cfg.URL, client.WithHTTPClient(r.hcs[i%len(r.hcs)]), client.WithToken(pu.Token),
			client.WithLogger(cfg.Log))
		r.users = append(r.users, &user{idx: i, id: pu.ID, c: c, r: r, viewer: cfg.Scenario == ScenarioHotChannel && isViewer(i, cfg.Viewers, n)})
	}
	return r
}

// localAddr is the source address of user i's sockets.
func (r *runner) localAddr(i int) string {
	if len(r.cfg.SourceIPs) == 0 {
		return ""
	}
	return r.cfg.SourceIPs[i%len(r.cfg.SourceIPs)].String()
}

// share is this part's share of a whole-run rate.
func (r *runner) share(rate float64) float64 { return rate / float64(r.parts) }

// run runs the part's scenario to the end and accounts for it.
func (r *runner) run(ctx context.Context) (*Part, error) {
	stopSampling := r.sampleConns()
	defer stopSampling()
	var err error
	switch r.cfg.Scenario {
	case ScenarioBigTeamBoot:
		err = r.bigTeamBoot(ctx)
	case ScenarioReconnectStorm:
		err = r.reconnectStorm(ctx)
	case ScenarioHotChannel:
		err = r.hotChannel(ctx)
	case ScenarioJoinSpike:
		err = r.joinSpike(ctx)
	case ScenarioSteady:
		err = r.steady(ctx)
	case ScenarioAudience:
		err = r.audience(ctx)
	}
	if err != nil {
		r.closeAll()
		return nil, err
	}
	if err := r.bar("loaded"); err != nil {
		r.closeAll()
		return nil, err
	}
	return r.account(ctx), nil
}

// cpuMark is a reading of the generator's and the server's CPU time.
type cpuMark struct {
	at          time.Time
	gen, server time.Duration
}

func (r *runner) markCPU() cpuMark {
	m := cpuMark{at: time.Now(), gen: cpustat.Self()}
	if r.cfg.ServerPID > 0 && r.part == 0 {
		m.server, _ = cpustat.Process(r.cfg.ServerPID)
	}
	return m
}

// noteCores records the cores used since from as extras
// name_generator_cores (every worker process's, added up) and
// name_server_cores (with a ServerPID).
func (r *runner) noteCores(name string, from cpuMark) {
	to := r.markCPU()
	wall := to.at.Sub(from.at)
	r.rec.SetExtra(name+"_generator_cores", cpustat.Cores(to.gen-from.gen, wall))
	if r.cfg.ServerPID > 0 && r.part == 0 {
		r.rec.SetExtra(name+"_server_cores", cpustat.Cores(to.server-from.server, wall))
	}
}

// sampleConns notes the live connections every second.
func (r *runner) sampleConns() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				r.rec.SampleConns(time.Now())
				return
			case now := <-t.C:
				r.rec.SampleConns(now)
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// connectAll connects the part's users at the part's share of the connect
// rate, many at once; failures are counted, not fatal.
func (r *runner) connectAll(ctx context.Context) {
	r.schedule(ctx, "connect", r.share(r.cfg.ConnectRate), len(r.users), func(a openloop.Action) {
		_ = r.users[a.I].connect(ctx)
	})
}

// schedule runs fn open-loop (internal/openloop): action i is due at
// i/rate and starts then whether or not the earlier ones have returned, up
// to MaxInFlight at once; n < 0 runs until ctx ends. It returns once the
// started actions have, and notes the asked and achieved rates and the
// late starts as extras name_asked_rate, name_achieved_rate,
// name_late_starts and name_at_cap (the parts' add up). Latencies count from a.Due.
func (r *runner) schedule(ctx context.Context, name string, rate float64, n int, fn func(a openloop.Action)) {
	if rate <= 0 || n == 0 {
		return
	}
	st := openloop.Run(ctx, openloop.Schedule{Rate: rate, N: n, MaxInFlight: r.cfg.MaxInFlight}, fn)
	r.rec.SetExtra(name+"_asked_rate", st.Asked)
	r.rec.SetExtra(name+"_achieved_rate", st.Achieved)
	r.rec.SetExtra(name+"_late_starts", float64(st.Late))
	r.rec.SetExtra(name+"_at_cap", float64(st.AtCap))
}

// poster posts the part's share of rate messages a second into channel
// (ch nil: a channel of the poster's) from the first Posters users of the
// part, until ctx ends. wait waits for the posts in flight.
func (r *runner) poster(ctx context.Context, rate float64, ch string) (wait func()) {
	var wg sync.WaitGroup
	posters := r.connected()
	if rate <= 0 || len(posters) == 0 {
		return func() {}
	}
	posters = posters[:min(len(posters), max(r.cfg.Posters/r.parts, 1))]
	wg.Go(func() {
		r.schedule(ctx, "post", r.share(rate), -1, func(a openloop.Action) {
			r.post(posters[a.I%len(posters)], ch, "", a.Due)
		})
	})
	return wg.Wait
}

// post sends one message that was due at due (its stamp, from which the
// post and delivery latencies count); posts run to completion even when
// the load phase ends meanwhile (a cancelled post would leave its fate
// unknown).
func (r *runner) post(u *user, ch, root string, due time.Time) {
	r.rec.Post(due)
	m, err := u.c.PostMessage(context.Background(), ch, parley.NewMessage{Text: messageText(due, r.cfg.TextBytes), ThreadRootID: root})
	if err != nil {
		r.rec.Error(time.Now(), "post"+codeSuffix(err))
		return
	}
	r.rec.Hist("post").Record(time.Since(due))
	if root == "" {
		r.roots.Store(ch, m.ID)
	}
}

// connected lists the part's users with a Conn.
func (r *runner) connected() []*user {
	var out []*user
	for _, u := range r.users {
		if u.Conn() != nil {
			out = append(out, u)
		}
	}
	return out
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// loadPhase runs fn's load for the configured duration and waits for what
// is in flight.
func (r *runner) loadPhase(ctx context.Context, start func(ctx context.Context) (wait func())) error {
	lctx, cancel := context.WithTimeout(ctx, r.cfg.Duration)
	defer cancel()
	m := r.markCPU()
	wait := start(lctx)
	<-lctx.Done()
	wait()
	r.noteCores("load", m)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// bigTeamBoot: the users boot and connect at the connect rate while
// messages flow in #general; then the load runs on for the duration.
func (r *runner) bigTeamBoot(ctx context.Context) error {
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	t0 := time.Now()
	m := r.markCPU() // the load phase is the whole boot and after
	defer r.noteCores("load", m)
	// Posting starts once the posters are among the connected.
	var wait func()
	var once sync.Once
	startPosting := func() { wait = r.poster(pctx, r.cfg.Rate, r.plan.General) }
	firstPosters := int64(min(len(r.users), max(r.cfg.Posters/r.parts, 1)))
	var ok atomic.Int64
	r.schedule(ctx, "connect", r.share(r.cfg.ConnectRate), len(r.users), func(a openloop.Action) {
		if r.users[a.I].connect(ctx) == nil && ok.Add(1) == firstPosters {
			once.Do(startPosting)
		}
	})
	once.Do(startPosting)
	r.rec.SetExtra("all_connected_s", time.Since(t0).Seconds())
	err := sleep(ctx, r.cfg.Duration)
	stop()
	wait()
	return err
}

// reconnectStorm: everyone connects, messages flow, and after StormAfter
// every socket drops at once; the report says how long until all were
// back, and how many resumed rather than identified afresh.
func (r *runner) reconnectStorm(ctx context.Context) error {
	r.connectAll(ctx)
	if err := r.bar("connected"); err != nil {
		return err
	}
	return r.loadPhase(ctx, func(lctx context.Context) func() {
		wait := r.poster(lctx, r.cfg.Rate, r.plan.General)
		if sleep(lctx, r.cfg.StormAfter) != nil {
			return wait
		}
		conns := r.connected()
		r.storming.Store(true)
		r.back.Store(0)
		t0 := time.Now()
		for _, u := range conns {
			u.Conn().Drop()
		}
		for r.back.Load() < int64(len(conns)) && lctx.Err() == nil {
			_ = sleep(lctx, 10*time.Millisecond)
		}
		if r.back.Load() >= int64(len(conns)) {
			took := time.Since(t0).Seconds()
			r.rec.SetExtra("storm_all_back_s", took)
			// Sessions back per second, on average; parts add up.
			r.rec.SetExtra("storm_back_per_second", float64(len(conns))/took)
		}
		r.rec.SetExtra("storm_dropped", float64(len(conns)))
		return wait
	})
}

// joinSpike: everyone connected; the users who are not watchers join the
// spike channel at J joins a second; watchers (and every joiner from its
// join on) receive the member.joined stream.
func (r *runner) joinSpike(ctx context.Context) error {
	r.connectAll(ctx)
	if err := r.bar("connected"); err != nil {
		return err
	}
	var joiners []*user
	for _, u := range r.connected() {
		if u.idx >= r.cfg.Watchers {
			joiners = append(joiners, u)
		}
	}
	others := r.otherPosters(joiners)
	return r.loadPhase(ctx, func(lctx context.Context) func() {
		var wg sync.WaitGroup
		t0 := time.Now()
		r.frames0 = r.frames.Load()
		var joined atomic.Int64
		if len(others) > 0 && r.cfg.OtherRate > 0 {
			// Messages into the other channels meanwhile: their delivery
			// latency is what the spike costs everyone else.
			wg.Go(func() {
				r.schedule(lctx, "post", r.share(r.cfg.OtherRate), -1, func(a openloop.Action) {
					o := others[a.I%len(others)]
					r.post(o.u, o.ch, "", a.Due)
				})
			})
		}
		wg.Go(func() {
			// A join's latencies count from its due time: one that waited
			// for a slot waited as a person clicking Join would have.
			r.schedule(lctx, "join", r.share(r.cfg.Rate), len(joiners), func(a openloop.Action) {
				u := joiners[a.I]
				r.joinStarts.Store(u.id, a.Due)
				r.rec.Post(a.Due)
				if _, err := u.c.JoinChannel(context.Background(), r.plan.Spike); err != nil {
					r.rec.Error(time.Now(), "join"+codeSuffix(err))
					return
				}
				joined.Add(1)
				r.rec.Hist("join_api").Record(time.Since(a.Due))
			})
			r.rec.SetExtra("joins_done_s", time.Since(t0).Seconds())
			r.rec.SetExtra("joins_accepted", float64(joined.Load()))
		})
		return wg.Wait
	})
}

// otherPoster posts into a channel that is neither #general nor the spike.
type otherPoster struct {
	u  *user
	ch string
}

// otherPosters are up to Posters connected users, each with a channel of
// theirs other than #general and the spike (join-spike's other channels).
func (r *runner) otherPosters(from []*user) []otherPoster {
	var out []otherPoster
	for _, u := range from {
		if len(out) >= max(r.cfg.Posters/r.parts, 1) {
			break
		}
		for _, ch := range u.myChannels() {
			if ch != r.plan.General && ch != r.plan.Spike {
				out = append(out, otherPoster{u, ch})
				break
			}
		}
	}
	return out
}

// steady: a mix of what people do all day, at Rate actions a second over
// the part's users: messages in their channels, thread replies,
// reactions, DMs, status changes and typing; every session watches the
// presence of a few others.
func (r *runner) steady(ctx context.Context) error {
	r.connectAll(ctx)
	conns := r.connected()
	for _, u := range conns {
		var ids []string
		for range 3 {
			ids = append(ids, r.plan.Users[rand.IntN(len(r.plan.Users))].ID)
		}
		_ = u.Conn().PresenceSub(ids)
	}
	if err := r.bar("connected"); err != nil {
		return err
	}
	if len(conns) == 0 {
		return errors.New("steady: no user connected")
	}
	emojis := []string{"thumbsup", "tada", "eyes", "heart", "rocket", "wave"}
	return r.loadPhase(ctx, func(lctx context.Context) func() {
		var wg sync.WaitGroup
		wg.Go(func() {
			r.schedule(lctx, "action", r.share(r.cfg.Rate), -1, func(a openloop.Action) {
				r.steadyAction(conns[rand.IntN(len(conns))], emojis, a.Due)
			})
		})
		return wg.Wait
	})
}

// steadyAction does one random thing as u, due at due.
func (r *runner) steadyAction(u *user, emojis []string, due time.Time) {
	chans := u.myChannels()
	if len(chans) == 0 {
		return
	}
	// #general holds everyone: most talk happens in smaller channels.
	ch := chans[rand.IntN(len(chans))]
	if ch == r.plan.General && len(chans) > 1 && rand.IntN(10) != 0 {
		for ch == r.plan.General {
			ch = chans[rand.IntN(len(chans))]
		}
	}
	root, _ := r.roots.Load(ch)
	rootID, _ := root.(string)
	bg := context.Background()
	now := due
	switch p := rand.IntN(100); {
	case p < 45 || (p < 75 && rootID == ""):
		r.post(u, ch, "", due)
	case p < 60:
		r.post(u, ch, rootID, due)
	case p < 75:
		r.rec.Post(now)
		if _, err := u.c.AddReaction(bg, rootID, emojis[rand.IntN(len(emojis))]); err != nil {
			r.rec.Error(time.Now(), "reaction"+codeSuffix(err))
		}
	case p < 85:
		other := r.plan.Users[rand.IntN(len(r.plan.Users))].ID
		if other == u.id {
			return
		}
		r.rec.Post(now)
		dm, err := u.c.OpenDM(bg, r.plan.WorkspaceID, []string{other})
		if err != nil {
			r.rec.Error(time.Now(), "dm"+codeSuffix(err))
			return
		}
		r.post(u, dm.ID, "", due)
	case p < 90:
		r.rec.Post(now)
		if _, err := u.c.SetStatus(bg, parley.Status{Emoji: emojis[rand.IntN(len(emojis))], Text: "load test"}); err != nil {
			r.rec.Error(time.Now(), "status"+codeSuffix(err))
		}
	default:
		if c := u.Conn(); c != nil {
			_ = c.Typing(ch, "")
		}
	}
}

// account waits for the last events (the final catch-up window), fetches
// every checked channel's head from the server and counts what each user
// never received.
func (r *runner) account(ctx context.Context) *Part {
	drain := r.markCPU()
	// Each checked channel's best-placed member asks for its head.
	best := map[string]*user{}
	bestSeq := map[string]int64{}
	for _, u := range r.users {
		for ch, m := range u.chk.maxes() {
			if b, ok := bestSeq[ch]; !ok || m > b {
				best[ch], bestSeq[ch] = u, m
			}
		}
	}
	heads := map[string]int64{}
	for ch, u := range best {
		h, err := head(ctx, u.c, ch, bestSeq[ch])
		if err != nil {
			r.rec.Error(time.Now(), "head"+codeSuffix(err))
			continue
		}
		heads[ch] = h
	}
	t0 := time.Now()
	deadline := t0.Add(r.cfg.CatchUp)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		all := true
		for _, u := range r.users {
			if !u.chk.caughtUp(heads) {
				all = false
				break
			}
		}
		if all {
			r.rec.SetExtra("caught_up_s", time.Since(t0).Seconds())
			break
		}
		_ = sleep(ctx, 50*time.Millisecond)
	}
	r.noteCores("drain", drain) // the heads' fetch and the catch-up window
	if r.cfg.Scenario == ScenarioHotChannel {
		r.noteHot(r.markHot())
	}
	if r.cfg.Scenario == ScenarioJoinSpike {
		// Frames pushed by the end of the catch-up window: the spike's
		// member.joined, and every frame since the load began (the other
		// channels' posts included); buildResult divides by the joins.
		r.rec.SetExtra("spike_frames", float64(r.spikeFrames.Load()))
		r.rec.SetExtra("spike_all_frames", float64(r.frames.Load()-r.frames0))
	}
	r.closeAll()
	p := &Part{Users: len(r.users), Ephemeral: r.ephemeral.Load(), CaughtUp: r.caughtUp.Load()}
	for _, u := range r.users {
		if u.everReady.Load() {
			p.Connected++
		}
		lost, dups, ooo := u.chk.tally(heads)
		p.Lost += lost
		p.Duplicated += dups
		p.OutOfOrder += ooo
		if covered, behind := u.chk.summarized(); covered+behind > 0 || r.cfg.Scenario == ScenarioHotChannel {
			r.rec.AddExtra("summary_covered_events", float64(covered))
			r.rec.AddExtra("summaries_behind", float64(behind))
		}
		if u.viewer && u.everReady.Load() {
			r.rec.AddExtra("viewers", 1)
			r.rec.AddExtra("viewer_lost", float64(lost))
			r.rec.AddExtra("viewer_duplicated", float64(dups))
			r.rec.AddExtra("viewer_out_of_order", float64(ooo))
		}
		p.Checked += len(u.chk.maxes())
		if c := u.Conn(); c != nil {
			addStats(&p.ConnStats, c.Stats())
		}
	}
	if n := r.summaries.Load(); n > 0 || r.cfg.Scenario == ScenarioHotChannel {
		r.rec.SetExtra("summaries", float64(n))
	}
	p.Data = r.rec.Data()
	p.Audience = r.audResult
	return p
}

// head returns channel ch's last seq, paging its log from after.
func head(ctx context.Context, c *client.Client, ch string, after int64) (int64, error) {
	for {
		page, err := c.ListEvents(ctx, ch, after, parley.MaxLimit)
		if err != nil {
			return 0, err
		}
		if n := len(page.Events); n > 0 {
			after = max(after, page.Events[n-1].Seq)
		}
		if page.NextCursor == "" || len(page.Events) == 0 {
			return after, nil
		}
	}
}

// closeAll closes every Conn and waits for them to stop.
func (r *runner) closeAll() {
	for _, u := range r.users {
		if c := u.Conn(); c != nil {
			c.Close()
		}
	}
	for _, u := range r.users {
		if c := u.Conn(); c != nil {
			<-c.Done()
		}
	}
}

func addStats(a *client.Stats, b client.Stats) {
	a.Reconnects += b.Reconnects
	a.Resumes += b.Resumes
	a.InvalidSessions += b.InvalidSessions
	a.HeartbeatTimeouts += b.HeartbeatTimeouts
	a.CatchUps += b.CatchUps
	a.GapsFilled += b.GapsFilled
	a.GapsUnfillable += b.GapsUnfillable
	a.DuplicatesDropped += b.DuplicatesDropped
	a.SGaps += b.SGaps
	a.Delivered += b.Delivered
	a.Summaries += b.Summaries
}
