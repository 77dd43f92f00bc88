package loadtest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"parley"
)

// The chaos checker on made-up histories: each kind of finding is caught,
// and a recovered post is not a failure.
func TestChaosCheck(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	msg := func(seq int64, cmid string) parley.Event {
		d, _ := json.Marshal(parley.MessageEventData{ChannelID: "c", Seq: seq,
			Message: &parley.Message{Seq: seq, ClientMsgID: cmid, CreatedAt: t0.Add(time.Duration(seq) * time.Second)}})
		return parley.Event{ChannelID: "c", Seq: seq, Type: parley.EventMessageCreated, Data: d}
	}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	base := func() (*chaosRun, map[string][]parley.Event, *chaosReader) {
		r := &chaosRun{cfg: &ChaosConfig{Seed: 1}}
		r.writes = []write{
			{Channel: "c", CMID: "chaos-1", Sent: at(0), Acked: at(1), Seq: 1},
			{Channel: "c", CMID: "chaos-2", Sent: at(1), Acked: at(2), Seq: 2},
			{Channel: "c", CMID: "chaos-3", Sent: at(2), Err: "timeout"}, // failed, but committed
			{Channel: "c", CMID: "chaos-4", Sent: at(3), Err: "refused"}, // failed, not committed
		}
		hist := map[string][]parley.Event{"c": {msg(1, "chaos-1"), msg(2, "chaos-2"), msg(3, "chaos-3")}}
		rd := &chaosReader{chans: []string{"c"}, receipts: map[string][]receipt{}}
		rd.chk.declare("c", 0)
		return r, hist, rd
	}
	hand := func(rd *chaosReader, seqs ...int64) {
		for _, s := range seqs {
			rd.chk.observe("c", s)
			rd.receipts["c"] = append(rd.receipts["c"], receipt{seq: s, at: at(int(s) + 1), live: true})
		}
	}

	r, hist, rd := base()
	hand(rd, 1, 2, 3)
	rep := r.check([]*chaosReader{rd}, hist, t0, at(10))
	if !rep.Pass || rep.Counts.Recovered != 1 || rep.Counts.Failed != 1 || rep.Counts.Acked != 2 || rep.Counts.Committed != 3 {
		t.Fatalf("clean history: pass %v, %+v", rep.Pass, rep.Counts)
	}
	if rep.Latency[0].Count != 3 || rep.Latency[0].Max != 1000 {
		t.Fatalf("latency: %+v", rep.Latency[0])
	}

	cases := []struct {
		name  string
		setup func(r *chaosRun, hist map[string][]parley.Event, rd *chaosReader)
		check func(c ChaosCounts) bool
	}{
		{"lost", func(r *chaosRun, hist map[string][]parley.Event, rd *chaosReader) {
			r.writes = append(r.writes, write{Channel: "c", CMID: "chaos-9", Sent: at(4), Acked: at(5), Seq: 4})
			hand(rd, 1, 2, 3)
		}, func(c ChaosCounts) bool { return c.Lost == 1 }},
		{"undelivered", func(r *chaosRun, hist map[string][]parley.Event, rd *chaosReader) {
			hand(rd, 1, 3)
		}, func(c ChaosCounts) bool { return c.Undelivered == 1 }},
		{"duplicated in the log", func(r *chaosRun, hist map[string][]parley.Event, rd *chaosReader) {
			hist["c"] = append(hist["c"], msg(4, "chaos-2"))
			hand(rd, 1, 2, 3, 4)
		}, func(c ChaosCounts) bool { return c.Duplicated == 1 }},
		{"handed twice", func(r *chaosRun, hist map[string][]parley.Event, rd *chaosReader) {
			hand(rd, 1, 2, 2, 3)
		}, func(c ChaosCounts) bool { return c.Duplicated == 1 }},
		{"out of order", func(r *chaosRun, hist map[string][]parley.Event, rd *chaosReader) {
			hand(rd, 1, 3, 2)
		}, func(c ChaosCounts) bool { return c.OutOfOrder == 1 }},
		{"mismatched", func(r *chaosRun, hist map[string][]parley.Event, rd *chaosReader) {
			r.writes[1].Seq = 7
			hand(rd, 1, 2, 3)
		}, func(c ChaosCounts) bool { return c.Mismatched == 1 }},
	}
	for _, tc := range cases {
		r, hist, rd := base()
		tc.setup(r, hist, rd)
		rep := r.check([]*chaosReader{rd}, hist, t0, at(10))
		c := rep.Counts
		if rep.Pass || !tc.check(c) || c.Lost+c.Undelivered+c.Duplicated+c.OutOfOrder+c.Mismatched != 1 {
			t.Errorf("%s: pass %v, %+v", tc.name, rep.Pass, rep.Counts)
		}
	}
}

// A node process that exits while starting fails waitReady with its last
// log line (the start's "parley: …" error), which a test's output keeps
// after the log's temporary directory is gone.
func TestChaosNodeExitSaysWhy(t *testing.T) {
	dir := t.TempDir()
	n := &chaosNode{idx: 4, logPath: dir + "/node-4.log", admin: "http://127.0.0.1:1",
		exec: []string{"sh", "-c", `echo '{"msg":"opening store"}'; echo 'parley: open store: too many clients already (SQLSTATE 53300)' >&2; exit 1`}}
	if err := n.start(); err != nil {
		t.Fatal(err)
	}
	err := n.waitReady(t.Context(), 30*time.Second)
	want := "node 4 exited while starting (see " + n.logPath + "): parley: open store: too many clients already (SQLSTATE 53300)"
	if err == nil || err.Error() != want {
		t.Fatalf("waitReady: %v\nwant %s", err, want)
	}
	if got := lastLogLine(dir + "/absent.log"); !strings.HasPrefix(got, "(no log: ") {
		t.Fatalf("lastLogLine of a missing log: %q", got)
	}
}
