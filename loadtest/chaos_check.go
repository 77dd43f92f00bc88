package loadtest

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"parley"
	"parley/client"
)

// The checker of a chaos run, after Jepsen's: the histories are what the
// writers were told (every post's client_msg_id, channel, seq and ack
// time, or its error), what each reader was handed (every durable event of
// its channels, in order), and the channels' logs read back over the API
// at the end, when every fault is healed. From them:
//
//   - lost: a post acknowledged to its writer that is not in its channel's
//     log (whether or not a reader was ever handed it);
//   - undelivered: an event of the log that a reader of its channel was
//     never handed, live or by catch-up, by the end of the settle window;
//   - duplicated: a client_msg_id twice in a log, or a reader handed the
//     same seq twice;
//   - out of order: a reader handed a seq below one it already had, or a
//     log whose seqs are not 1, 2, 3, …;
//   - mismatched: an acknowledged seq that is not the seq of that
//     client_msg_id in the log;
//   - recovered: a post whose request failed (the writer was told nothing
//     or an error) but which is in the log — allowed: the client cannot
//     know, and the client_msg_id makes the retry safe.
//
// A run passes when everything but recovered is zero.

// Anomaly is one finding, with the evidence to chase it.
type Anomaly struct {
	Channel string `json:"channel"`
	CMID    string `json:"client_msg_id,omitempty"`
	Seq     int64  `json:"seq,omitempty"`
	Reader  string `json:"reader,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// ChaosCounts are the checker's totals.
type ChaosCounts struct {
	Posts       int `json:"posts"`       // requests sent
	Acked       int `json:"acked"`       // acknowledged
	Failed      int `json:"failed"`      // failed, not in the log
	Recovered   int `json:"recovered"`   // failed, but in the log
	Committed   int `json:"committed"`   // messages of the run in the logs
	Receipts    int `json:"receipts"`    // message events handed to readers
	Live        int `json:"live"`        // of those, from the gateway
	Lost        int `json:"lost"`        // acknowledged, not in the log
	Undelivered int `json:"undelivered"` // in the log, never handed to a reader owed it
	Duplicated  int `json:"duplicated"`  // in a log twice, or handed twice
	OutOfOrder  int `json:"out_of_order"`
	Mismatched  int `json:"mismatched"` // acknowledged seq ≠ logged seq
	// GaveUp counts readers whose session gave up for good (a fatal
	// close): a reader with a valid token must never stop reconnecting.
	GaveUp int `json:"gave_up"`
}

// LatencyRow is commit→delivery latency over the receipts of the
// messages committed in one window (a fault's, all faults of a kind, or
// outside every fault: "none").
type LatencyRow struct {
	Window string  `json:"window"`
	Count  int     `json:"count"`
	P50    float64 `json:"p50_ms"`
	P90    float64 `json:"p90_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
	// Post sent → delivery: the writer's wait included (retries, stalls).
	E2EP50 float64 `json:"e2e_p50_ms"`
	E2EP99 float64 `json:"e2e_p99_ms"`
	E2EMax float64 `json:"e2e_max_ms"`
}

// ChaosSecond is one second of the timeline (since the load began).
type ChaosSecond struct {
	T           int     `json:"t"`
	Receipts    int     `json:"receipts"`
	P50         float64 `json:"p50_ms"`
	P99         float64 `json:"p99_ms"`
	Max         float64 `json:"max_ms"`
	Posts       int     `json:"posts"`
	PostErrors  int     `json:"post_errors"`
	Disconnects int     `json:"disconnects"`
	Reconnects  int     `json:"reconnects"` // sessions back (resumed or identified again)
}

// ChaosReport is a chaos run's result (chaos.json).
type ChaosReport struct {
	Seed        uint64         `json:"seed"`
	Started     time.Time      `json:"started"`
	LoadSeconds float64        `json:"load_seconds"`
	Nodes       int            `json:"nodes"`
	NATS        string         `json:"nats"`
	Scenario    string         `json:"scenario"`
	Users       int            `json:"users"`
	Writers     int            `json:"writers"`
	Rate        float64        `json:"rate"`
	Faults      []Fault        `json:"faults"`
	FaultCounts map[string]int `json:"fault_counts"`
	Counts      ChaosCounts    `json:"counts"`
	// The findings, at most maxAnomalies of each.
	Lost        []Anomaly `json:"lost"`
	Undelivered []Anomaly `json:"undelivered"`
	// UndeliveredStreams sums the undelivered up per reader and channel.
	UndeliveredStreams []StreamEvidence `json:"undelivered_streams"`
	Duplicated         []Anomaly        `json:"duplicated"`
	OutOfOrder         []Anomaly        `json:"out_of_order"`
	Mismatched         []Anomaly        `json:"mismatched"`
	GaveUp             []Anomaly        `json:"gave_up"`
	Recovered          []Anomaly        `json:"recovered"`
	Failed             []Anomaly        `json:"failed"` // not acknowledged, not committed (allowed)
	Latency            []LatencyRow     `json:"latency"`
	Client             client.Stats     `json:"client"` // summed over the readers
	Timeline           []ChaosSecond    `json:"timeline"`
	Pass               bool             `json:"pass"`
}

const maxAnomalies = 100

func addAnomaly(list *[]Anomaly, n *int, a Anomaly) {
	*n++
	if len(*list) < maxAnomalies {
		*list = append(*list, a)
	}
}

// StreamEvidence is what one reader had of one channel at the end.
type StreamEvidence struct {
	Reader    int      `json:"reader"`
	UserID    string   `json:"user_id"`
	Channel   string   `json:"channel"`
	Head      int64    `json:"head"`
	Missing   int      `json:"missing"`
	Ranges    []string `json:"ranges"`    // the first missing ranges, "a-b"
	Receipts  int      `json:"receipts"`  // messages handed over
	LastSeq   int64    `json:"last_seq"`  // highest message seq handed over
	Summaries int      `json:"summaries"` // channel.summary frames
	// SummaryTail are the last_seq of the last summaries.
	SummaryTail []int64 `json:"summary_tail"`
	// Connected and ConnErr are the reader's Conn at the end: a Conn that
	// gave up (a fatal close) receives nothing more.
	Connected bool   `json:"connected"`
	ConnErr   string `json:"conn_err,omitempty"`
	// Tracked and Position are the client's own position in the channel
	// at the end (client.Conn.Positions): a channel the client stopped
	// tracking gets no gap fills and its events arrive unordered.
	Tracked  bool  `json:"tracked"`
	Position int64 `json:"position"`
	// Unordered counts the channel's durable events the client handed
	// over without ordering them (it no longer tracked the channel).
	Unordered int `json:"unordered"`
	// Client is the reader's Conn counters at the end.
	Client client.Stats `json:"client"`
	// Around are the receipts just before and after the first hole:
	// "seq@seconds since the first receipt (live|catch-up)".
	Around []string `json:"around"`
}

// streamEvidence gathers what the reader had of ch.
func (rd *chaosReader) streamEvidence(ch string, head int64, miss []int64) StreamEvidence {
	ev := StreamEvidence{Reader: rd.idx, UserID: rd.user.ID, Channel: ch, Head: head, Missing: len(miss)}
	for i := 0; i < len(miss) && len(ev.Ranges) < 10; {
		j := i
		for j+1 < len(miss) && miss[j+1] == miss[j]+1 {
			j++
		}
		ev.Ranges = append(ev.Ranges, fmt.Sprintf("%d-%d", miss[i], miss[j]))
		i = j + 1
	}
	if rd.conn != nil {
		ev.Connected = rd.conn.Connected()
		if err := rd.conn.Err(); err != nil {
			ev.ConnErr = err.Error()
		}
		ev.Position, ev.Tracked = rd.conn.Positions()[ch]
		ev.Client = rd.conn.Stats()
	}
	rd.mu.Lock()
	defer rd.mu.Unlock()
	ev.Unordered = rd.unordered[ch]
	rs := rd.receipts[ch]
	ev.Receipts = len(rs)
	if len(rs) > 0 {
		ev.LastSeq = rs[len(rs)-1].seq
	}
	sums := rd.summaries[ch]
	ev.Summaries = len(sums)
	ev.SummaryTail = sums[max(0, len(sums)-5):]
	for i, rc := range rs {
		if rc.seq > miss[0]-3 && rc.seq < miss[0]+200 || i == len(rs)-1 {
			src := "live"
			if !rc.live {
				src = "catch-up"
			}
			ev.Around = append(ev.Around, fmt.Sprintf("%d@%.1fs(%s)", rc.seq, rc.at.Sub(rs[0].at).Seconds(), src))
			if len(ev.Around) >= 6 {
				break
			}
		}
	}
	return ev
}

// missing returns the seqs in (start, h] of channel ch the checker never saw.
func (c *checker) missing(ch string, h int64) []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.chans[ch]
	if s == nil {
		return nil
	}
	var out []int64
	for seq := s.start + 1; seq <= h; seq++ {
		i := seq - s.start - 1
		w := int(i / 64)
		if w >= len(s.seen) || s.seen[w]&(1<<(i%64)) == 0 {
			out = append(out, seq)
		}
	}
	return out
}

// logged is a message of a log.
type logged struct {
	seq  int64
	cmid string
	made time.Time
}

// check turns the histories into the report.
func (r *chaosRun) check(readers []*chaosReader, hist map[string][]parley.Event, loadStart, loadEnd time.Time) *ChaosReport {
	cfg := r.cfg
	r.mu.Lock()
	writes := slices.Clone(r.writes)
	faults := slices.Clone(r.faults)
	states := slices.Clone(r.states)
	r.mu.Unlock()

	rep := &ChaosReport{Seed: cfg.Seed, Started: loadStart, LoadSeconds: loadEnd.Sub(loadStart).Seconds(),
		Nodes: cfg.Nodes, NATS: orDefault(cfg.NATS, "embedded cluster"), Scenario: cfg.Scenario, Users: cfg.Users,
		Writers: cfg.Writers, Rate: cfg.Rate, Faults: faults, FaultCounts: map[string]int{}}
	for _, f := range faults {
		rep.FaultCounts[f.Kind]++
	}
	cnt := &rep.Counts

	// The logs: seqs 1, 2, 3, … and each client_msg_id once.
	inLog := map[string]logged{}           // client_msg_id → its message
	bySeq := map[string]map[int64]logged{} // channel → seq → its message
	for ch, evs := range hist {
		bySeq[ch] = map[int64]logged{}
		for i, ev := range evs {
			if ev.Seq != int64(i+1) {
				addAnomaly(&rep.OutOfOrder, &cnt.OutOfOrder, Anomaly{Channel: ch, Seq: ev.Seq,
					Detail: fmt.Sprintf("log position %d holds seq %d", i+1, ev.Seq)})
			}
			if ev.Type != parley.EventMessageCreated {
				continue
			}
			cmid, made := messageOf(ev.Data)
			if cmid == "" {
				continue
			}
			if prev, ok := inLog[cmid]; ok {
				addAnomaly(&rep.Duplicated, &cnt.Duplicated, Anomaly{Channel: ch, CMID: cmid, Seq: ev.Seq,
					Detail: fmt.Sprintf("in the log at seq %d and %d", prev.seq, ev.Seq)})
				continue
			}
			inLog[cmid] = logged{ev.Seq, cmid, made}
			bySeq[ch][ev.Seq] = inLog[cmid]
			cnt.Committed++
		}
	}

	// The writers' histories against the logs.
	sent := map[string]time.Time{}
	for _, w := range writes {
		sent[w.CMID] = w.Sent
		cnt.Posts++
		l, ok := inLog[w.CMID]
		switch {
		case w.Acked.IsZero() && ok:
			addAnomaly(&rep.Recovered, &cnt.Recovered, Anomaly{Channel: w.Channel, CMID: w.CMID, Seq: l.seq, Detail: w.Err})
		case w.Acked.IsZero():
			addAnomaly(&rep.Failed, &cnt.Failed, Anomaly{Channel: w.Channel, CMID: w.CMID, Detail: w.Err})
		case !ok:
			cnt.Acked++
			addAnomaly(&rep.Lost, &cnt.Lost, Anomaly{Channel: w.Channel, CMID: w.CMID, Seq: w.Seq,
				Detail: fmt.Sprintf("acknowledged at %s with seq %d; handed to %d readers; not in the log",
					w.Acked.UTC().Format(time.RFC3339Nano), w.Seq, r.handedCount(readers, w.Channel, w.Seq))})
		default:
			cnt.Acked++
			if l.seq != w.Seq {
				addAnomaly(&rep.Mismatched, &cnt.Mismatched, Anomaly{Channel: w.Channel, CMID: w.CMID, Seq: w.Seq,
					Detail: fmt.Sprintf("acknowledged with seq %d, logged at seq %d", w.Seq, l.seq)})
			}
		}
	}

	// The readers' histories against the logs.
	var lats []receiptLat
	for _, rd := range readers {
		if rd.conn != nil {
			addStats(&rep.Client, rd.conn.Stats())
		}
		for _, ch := range rd.chans {
			evs := hist[ch]
			if len(evs) == 0 {
				continue
			}
			head := evs[len(evs)-1].Seq
			miss := rd.chk.missing(ch, head)
			for _, seq := range miss {
				addAnomaly(&rep.Undelivered, &cnt.Undelivered, Anomaly{Channel: ch, Seq: seq, Reader: rd.user.ID,
					Detail: fmt.Sprintf("reader %d never handed seq %d of %d (%s)", rd.idx, seq, head, evType(evs, seq))})
			}
			if len(miss) > 0 && len(rep.UndeliveredStreams) < maxAnomalies {
				rep.UndeliveredStreams = append(rep.UndeliveredStreams, rd.streamEvidence(ch, head, miss))
			}
		}
		rd.mu.Lock()
		var recDups, recOOO int64
		for ch, rs := range rd.receipts {
			var last int64
			seen := map[int64]bool{}
			for _, rc := range rs {
				cnt.Receipts++
				if rc.live {
					cnt.Live++
				}
				if seen[rc.seq] {
					recDups++
					addAnomaly(&rep.Duplicated, &cnt.Duplicated, Anomaly{Channel: ch, Seq: rc.seq, CMID: rc.cmid,
						Reader: rd.user.ID, Detail: fmt.Sprintf("reader %d handed seq %d twice", rd.idx, rc.seq)})
				} else if rc.seq < last {
					recOOO++
					addAnomaly(&rep.OutOfOrder, &cnt.OutOfOrder, Anomaly{Channel: ch, Seq: rc.seq, CMID: rc.cmid,
						Reader: rd.user.ID, Detail: fmt.Sprintf("reader %d handed seq %d after seq %d", rd.idx, rc.seq, last)})
				}
				seen[rc.seq] = true
				last = max(last, rc.seq)
				// Only the author's copy carries the client_msg_id: the
				// log says which post a seq is.
				if l, ok := bySeq[ch][rc.seq]; ok && strings.HasPrefix(l.cmid, "chaos-") {
					lats = append(lats, receiptLat{made: l.made, sent: sent[l.cmid], at: rc.at,
						ms: float64(rc.at.Sub(l.made)) / 1e6, e2e: float64(rc.at.Sub(sent[l.cmid])) / 1e6})
				}
			}
		}
		rd.mu.Unlock()
		// The seq checker sees every durable event, not only messages:
		// what it counted beyond the messages' findings above.
		_, dups, ooo := rd.chk.tally(nil)
		if d := dups - recDups; d > 0 {
			cnt.Duplicated += int(d) - 1
			addAnomaly(&rep.Duplicated, &cnt.Duplicated, Anomaly{Reader: rd.user.ID,
				Detail: fmt.Sprintf("reader %d handed %d other durable events twice", rd.idx, d)})
		}
		if o := ooo - recOOO; o > 0 {
			cnt.OutOfOrder += int(o) - 1
			addAnomaly(&rep.OutOfOrder, &cnt.OutOfOrder, Anomaly{Reader: rd.user.ID,
				Detail: fmt.Sprintf("reader %d handed %d other durable events out of order", rd.idx, o)})
		}
	}

	rep.Latency = latencyRows(lats, faults)
	rep.Timeline = timeline(lats, writes, states, loadStart)
	for _, rd := range readers {
		if rd.conn == nil {
			continue
		}
		if err := rd.conn.Err(); err != nil {
			addAnomaly(&rep.GaveUp, &cnt.GaveUp, Anomaly{Reader: rd.user.ID,
				Detail: fmt.Sprintf("reader %d's session gave up: %v", rd.idx, err)})
		}
	}
	rep.Pass = cnt.Lost == 0 && cnt.Undelivered == 0 && cnt.Duplicated == 0 && cnt.OutOfOrder == 0 && cnt.Mismatched == 0 &&
		cnt.GaveUp == 0
	return rep
}

// faultCountText is "kill 3, stop 2, …" in FaultKinds order.
func faultCountText(m map[string]int) string {
	var parts []string
	for _, k := range FaultKinds {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	return strings.Join(parts, ", ")
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// handedCount counts the readers handed seq of ch.
func (r *chaosRun) handedCount(readers []*chaosReader, ch string, seq int64) int {
	n := 0
	for _, rd := range readers {
		rd.mu.Lock()
		for _, rc := range rd.receipts[ch] {
			if rc.seq == seq {
				n++
				break
			}
		}
		rd.mu.Unlock()
	}
	return n
}

// evType names the type of the event at seq in a log.
func evType(evs []parley.Event, seq int64) string {
	if seq >= 1 && seq <= int64(len(evs)) {
		return evs[seq-1].Type
	}
	return "?"
}

type receiptLat struct {
	made, sent, at time.Time
	ms, e2e        float64 // commit→delivery, post sent→delivery
}

func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func latencyRow(name string, lats []receiptLat) LatencyRow {
	ms := make([]float64, len(lats))
	e2e := make([]float64, len(lats))
	for i, l := range lats {
		ms[i], e2e[i] = l.ms, l.e2e
	}
	sort.Float64s(ms)
	sort.Float64s(e2e)
	row := LatencyRow{Window: name, Count: len(ms)}
	if len(ms) > 0 {
		row.P50, row.P90, row.P99, row.Max = pct(ms, .5), pct(ms, .9), pct(ms, .99), ms[len(ms)-1]
		row.E2EP50, row.E2EP99, row.E2EMax = pct(e2e, .5), pct(e2e, .99), e2e[len(e2e)-1]
	}
	return row
}

// latencyRows groups the receipts by the window their post was sent in:
// outside every fault ("none"), each fault kind, each fault. (Sent, not
// committed: a post sent into a stalled database commits after the heal.)
func latencyRows(lats []receiptLat, faults []Fault) []LatencyRow {
	byKind := map[string][]receiptLat{}
	byFault := make([][]receiptLat, len(faults))
	for _, l := range lats {
		in := false
		for i, f := range faults {
			if !l.sent.Before(f.Start) && !l.sent.After(f.End) {
				byKind[f.Kind] = append(byKind[f.Kind], l)
				byFault[i] = append(byFault[i], l)
				in = true
				break
			}
		}
		if !in {
			byKind["none"] = append(byKind["none"], l)
		}
	}
	rows := []LatencyRow{latencyRow("all", lats), latencyRow("none", byKind["none"])}
	for _, k := range FaultKinds {
		if _, ok := byKind[k]; ok {
			rows = append(rows, latencyRow(k, byKind[k]))
		}
	}
	for i, f := range faults {
		rows = append(rows, latencyRow(fmt.Sprintf("#%d %s node %d", i+1, f.Kind, f.Node), byFault[i]))
	}
	return rows
}

// timeline buckets receipts (by when they were handed over), posts and
// session changes into seconds since the load began.
func timeline(lats []receiptLat, writes []write, states []stateEvent, start time.Time) []ChaosSecond {
	sec := func(t time.Time) int { return max(0, int(t.Sub(start)/time.Second)) }
	n := 0
	for _, l := range lats {
		n = max(n, sec(l.at)+1)
	}
	for _, w := range writes {
		n = max(n, sec(w.Sent)+1)
	}
	out := make([]ChaosSecond, n)
	ms := make([][]receiptLat, n)
	for i := range out {
		out[i].T = i
	}
	for _, l := range lats {
		ms[sec(l.at)] = append(ms[sec(l.at)], l)
	}
	for _, w := range writes {
		s := sec(w.Sent)
		out[s].Posts++
		if w.Acked.IsZero() {
			out[s].PostErrors++
		}
	}
	for _, st := range states {
		s := sec(st.at)
		if s >= n {
			continue
		}
		switch st.state {
		case client.StateDisconnected:
			out[s].Disconnects++
		case client.StateReady, client.StateResumed:
			if !st.at.Before(start) {
				out[s].Reconnects++
			}
		}
	}
	for i := range out {
		row := latencyRow("", ms[i])
		out[i].Receipts, out[i].P50, out[i].P99, out[i].Max = row.Count, row.P50, row.P99, row.Max
	}
	return out
}

// write saves chaos.json and chaos.html in dir.
func (rep *ChaosReport) write(dir string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "chaos.json"), b, 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "chaos.html"))
	if err != nil {
		return err
	}
	if err := rep.HTML(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

var faultColors = map[string]string{FaultKill: "#d62728", FaultStop: "#9467bd", FaultPGTerm: "#ff7f0e", FaultDBStall: "#8c564b", FaultNATS: "#17becf"}

var chaosTmpl = template.Must(template.New("chaos").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>parley chaos</title>
<style>
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:820px}
table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;font-size:14px}
.pass{color:#080;font-weight:bold}.fail{color:#b00;font-weight:bold}svg{display:block;margin:16px 0}
.key span{display:inline-block;width:10px;height:10px;margin:0 4px 0 12px;opacity:.5}
</style></head><body>
<h1>parley chaos</h1>
<p>Seed {{.R.Seed}}, started {{.R.Started.UTC.Format "2006-01-02 15:04:05 UTC"}}, {{printf "%.0f" .R.LoadSeconds}} s of load.
Verdict: {{if .R.Pass}}<span class="pass">PASS</span>{{else}}<span class="fail">FAIL</span>{{end}}
(lost {{.R.Counts.Lost}}, undelivered {{.R.Counts.Undelivered}}, duplicated {{.R.Counts.Duplicated}}, out of order {{.R.Counts.OutOfOrder}},
mismatched {{.R.Counts.Mismatched}}, readers that gave up {{.R.Counts.GaveUp}}; recovered {{.R.Counts.Recovered}}).</p>
<h2>Summary</h2>
<table>{{range .Rows}}<tr><th>{{.K}}</th><td>{{.V}}</td></tr>{{end}}</table>
<h2>Over time</h2>
<p class="key">Fault windows:{{range .Key}}<span style="background:{{.V}}"></span>{{.K}}{{end}}</p>
{{range .Charts}}{{.}}{{end}}
<h2>Latency by the window the post was sent in</h2>
<p>Commit → delivery: from the message's created_at (stamped in its transaction) to a reader being handed it, live or by catch-up.
Sent → delivery: from the writer's request, its retries and waits included.</p>
<table><tr><th>sent during</th><th>n</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>max ms</th><th>sent→ p50 ms</th><th>sent→ p99 ms</th><th>sent→ max ms</th></tr>
{{range .R.Latency}}<tr><td>{{.Window}}</td><td>{{.Count}}</td><td>{{printf "%.1f" .P50}}</td><td>{{printf "%.1f" .P90}}</td><td>{{printf "%.1f" .P99}}</td><td>{{printf "%.1f" .Max}}</td><td>{{printf "%.1f" .E2EP50}}</td><td>{{printf "%.1f" .E2EP99}}</td><td>{{printf "%.1f" .E2EMax}}</td></tr>{{end}}</table>
<h2>Faults</h2>
<table><tr><th>#</th><th>kind</th><th>node</th><th>at s</th><th>length s</th><th>detail</th></tr>
{{range $i, $f := .Faults}}<tr><td>{{$f.N}}</td><td>{{$f.Kind}}</td><td>{{$f.Node}}</td><td>{{$f.At}}</td><td>{{$f.Len}}</td><td>{{$f.Detail}}</td></tr>{{end}}</table>
<h2>Findings</h2>
{{range .Findings}}<h3>{{.K}}</h3><table><tr><th>channel</th><th>seq</th><th>client_msg_id</th><th>reader</th><th>detail</th></tr>
{{range .V}}<tr><td>{{.Channel}}</td><td>{{.Seq}}</td><td>{{.CMID}}</td><td>{{.Reader}}</td><td>{{.Detail}}</td></tr>{{end}}</table>{{else}}<p>none</p>{{end}}
</body></html>
`))

// HTML writes the self-contained report.
func (rep *ChaosReport) HTML(w io.Writer) error {
	xs := make([]float64, len(rep.Timeline))
	var p50, p99, mx, recv, disc, back, posts, perr []float64
	for i, s := range rep.Timeline {
		xs[i] = float64(s.T)
		if s.Receipts == 0 {
			p50, p99, mx = append(p50, math.NaN()), append(p99, math.NaN()), append(mx, math.NaN())
		} else {
			p50, p99, mx = append(p50, s.P50), append(p99, s.P99), append(mx, s.Max)
		}
		recv = append(recv, float64(s.Receipts))
		disc, back = append(disc, float64(s.Disconnects)), append(back, float64(s.Reconnects))
		posts, perr = append(posts, float64(s.Posts)), append(perr, float64(s.PostErrors))
	}
	var bands []band
	type faultRow struct {
		N                     int
		Kind, At, Len, Detail string
		Node                  int
	}
	var frows []faultRow
	for i, f := range rep.Faults {
		from, to := f.Start.Sub(rep.Started).Seconds(), f.End.Sub(rep.Started).Seconds()
		bands = append(bands, band{from, to, faultColors[f.Kind], fmt.Sprintf("#%d %s node %d", i+1, f.Kind, f.Node)})
		frows = append(frows, faultRow{i + 1, f.Kind, fmt.Sprintf("%.1f", from), fmt.Sprintf("%.1f", to-from), f.Detail, f.Node})
	}
	charts := []template.HTML{
		svgChartBands("Commit → delivery latency per second (by time handed over)", "ms", xs, []series{
			{"p50", "#1f77b4", p50}, {"p99", "#ff7f0e", p99}, {"max", "#d62728", mx}}, bands),
		svgChartBands("Sessions dropped and back per second", "sessions/s", xs, []series{
			{"dropped", "#d62728", disc}, {"back", "#2ca02c", back}}, bands),
		svgChartBands("Messages handed to readers per second", "receipts/s", xs, []series{{"receipts", "#1f77b4", recv}}, bands),
		svgChartBands("Posts per second", "posts/s", xs, []series{{"sent", "#9467bd", posts}, {"failed", "#d62728", perr}}, bands),
	}
	c := rep.Counts
	rows := []kv{
		{"sizes", fmt.Sprintf("%d nodes (%s), %d users (all readers), %d writers, %.0f posts/s, scenario %s",
			rep.Nodes, rep.NATS, rep.Users, rep.Writers, rep.Rate, rep.Scenario)},
		{"faults", fmt.Sprintf("%d: %s", len(rep.Faults), faultCountText(rep.FaultCounts))},
		{"posts", fmt.Sprintf("%d sent, %d acknowledged, %d failed, %d recovered; %d messages of the run in the logs", c.Posts, c.Acked, c.Failed, c.Recovered, c.Committed)},
		{"receipts", fmt.Sprintf("%d (%d live, %d by catch-up)", c.Receipts, c.Live, c.Receipts-c.Live)},
		{"sessions", fmt.Sprintf("%d reconnects, %d resumes, %d fresh identifies, %d catch-ups, %d gaps filled, %d unfillable, %d heartbeat timeouts",
			rep.Client.Reconnects, rep.Client.Resumes, rep.Client.InvalidSessions, rep.Client.CatchUps, rep.Client.GapsFilled, rep.Client.GapsUnfillable, rep.Client.HeartbeatTimeouts)},
	}
	var key []kv
	for _, k := range FaultKinds {
		key = append(key, kv{k, faultColors[k]})
	}
	findings := []struct {
		K string
		V []Anomaly
	}{}
	for _, f := range []struct {
		name string
		list []Anomaly
	}{{"lost", rep.Lost}, {"undelivered", rep.Undelivered}, {"duplicated", rep.Duplicated},
		{"out of order", rep.OutOfOrder}, {"mismatched", rep.Mismatched}, {"readers that gave up", rep.GaveUp}, {"recovered (allowed)", rep.Recovered}, {"failed, not committed (allowed)", rep.Failed}} {
		if len(f.list) > 0 {
			findings = append(findings, struct {
				K string
				V []Anomaly
			}{f.name, f.list})
		}
	}
	return chaosTmpl.Execute(w, map[string]any{"R": rep, "Rows": rows, "Charts": charts, "Key": key, "Faults": frows, "Findings": findings})
}
