package gateway

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"strconv"

	"parley"
)

// The ops, close codes and event types are package parley's (protocol.go).

// maxFocusChannels bounds focus's list; presence_sub's is
// parley.MaxUsersInView.
const maxFocusChannels = 100

// inFrame is any client frame: the fields of every op side by side.
type inFrame struct {
	Op           string   `json:"op"`
	Token        string   `json:"token"`
	WorkspaceID  string   `json:"workspace_id"`
	SessionID    string   `json:"session_id"`
	Seq          *uint64  `json:"seq"`
	ChannelIDs   []string `json:"channel_ids"`
	UserIDs      []string `json:"user_ids"`
	ChannelID    string   `json:"channel_id"`
	ThreadRootID string   `json:"thread_root_id"`
}

// Server → client frames other than events.

type helloFrame struct {
	Op            string `json:"op"`
	HeartbeatMS   int64  `json:"heartbeat_ms"`
	ResumeWindowS int64  `json:"resume_window_s"`
}

type readyFrame struct {
	Op        string `json:"op"`
	SessionID string `json:"session_id"`
	UserID    string `json:"user_id"`
}

type resumedFrame struct {
	Op       string `json:"op"`
	Replayed uint64 `json:"replayed"`
}

type invalidSessionFrame struct {
	Op     string `json:"op"`
	Reason string `json:"reason"`
}

type presenceSubLimitedFrame struct {
	Op        string `json:"op"`
	Limit     int    `json:"limit"`
	Requested int    `json:"requested"`
}

type reconnectFrame struct {
	Op           string `json:"op"`
	Reason       string `json:"reason"`
	RetryAfterMS int64  `json:"retry_after_ms"`
}

var heartbeatAck = []byte(`{"op":"` + parley.OpHeartbeatAck + `"}`)

// The heartbeats that conn.onMessage answers without a JSON decoder.
var (
	heartbeatFrame       = []byte(`{"op":"` + parley.OpHeartbeat + `"}`)
	heartbeatFrameSpaced = []byte(`{"op": "` + parley.OpHeartbeat + `"}`)
)

// eventPrefix starts every event frame; the session's s follows, then the
// event's shared tail.
const eventPrefix = `{"op":"` + parley.OpEvent + `","s":`

// encodeTail builds the part of an event frame that every session shares:
// `,"t":"<type>","d":<data>}`.
func encodeTail(typ string, data json.RawMessage) []byte {
	t, _ := json.Marshal(typ) // a string always encodes
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	b := make([]byte, 0, len(`,"t":,"d":}`)+len(t)+len(data))
	b = append(b, `,"t":`...)
	b = append(b, t...)
	b = append(b, `,"d":`...)
	b = append(b, data...)
	return append(b, '}')
}

// appendEventFrame appends the frame of an event with session seq s.
func appendEventFrame(dst []byte, s uint64, tail []byte) []byte {
	dst = append(dst, eventPrefix...)
	dst = strconv.AppendUint(dst, s, 10)
	return append(dst, tail...)
}

// randomID returns n random bytes in lower-case base32 without padding
// (never a '.', which separates a session id's node part).
func randomID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return idEncoding.EncodeToString(b)
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// appendJSON appends v's JSON encoding (frames that are not events).
func appendJSON(dst []byte, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return dst
	}
	return append(dst, b...)
}
