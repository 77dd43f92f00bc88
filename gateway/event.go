package gateway

import (
	"bytes"
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

	// Message events: tail is what every session gets, without the
	// message's client_msg_id, which only the author's own sessions read
	// (to match the copy they show as pending); ownTail, when not nil, is
	// the frame tail with it, for the sessions of author.
	author  string
	ownTail []byte

	// z and ownZ are tail and ownTail compressed, once, on first use
	// (deflate.go); nil: never compressed.
	z, ownZ *deflated

	// Decoded from d for the events that change what a session follows.
	userID    string             // member.*, channel.created (creator), typing.started, user.*, workspace.member_updated and _left
	kind      parley.ChannelKind // channel.created
	tokenHash string             // session.revoked
	role      parley.Role        // workspace.member_updated

	// For view-aware delivery (view.go).
	memberCount  int64    // member.*: the channel's count after it; -1: not said
	msgUser      string   // message.created: the author
	msgRoot      string   // message.created: the thread root of a reply
	mentionsAll  bool     // message.created: @channel or @everyone
	mentionNames []string // message.created: the @handles (not the broadcasts)
}

// mentions reports whether the message names handle.
func (e *event) mentions(handle string) bool {
	for _, h := range e.mentionNames {
		if h == handle {
			return true
		}
	}
	return false
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
		z:           new(deflated),
		memberCount: -1,
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
		if ev.Type == parley.EventMemberJoined || ev.Type == parley.EventMemberLeft {
			var m parley.MemberEventData
			if json.Unmarshal(ev.Data, &m) == nil {
				e.memberCount = m.MemberCount
			}
		}
	case parley.EventUserUpdated, parley.EventUserStatus, parley.EventUserDeactivated:
		var d struct {
			User *struct {
				ID string `json:"id"`
			} `json:"user"`
		}
		if json.Unmarshal(ev.Data, &d) == nil && d.User != nil {
			e.userID = d.User.ID
		}
	case parley.EventWorkspaceMemberUpdated, parley.EventWorkspaceMemberLeft:
		var d parley.WorkspaceMemberData
		if json.Unmarshal(ev.Data, &d) == nil {
			e.userID, e.role = d.UserID, d.Role
		}
	case parley.EventMessageCreated, parley.EventMessageUpdated:
		// An unpinned message without reactions (most) goes out without
		// the two fields; a client reads them missing as false and [].
		// Quotes in strings are escaped, so this matches only the fields.
		e.tail = bytes.Replace(e.tail, []byte(`,"pinned":false,"reactions":[]}`), []byte(`}`), 1)
		e.splitClientMsgID(ev.Data)
		if ev.Type == parley.EventMessageCreated {
			e.readMessage(ev.Data)
		}
	}
	return e
}

// splitClientMsgID takes d.message.client_msg_id out of the shared tail and
// keeps the full tail for the author's sessions. The stored d is written by
// encoding/json (sqlstore), so the field is found as that encoder writes
// it; a d written otherwise (a re-encoded row) is left whole, which costs
// bytes but is still correct.
func (e *event) splitClientMsgID(data json.RawMessage) {
	var d struct {
		Message *struct {
			UserID      string `json:"user_id"`
			ClientMsgID string `json:"client_msg_id"`
		} `json:"message"`
	}
	if json.Unmarshal(data, &d) != nil || d.Message == nil || d.Message.ClientMsgID == "" {
		return
	}
	v, err := json.Marshal(d.Message.ClientMsgID)
	if err != nil {
		return
	}
	field := make([]byte, 0, len(`"client_msg_id":,`)+len(v))
	field = append(append(append(field, `"client_msg_id":`...), v...), ',')
	// An unescaped quote cannot occur inside a JSON string, so the field
	// is found only where it is a key.
	i := bytes.Index(e.tail, field)
	if i < 0 {
		return
	}
	shared := make([]byte, 0, len(e.tail)-len(field))
	shared = append(append(shared, e.tail[:i]...), e.tail[i+len(field):]...)
	e.author, e.ownTail, e.tail = d.Message.UserID, e.tail, shared
	e.ownZ = new(deflated)
}

// forSession is e as session s gets it before just-in-time users: with the
// message's client_msg_id for the author's sessions.
func (e *event) forSession(s *session) *event {
	if e.ownTail == nil || e.author != s.userID {
		return e
	}
	v := *e
	v.tail, v.ownTail = e.ownTail, nil
	v.z, v.ownZ = e.ownZ, nil
	return &v
}

// readMessage decodes what a summary counts of a new message: its author,
// whether it is a reply, and whom it @mentions (broadcasts apart; @here is
// left to the mention events, as the text cannot say who was active).
func (e *event) readMessage(data json.RawMessage) {
	var d struct {
		Message *struct {
			UserID       string `json:"user_id"`
			ThreadRootID string `json:"thread_root_id"`
			Text         string `json:"text"`
		} `json:"message"`
	}
	if json.Unmarshal(data, &d) != nil || d.Message == nil {
		return
	}
	e.msgUser, e.msgRoot = d.Message.UserID, d.Message.ThreadRootID
	for _, h := range parley.Mentions(d.Message.Text) {
		switch h {
		case parley.MentionChannel, parley.MentionEveryone:
			e.mentionsAll = true
		case parley.MentionHere:
		default:
			e.mentionNames = append(e.mentionNames, h)
		}
	}
}
