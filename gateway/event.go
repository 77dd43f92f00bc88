package gateway

import (
	"encoding/json"
	"time"

	"parley"
)

// event is one bus event as the partitions see it: encoded once, shared by
// every session it goes to, with the few payload fields the gateway acts on
// decoded once. It is immutable after newEvent.
type event struct {
	workspaceID string // "" for events that are not a workspace's
	channelID   string
	seq         int64 // > 0: a durable event of channelID's log
	typ         string
	ephemeral   bool   // typing, presence: dropped first, may be lost
	tail        []byte // `,"t":…,"d":…}`: everything after the session's s
	recv        time.Time
	users       []userRef // message events: the users it references (jit.go)

	// Decoded from d for the events that change what a session follows.
	userID    string             // member.*, channel.created (creator), typing.started
	kind      parley.ChannelKind // channel.created
	tokenHash string             // session.revoked
}

// durable reports whether the event is in a channel's log.
func (e *event) durable() bool { return e.seq > 0 && e.channelID != "" }

// newEvent prepares ev for delivery.
func newEvent(ev parley.Event, recv time.Time) *event {
	e := &event{
		workspaceID: ev.WorkspaceID,
		channelID:   ev.ChannelID,
		seq:         ev.Seq,
		typ:         ev.Type,
		ephemeral:   parley.IsEphemeralEvent(ev.Type),
		tail:        encodeTail(ev.Type, ev.Data),
		recv:        recv,
	}
	switch ev.Type {
	case parley.EventMemberJoined, parley.EventMemberLeft, parley.EventChannelCreated,
		parley.EventTypingStarted, parley.EventSessionRevoked:
		var d struct {
			UserID    string `json:"user_id"`
			TokenHash string `json:"token_hash"`
			Channel   *struct {
				Kind parley.ChannelKind `json:"kind"`
			} `json:"channel"`
		}
		if json.Unmarshal(ev.Data, &d) == nil {
			e.userID, e.tokenHash = d.UserID, d.TokenHash
			if d.Channel != nil {
				e.kind = d.Channel.Kind
			}
		}
	}
	return e
}
