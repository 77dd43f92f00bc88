package loadtest

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"parley"
)

// liveSwitch is a live configuration a test changes while the node runs,
// as PUT /config does.
type liveSwitch struct {
	p atomic.Pointer[parley.LiveConfig]
}

func (l *liveSwitch) LiveConfig() parley.LiveConfig { return *l.p.Load() }
func (l *liveSwitch) set(c parley.LiveConfig)       { l.p.Store(&c) }

// hot-channel, tiny, with view-aware delivery for every channel
// (view_min_members 0): the non-viewers get summaries for #general and
// the checker counts what they cover, so nothing is lost, and the viewers
// get #general's events live; then, on the same node, with view_dry_run
// on, everyone gets every event and no summary comes.
func TestHotChannelEndToEnd(t *testing.T) {
	live := &liveSwitch{}
	cfg := parley.DefaultLiveConfig()
	cfg.ViewMinMembers, cfg.ViewSummarySeconds = 0, 1
	live.set(cfg)
	url, st := newNodeLive(t, live)
	run := func(t *testing.T) *Result {
		res, err := Run(t.Context(), Config{URL: url, Scenario: ScenarioHotChannel, Seed: seedFileFor(t, st, 6, 2),
			Rate: 20, OtherRate: 4, Viewers: 2, Posters: 2, Duration: 1500 * time.Millisecond, CatchUp: 20 * time.Second,
			ServerPID: os.Getpid(), Out: t.TempDir(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		var sum strings.Builder
		res.Print(&sum)
		t.Log(sum.String())
		x := res.Extra
		if !res.Pass || res.Lost != 0 || res.Duplicated != 0 || res.OutOfOrder != 0 || res.Connected != 6 {
			t.Fatalf("%+v", res)
		}
		if x["viewers"] != 2 || x["viewer_lost"] != 0 || x["viewer_duplicated"] != 0 || x["viewer_out_of_order"] != 0 {
			t.Errorf("viewers: %v", x)
		}
		// The viewers got #general's events live.
		if res.Latency["delivery"].Count == 0 {
			t.Errorf("no live delivery to a viewer: %+v", res.Latency)
		}
		if x["all_deliveries"] <= 0 || x["all_frames"] <= 0 || x["server_cpu_s_per_1000_deliveries"] <= 0 || x["server_syscw_per_delivery"] <= 0 {
			t.Errorf("per-delivery figures: %v", x)
		}
		if x["summaries"] != float64(res.Client.Summaries) {
			t.Errorf("%v summaries handled, the clients counted %d", x["summaries"], res.Client.Summaries)
		}
		return res
	}
	var on *Result
	t.Run("view", func(t *testing.T) {
		on = run(t)
		// Non-viewers passed #general over: summaries covered events
		// that were never sent, and still nothing was lost.
		if on.Extra["summaries"] == 0 || on.Extra["summary_covered_events"] == 0 {
			t.Errorf("no summaries: %v", on.Extra)
		}
	})
	cfg.ViewDryRun = true
	live.set(cfg)
	t.Run("dry_run", func(t *testing.T) {
		off := run(t)
		if off.Extra["summaries"] != 0 || off.Extra["summary_covered_events"] != 0 {
			t.Errorf("summaries in a dry run: %v", off.Extra)
		}
		// Everyone got #general's events live, and the other channels'.
		if off.Latency["passive_delivery"].Count == 0 || off.Latency["other_delivery"].Count == 0 {
			t.Errorf("dry run: %+v", off.Latency)
		}
		if on != nil && off.Deliveries <= on.Deliveries {
			t.Errorf("%d deliveries in the dry run, %d with view-aware delivery on", off.Deliveries, on.Deliveries)
		}
	})
}
