package presence

import (
	"encoding/json"
	"time"

	"parley"
)

// Messages between trackers. All are bus-only parley.Events (no workspace,
// channel or seq), published with Bus.Publish:
//
//	presence.<user>       presence.changed  a node's contribution for the user changed
//	presencectl           presence.query    who has these users? (every node answers)
//	                      presence.alive    heartbeat (without Membership)
//	                      presence.bye      the node is closing
//	                      presence.manual   a user set or cleared manual away
//	node.<id>.presence    presence.state    answer to a query
//	                      presence.alive    "I am here too", to a node just met
//	                      presence.query    a query for one node (after it came back)
//	                      presence.manual_sync / presence.manual_set
//	                                        the manual-away set, for a starting node
//
// Events on presence.<user> are node contributions, not the aggregate: the
// gateway must not forward them to clients; it forwards what Watch reports.
const (
	typeChanged    = "presence.changed"
	typeQuery      = "presence.query"
	typeState      = "presence.state"
	typeAlive      = "presence.alive"
	typeBye        = "presence.bye"
	typeManual     = "presence.manual"
	typeManualSync = "presence.manual_sync"
	typeManualSet  = "presence.manual_set"
)

// ctlTopic is the one topic every tracker subscribes to.
const ctlTopic = parley.PresenceControlTopic

// maxBatch bounds the users named in one query, answer or manual set.
const maxBatch = 500

func topicOf(user string) string { return parley.TopicPresence(user) }

// nodeTopic is where a tracker hears what is meant for its node alone.
func nodeTopic(node string) string { return parley.NodeTopic(node, "presence") }

// changedData is the d of presence.changed: the sending node's
// contribution for one user, versioned by (boot, v).
type changedData struct {
	UserID   string `json:"user_id"`
	Presence string `json:"presence"`
	NodeID   string `json:"node_id"`
	Boot     int64  `json:"boot"`
	V        uint64 `json:"v"`
}

// ctlMsg is the d of every control message; each type uses some fields.
type ctlMsg struct {
	NodeID  string        `json:"node_id"`
	Boot    int64         `json:"boot"`
	QID     uint64        `json:"qid,omitempty"`
	V       uint64        `json:"v,omitempty"`        // state: the node's version when it answered
	UserIDs []string      `json:"user_ids,omitempty"` // query
	States  []userState   `json:"states,omitempty"`   // state
	UserID  string        `json:"user_id,omitempty"`  // manual
	Away    bool          `json:"away,omitempty"`     // manual
	At      int64         `json:"at,omitempty"`       // manual
	Manual  []manualEntry `json:"manual,omitempty"`   // manual_set
}

// userState is one user's contribution in an answer.
type userState struct {
	UserID   string `json:"user_id"`
	Presence string `json:"presence"`
	V        uint64 `json:"v"`
}

type manualEntry struct {
	UserID string `json:"user_id"`
	At     int64  `json:"at"`
}

func newEvent(typ, topic string, d any, now int64) parley.Event {
	data, err := json.Marshal(d)
	if err != nil {
		panic("presence: encode " + typ + ": " + err.Error()) // plain structs: cannot fail
	}
	return parley.Event{
		Type:      typ,
		Data:      data,
		CreatedAt: time.Unix(0, now).UTC(),
		Topics:    []string{topic},
	}
}

func (t *Tracker) changedEvent(u *localUser) parley.Event {
	return newEvent(typeChanged, topicOf(u.id), changedData{
		UserID:   u.id,
		Presence: u.status.String(),
		NodeID:   t.node,
		Boot:     t.boot,
		V:        u.v,
	}, t.now())
}
