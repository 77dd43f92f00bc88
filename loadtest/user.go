package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"parley"
	"parley/client"
)

// user is one simulated person: an API client, a gateway Conn and what
// they received.
type user struct {
	idx int
	id  string
	c   *client.Client
	r   *runner
	// viewer (hot-channel): the user has #general in focus from the start.
	viewer bool

	chk checker

	mu       sync.Mutex
	conn     *client.Conn // guarded by mu
	chans    []string     // channels from boot; guarded by mu
	droppedT time.Time    // when the socket dropped (zero while live); guarded by mu

	live      atomic.Bool
	everReady atomic.Bool
}

// textMarker starts every load-test message: "lt:<unix ns>:" then padding.
const textMarker = "lt:"

// messageText makes a message of n bytes carrying its send time.
func messageText(now time.Time, n int) string {
	b := make([]byte, 0, max(n, 32))
	b = append(b, textMarker...)
	b = strconv.AppendInt(b, now.UnixNano(), 10)
	b = append(b, ':')
	for len(b) < n {
		b = append(b, 'a'+byte(len(b)%26))
	}
	return string(b)
}

var textKey = []byte(`"text":"` + textMarker)

// sentAt reads the send time out of a message event's payload.
func sentAt(data []byte) (time.Time, bool) {
	i := bytes.Index(data, textKey)
	if i < 0 {
		return time.Time{}, false
	}
	rest := data[i+len(textKey):]
	j := bytes.IndexByte(rest, ':')
	if j <= 0 {
		return time.Time{}, false
	}
	ns, err := strconv.ParseInt(string(rest[:j]), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

var userIDKey = []byte(`"user_id":"`)

// userIDOf reads the first user_id of a payload.
func userIDOf(data []byte) string {
	i := bytes.Index(data, userIDKey)
	if i < 0 {
		return ""
	}
	rest := data[i+len(userIDKey):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}

// handle receives the Conn's events (one at a time).
func (u *user) handle(ev client.Event) {
	now := time.Now()
	r := u.r
	if ev.Source == client.SourceGateway {
		r.frames.Add(1)
		if ev.Type == parley.EventMemberJoined && ev.ChannelID != "" && ev.ChannelID == r.plan.Spike {
			r.spikeFrames.Add(1)
		}
		if r.aud != nil {
			r.aud.observe(u, ev, now)
		}
	}
	if ev.Type == parley.EventChannelSummary {
		// A passive channel's events up to last_seq were passed over:
		// covered, not lost (docs/protocol.md, View-aware delivery).
		var d struct {
			ChannelID string `json:"channel_id"`
			LastSeq   int64  `json:"last_seq"`
		}
		if json.Unmarshal(ev.Data, &d) != nil || d.ChannelID == "" {
			r.rec.Error(now, "bad_summary")
			return
		}
		r.summaries.Add(1)
		u.chk.cover(d.ChannelID, d.LastSeq)
		return
	}
	if !ev.Durable() {
		r.ephemeral.Add(1)
		return
	}
	if !ev.Ordered {
		return // a directory copy of another channel's event
	}
	dup, ooo := u.chk.observe(ev.ChannelID, ev.Seq)
	if dup || ooo {
		kind := "duplicate"
		if ooo {
			kind = "out_of_order"
		}
		r.rec.Error(now, kind)
	}
	live := ev.Source == client.SourceGateway
	var lat time.Duration
	hist := r.deliveryHist
	measured := false
	switch ev.Type {
	case parley.EventMessageCreated:
		if t, ok := sentAt(ev.Data); ok && live {
			lat, measured, hist = now.Sub(t), true, r.messageHist(u, ev.ChannelID)
		}
	case parley.EventMemberJoined:
		if v, ok := r.joinStarts.Load(userIDOf(ev.Data)); ok && live {
			lat, measured, hist = now.Sub(v.(time.Time)), true, r.joinHist
		}
	}
	if !live {
		r.caughtUp.Add(1)
	}
	r.rec.Delivery(now, lat, measured, hist)
}

// onState follows the Conn's session.
func (u *user) onState(st client.State, err error) {
	r := u.r
	now := time.Now()
	switch st {
	case client.StateReady, client.StateResumed:
		if !u.live.Swap(true) {
			r.rec.Conns.Add(1)
		}
		u.mu.Lock()
		dropped := u.droppedT
		u.droppedT = time.Time{}
		u.mu.Unlock()
		if !dropped.IsZero() {
			r.rec.Hist("reconnect").Record(now.Sub(dropped))
			r.back.Add(1)
		}
	case client.StateDisconnected:
		if u.live.Swap(false) {
			r.rec.Conns.Add(-1)
		}
		u.mu.Lock()
		if u.droppedT.IsZero() {
			u.droppedT = now
		}
		u.mu.Unlock()
		if !r.storming.Load() {
			r.rec.Error(now, "disconnected")
		}
	case client.StateClosed:
		if u.live.Swap(false) {
			r.rec.Conns.Add(-1)
		}
		if err != nil {
			r.rec.Error(now, "conn_ended")
		}
	}
}

// connect boots the user and opens their gateway session, declaring every
// channel from boot's last_seq.
func (u *user) connect(ctx context.Context) error {
	r := u.r
	r.rec.Dials.Add(1)
	t0 := time.Now()
	b, err := u.c.Boot(ctx, parley.BootQuery{WorkspaceID: r.plan.WorkspaceID})
	if err != nil {
		r.rec.Error(time.Now(), "boot"+codeSuffix(err))
		return fmt.Errorf("boot: %w", err)
	}
	r.rec.Hist("boot").Record(time.Since(t0))
	declared := map[string]int64{}
	var chans []string
	for _, list := range [][]parley.BootChannel{b.Channels, b.DMs} {
		for _, bc := range list {
			declared[bc.ID] = bc.LastSeq
			chans = append(chans, bc.ID)
			u.chk.declare(bc.ID, bc.LastSeq)
		}
	}
	u.mu.Lock()
	u.chans = chans
	u.mu.Unlock()
	conn, err := u.c.Connect(ctx, r.plan.WorkspaceID, client.ConnectOptions{
		Handler:   u.handle,
		Channels:  declared,
		OnState:   u.onState,
		LocalAddr: r.localAddr(u.idx),
	})
	if err != nil {
		// A user who never connected is counted as such, not as losses.
		u.chk.reset()
		r.rec.Error(time.Now(), "connect"+codeSuffix(err))
		return fmt.Errorf("connect: %w", err)
	}
	r.rec.Hist("connect").Record(time.Since(t0))
	u.mu.Lock()
	u.conn = conn
	u.mu.Unlock()
	u.everReady.Store(true)
	return nil
}

// Conn returns the user's Conn (nil before connect).
func (u *user) Conn() *client.Conn {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.conn
}

// myChannels returns the user's channels from boot.
func (u *user) myChannels() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.chans
}

// codeSuffix names an API error's code for the error table.
func codeSuffix(err error) string {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ": " + ae.Code
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ": timeout"
	}
	var ce *client.CloseError
	if errors.As(err, &ce) {
		return ": close " + strconv.Itoa(ce.Code)
	}
	if errors.Is(err, client.ErrUpgradeRefused) {
		return ": upgrade refused"
	}
	return ": transport"
}
