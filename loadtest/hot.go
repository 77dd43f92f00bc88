package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"parley/internal/cpustat"
	"parley/internal/openloop"
)

// The hot-channel scenario (issue 13's evidence): M members of #general
// connected, Viewers of them with #general in focus, Rate messages a
// second into it and OtherRate into the other channels at the same time.
// With view-aware delivery on, the non-viewers get channel.summary frames
// for #general instead of its events; the checker counts what a summary
// covers as received. When the load is over every non-viewer focuses
// #general (catch-up for everyone) and the accounting then checks every
// user's position in every channel against its head.

// isViewer spreads v viewers evenly over n users: user i is one when
// (i·v) mod n < v.
func isViewer(i, v, n int) bool {
	if n <= 0 || v <= 0 {
		return false
	}
	return int64(i)*int64(v)%int64(n) < int64(v)
}

// messageHist is the histogram a live message's latency goes to: in
// hot-channel, #general's to its viewers ("delivery"), #general's to the
// others ("passive_delivery": all of it in a dry run, only the final
// focus's replay with view-aware delivery on) and the other channels'
// ("other_delivery"); in the other scenarios "delivery".
func (r *runner) messageHist(u *user, ch string) *Hist {
	switch {
	case r.cfg.Scenario != ScenarioHotChannel:
		return r.deliveryHist
	case ch != r.plan.General:
		return r.otherHist
	case u.viewer:
		return r.deliveryHist
	default:
		return r.passiveHist
	}
}

// focusGeneral brings #general into u's focus.
func (r *runner) focusGeneral(u *user) {
	if c := u.Conn(); c != nil {
		if err := c.Focus([]string{r.plan.General}); err != nil {
			r.rec.Error(time.Now(), "focus"+codeSuffix(err))
		}
	}
}

// hotChannel: M members connected, the viewers focusing #general; S
// messages a second into #general (none with Baseline) and OtherRate into
// the other channels; then every other member focuses #general.
func (r *runner) hotChannel(ctx context.Context) error {
	r.connectAll(ctx)
	for _, u := range r.connected() {
		if u.viewer {
			r.focusGeneral(u)
		}
	}
	if err := r.bar("connected"); err != nil {
		return err
	}
	conns := r.connected()
	// The first Posters users post into #general (runner.poster); others
	// post into the other channels, one poster per channel.
	nPosters := min(len(conns), max(r.cfg.Posters/r.parts, 1))
	others := r.otherChannelPosters(conns[nPosters:])
	err := r.loadPhase(ctx, func(lctx context.Context) func() {
		r.hot.load0 = r.markHot()
		wait := func() {}
		if !r.cfg.Baseline {
			wait = r.poster(lctx, r.cfg.Rate, r.plan.General)
		}
		var wg sync.WaitGroup
		if len(others) > 0 && r.cfg.OtherRate > 0 {
			wg.Go(func() {
				r.schedule(lctx, "other_post", r.share(r.cfg.OtherRate), -1, func(a openloop.Action) {
					o := others[a.I%len(others)]
					r.post(o.u, o.ch, "", a.Due)
				})
			})
		}
		return func() { wait(); wg.Wait() }
	})
	r.hot.load1 = r.markHot()
	// Catch-up for everyone: the members who passed #general over bring
	// it into focus (a replay or one last summary, then live events).
	for _, u := range r.connected() {
		if !u.viewer {
			r.focusGeneral(u)
		}
	}
	return err
}

// otherChannelPosters picks from from one poster for each channel other
// than #general that some user of from is in (the user's first such
// channel; with `parley seed`'s spread membership, user i is in load-(i mod
// M + 1), so every channel of the part's users gets one).
func (r *runner) otherChannelPosters(from []*user) []otherPoster {
	var out []otherPoster
	taken := map[string]bool{}
	for _, u := range from {
		for _, ch := range u.myChannels() {
			if ch != r.plan.General && ch != r.plan.Spike && !taken[ch] {
				taken[ch] = true
				out = append(out, otherPoster{u, ch})
				break
			}
		}
	}
	return out
}

// hotMark is a reading at one moment: the part's frames and deliveries
// and (part 0, with ServerPID) the server's CPU time and system calls.
type hotMark struct {
	at                 time.Time
	frames, deliveries int64
	server             time.Duration
	syscr, syscw       int64
	serverOK, ioOK     bool
}

// hotMarks are the readings at the start and the end of the load.
type hotMarks struct{ load0, load1 hotMark }

func (r *runner) markHot() hotMark {
	m := hotMark{at: time.Now(), frames: r.frames.Load(), deliveries: r.rec.Deliveries.Load()}
	if r.cfg.ServerPID > 0 && r.part == 0 {
		var err error
		m.server, err = cpustat.Process(r.cfg.ServerPID)
		m.serverOK = err == nil
		m.syscr, m.syscw, err = procSyscalls(r.cfg.ServerPID)
		m.ioOK = err == nil
	}
	return m
}

// noteHot records the load window's and the whole window's (the load,
// the final focus and the catch-up up to end) frames, deliveries, server
// CPU-seconds and read and write system calls as extras (load_… and
// all_…); hotFigures divides them.
func (r *runner) noteHot(end hotMark) {
	for _, w := range []struct {
		name     string
		from, to hotMark
	}{{"load", r.hot.load0, r.hot.load1}, {"all", r.hot.load0, end}} {
		if w.from.at.IsZero() || w.to.at.IsZero() {
			continue
		}
		r.rec.SetExtra(w.name+"_frames", float64(w.to.frames-w.from.frames))
		r.rec.SetExtra(w.name+"_deliveries", float64(w.to.deliveries-w.from.deliveries))
		r.rec.SetExtra(w.name+"_window_s", w.to.at.Sub(w.from.at).Seconds())
		if w.from.serverOK && w.to.serverOK {
			r.rec.SetExtra(w.name+"_server_cpu_seconds", (w.to.server - w.from.server).Seconds())
		}
		if w.from.ioOK && w.to.ioOK {
			r.rec.SetExtra(w.name+"_server_syscr", float64(w.to.syscr-w.from.syscr))
			r.rec.SetExtra(w.name+"_server_syscw", float64(w.to.syscw-w.from.syscw))
		}
	}
}

// hotFigures derives the per-second and per-delivery figures from the
// parts' added-up extras: frames a second over the load, and over the
// whole window the server's CPU-seconds per 1,000 deliveries and per 1,000
// events owed (deliveries plus the events summaries covered), and its
// write and read system calls per delivery.
func hotFigures(x map[string]float64, d time.Duration) {
	if s := x["load_window_s"]; s > 0 {
		x["load_frames_per_s"] = x["load_frames"] / s
		x["load_deliveries_per_s"] = x["load_deliveries"] / s
	} else if d > 0 {
		x["load_frames_per_s"] = x["load_frames"] / d.Seconds()
	}
	n := x["all_deliveries"]
	if n <= 0 {
		return
	}
	if cpu, ok := x["all_server_cpu_seconds"]; ok {
		x["server_cpu_s_per_1000_deliveries"] = cpu / n * 1000
		x["server_cpu_s_per_1000_owed"] = cpu / (n + x["summary_covered_events"]) * 1000
	}
	if w, ok := x["all_server_syscw"]; ok {
		x["server_syscw_per_delivery"] = w / n
		x["server_syscr_per_delivery"] = x["all_server_syscr"] / n
	}
	x["frames_per_delivery"] = x["all_frames"] / n
}

// procSyscalls reads a process's read and write system calls so far
// (/proc/<pid>/io: syscr, syscw; socket writes and reads through write,
// writev, read and readv count, sendmsg and recvmsg do not).
func procSyscalls(pid int) (syscr, syscw int64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return 0, 0, fmt.Errorf("syscalls of %d: %w", pid, err)
	}
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(": "))
		if !ok {
			continue
		}
		var dst *int64
		switch string(k) {
		case "syscr":
			dst = &syscr
		case "syscw":
			dst = &syscw
		default:
			continue
		}
		if *dst, err = strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64); err != nil {
			return 0, 0, fmt.Errorf("syscalls of %d: %s: %w", pid, k, err)
		}
		found++
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("syscalls of %d: no syscr and syscw in /proc/%d/io", pid, pid)
	}
	return syscr, syscw, nil
}
