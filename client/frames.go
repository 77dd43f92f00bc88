package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"parley"
)

// The gateway's wire frames: one flat JSON object per text frame, with op.

// The ops, close codes and event types are package parley's (protocol.go).

// inFrame is any server frame, decoded the slow way. Events normally take
// the fast path of parseEventFrame instead.
type inFrame struct {
	Op            string          `json:"op"`
	S             int64           `json:"s"`
	T             string          `json:"t"`
	D             json.RawMessage `json:"d"`
	Users         json.RawMessage `json:"users"` // just-in-time users of an event
	HeartbeatMS   int64           `json:"heartbeat_ms"`
	ResumeWindowS int64           `json:"resume_window_s"`
	SessionID     string          `json:"session_id"`
	UserID        string          `json:"user_id"`
	Replayed      int64           `json:"replayed"`
	Reason        string          `json:"reason"`
	RetryAfterMS  int64           `json:"retry_after_ms"`
	Limit         int             `json:"limit"`     // presence_sub_limited
	Requested     int             `json:"requested"` // presence_sub_limited
}

// Source says how an event reached the client.
type Source uint8

const (
	// SourceGateway: pushed by the gateway (live or replayed on resume).
	SourceGateway Source = iota
	// SourceFill: fetched from /channels/{id}/events to fill a seq gap.
	SourceFill
	// SourceCatchUp: fetched by /sync (or /events when too far behind)
	// after the session was lost, or when a channel was tracked.
	SourceCatchUp
)

func (s Source) String() string {
	switch s {
	case SourceGateway:
		return "gateway"
	case SourceFill:
		return "fill"
	case SourceCatchUp:
		return "catch-up"
	}
	return "source(" + strconv.Itoa(int(s)) + ")"
}

// Event is one event handed to the application. Durable channel events
// have ChannelID and Seq (the event's seq in the channel log, also in
// Data); bus-only and ephemeral events have Seq 0.
type Event struct {
	// S is the session seq of the frame; 0 for events fetched over HTTP.
	S         int64
	Type      string
	ChannelID string
	Seq       int64
	// Data is the payload d, exactly as the server sent it. It is the
	// application's to keep.
	Data json.RawMessage
	// Users are the user objects the gateway attached beside d: the
	// author and mentioned users of a message that this session had not
	// been sent before (just-in-time users). Nil on most events, and on
	// every event fetched over HTTP.
	Users  []parley.User
	Source Source
	// Ordered is set on the durable events of a channel the Conn tracks:
	// those come in seq order with no gaps and no duplicates. Durable
	// events of other channels (the user's own member.joined or
	// channel.created on its user topic before the channel is tracked, a
	// preview's events) pass through with Ordered false.
	Ordered bool
}

// Durable reports whether the event is a durable channel event (one that
// has a place in a channel's log).
func (e *Event) Durable() bool { return e.ChannelID != "" && e.Seq > 0 }

// Decode unmarshals the payload into v (for example a
// *parley.MessageEventData for message.created).
func (e *Event) Decode(v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("decode %s payload: %w", e.Type, err)
	}
	return nil
}

// knownTypes interns event type names so that decoding a frame does not
// allocate a string for its type.
var knownTypes = func() map[string]string {
	m := map[string]string{}
	for _, t := range parley.EventTypes {
		if t.Kind != parley.EventInternal {
			m[t.Type] = t.Type
		}
	}
	return m
}()

func internType(b []byte) string {
	if t, ok := knownTypes[string(b)]; ok {
		return t
	}
	return string(b)
}

var (
	eventPrefix = []byte(`{"op":"` + parley.OpEvent + `","s":`)
	typeKey     = []byte(`,"t":"`)
	dataKey     = []byte(`","d":`)
	usersKey    = []byte(`,"users":`)
	chanPrefix  = []byte(`{"channel_id":"`)
	seqKey      = []byte(`","seq":`)
)

// parseEventFrame decodes an event frame in the server's own layout,
// {"op":"event","s":N,"t":"…","d":…} or, with just-in-time users,
// {"op":"event","s":N,"t":"…","d":…,"users":[…]}, without a general JSON
// decoder. ok is false when b has any other layout; the caller then decodes
// it in full. d and users alias b; users is nil when the frame has none.
//
// The extent of d is found by matching its brackets, not by assuming it
// runs to the end of the frame: the users (and anything a newer server
// adds) come after it.
func parseEventFrame(b []byte) (s int64, t string, d, users []byte, ok bool) {
	if !bytes.HasPrefix(b, eventPrefix) || b[len(b)-1] != '}' {
		return 0, "", nil, nil, false
	}
	rest := b[len(eventPrefix):]
	s, n := parseDigits(rest)
	if n == 0 {
		return 0, "", nil, nil, false
	}
	rest = rest[n:]
	if !bytes.HasPrefix(rest, typeKey) {
		return 0, "", nil, nil, false
	}
	rest = rest[len(typeKey):]
	end := bytes.IndexByte(rest, '"')
	if end <= 0 || !plainASCII(rest[:end]) {
		return 0, "", nil, nil, false
	}
	tb := rest[:end]
	rest = rest[end:]
	if !bytes.HasPrefix(rest, dataKey) {
		return 0, "", nil, nil, false
	}
	rest = rest[len(dataKey):]
	if end = valueEnd(rest); end <= 0 {
		return 0, "", nil, nil, false
	}
	d, rest = rest[:end], rest[end:]
	if bytes.HasPrefix(rest, usersKey) {
		rest = rest[len(usersKey):]
		if len(rest) == 0 || rest[0] != '[' {
			return 0, "", nil, nil, false
		}
		if end = valueEnd(rest); end <= 0 {
			return 0, "", nil, nil, false
		}
		users, rest = rest[:end], rest[end:]
	}
	if len(rest) != 1 { // only the frame's closing brace may remain
		return 0, "", nil, nil, false
	}
	return s, internType(tb), d, users, true
}

// plainASCII reports whether b holds printable ASCII without escapes, the
// only bytes an event type name has; anything else takes the slow path.
func plainASCII(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}

// valueEnd returns the length of the JSON value at the start of b, found by
// matching brackets outside strings; 0 when b does not start with a
// complete value. It does not validate the value: a server frame is
// trusted to be JSON, and the fuzz test holds the fast path to the full
// decoder on every valid frame.
func valueEnd(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	switch b[0] {
	case '{', '[':
	case '"':
		return stringEnd(b)
	default: // a number, true, false or null
		i := 0
		for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] > ' ' {
			i++
		}
		return i
	}
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
		case '"':
			n := stringEnd(b[i:])
			if n == 0 {
				return 0
			}
			i += n - 1
		}
	}
	return 0
}

// stringEnd returns the length of the JSON string at the start of b (which
// begins with its opening quote), or 0 when it is not closed.
func stringEnd(b []byte) int {
	i := 1
	for {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return 0
		}
		i += q
		// The quote is escaped when an odd number of backslashes precede it.
		bs := 0
		for j := i - 1; j > 0 && b[j] == '\\'; j-- {
			bs++
		}
		if bs%2 == 0 {
			return i + 1
		}
		i++
	}
}

// channelPosition reads d.channel_id and d.seq of a payload; both are zero
// for payloads without them. It takes a fast path for the server's layout,
// where every channel event's payload begins with those two fields.
func channelPosition(d []byte) (channelID string, seq int64) {
	if bytes.HasPrefix(d, chanPrefix) {
		rest := d[len(chanPrefix):]
		if end := bytes.IndexByte(rest, '"'); end > 0 && bytes.IndexByte(rest[:end], '\\') < 0 {
			if after := rest[end:]; bytes.HasPrefix(after, seqKey) {
				if n, k := parseDigits(after[len(seqKey):]); k > 0 {
					return string(rest[:end]), n
				}
			}
		}
	}
	if len(d) == 0 || d[0] != '{' {
		return "", 0
	}
	var p struct {
		ChannelID string `json:"channel_id"`
		Seq       int64  `json:"seq"`
	}
	if json.Unmarshal(d, &p) != nil {
		return "", 0
	}
	return p.ChannelID, p.Seq
}

// parseDigits parses a non-negative decimal prefix of b, returning the value
// and how many bytes it took (0 if none or on overflow).
func parseDigits(b []byte) (int64, int) {
	var n int64
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if i >= 18 {
			return 0, 0
		}
		n = n*10 + int64(b[i]-'0')
	}
	return n, i
}

// Outgoing frames.

type identifyFrame struct {
	Op          string `json:"op"`
	Token       string `json:"token"`
	WorkspaceID string `json:"workspace_id"`
}

type resumeFrame struct {
	Op        string `json:"op"`
	Token     string `json:"token"`
	SessionID string `json:"session_id"`
	Seq       int64  `json:"seq"`
}

type focusFrame struct {
	Op         string   `json:"op"`
	ChannelIDs []string `json:"channel_ids"`
}

type presenceSubFrame struct {
	Op      string   `json:"op"`
	UserIDs []string `json:"user_ids"`
}

type typingFrame struct {
	Op           string `json:"op"`
	ChannelID    string `json:"channel_id"`
	ThreadRootID string `json:"thread_root_id,omitempty"`
}

var heartbeatFrame = []byte(`{"op":"` + parley.OpHeartbeat + `"}`)
