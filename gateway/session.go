package gateway

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// session is one identified client session: its id, who it acts for, its
// session seq and replay ring, and the channels it follows with its
// position in each. It outlives its sockets: after a drop it stays
// resumable for the resume window, still queueing what it is sent.
//
// Every field below the first group is owned by the session's partition
// goroutine; only the partition reads or writes them.
type session struct {
	id          string
	userID      string
	workspaceID string
	tokenHash   string
	// expiresAt is when the login it was identified with expires (zero:
	// unknown, e.g. handed over by an older node). A resume checks the
	// token against tokenHash and this without the store (identify.go).
	expiresAt time.Time
	// bot: identified with a bot token (bots.go). Atomic: a resume that
	// learns it from the store marks a session already shared.
	bot atomic.Bool
	// botGen is the gateway's CloseBots generation when its bot check
	// began (bots.go); set before the session is shared.
	botGen uint64
	p      *partition

	watchMu      sync.Mutex        // orders changes of the presence watch (conn.go)
	mu           sync.Mutex        // guards the fields up to the blank line
	watchCancel  func()            // the presence watch of presence_sub
	watched      []string          // the users of that watch
	focus        []string          // the channels on screen
	presenceSeen map[string]string // the status last queued to it, per watched user
	// presenceStale: a presence change was dropped (session detached or
	// its queue half full), so presenceSeen lacks it; a resume watches
	// afresh to send the current statuses.
	presenceStale bool

	c          sink   // the attached socket; nil while detached
	ring       ring   // replay buffer; the part after sentS is the send queue
	lastS      uint64 // the last s given
	sentS      uint64 // the last s written to c
	chans      map[string]*chanPos
	left       map[string]int64 // channels left: the last seq given (nil until one is)
	topics     []string         // the non-channel topics it holds (user; admins' for an admin)
	admin      bool             // its user administers the workspace: it follows the admins' topic
	inView     map[string]bool  // the users in view whose profile topics it holds (not its own user)
	viewing    map[string]bool  // the channels in focus (typing goes only there)
	known      userSet          // the users sent to it (jit.go)
	detachedAt int64            // unix nanos; 0 while attached
	dirty      bool             // in the partition's dirty list
	batched    bool             // in the partition's hot batch (view.go)
	handle     string           // its user's handle, for the mentions of summaries
	// presenceRetry: a presence change was dropped while attached (the
	// queue was half full); flush watches afresh once the queue is empty.
	presenceRetry bool
	removed       bool
	// resumeMark > 0: a resumed frame is owed after the event with this s.
	resumeMark  uint64
	resumeCount uint64
	resumeOwed  bool
}

// chanPos is a session's position in one channel it follows.
type chanPos struct {
	last     int64    // the last seq of the channel given to the session
	until    int64    // > 0: the session leaves the channel after this seq
	later    []*event // the user's own member events after until, for leave
	catching bool     // a read of the log for this session is in flight
	// fillFails counts the failed catch-up reads in a row (the backoff
	// of the next); retryArmed: a retry is scheduled.
	fillFails  int
	retryArmed bool
	preview    bool // a public channel the user is not in, followed while in focus

	// View-aware delivery (view.go): given is the position the client
	// has, by events or summaries; last may be past it while the channel
	// is passive, by unread messages and mentions of the user.
	given     int64
	unread    int
	mentions  int
	sumAt     int64 // unix nanos of the last summary
	sumQueued bool  // in the partition's sumDue
}

func newSession(id, userID, workspaceID, tokenHash string, p *partition) *session {
	return &session{
		id:          id,
		userID:      userID,
		workspaceID: workspaceID,
		tokenHash:   tokenHash,
		p:           p,
		chans:       map[string]*chanPos{},
	}
}

// ownerNode is the node part of a session id ("<node_id>.<random>").
func ownerNode(sessionID string) string {
	node, _, ok := strings.Cut(sessionID, ".")
	if !ok {
		return ""
	}
	return node
}

// setWatch replaces the session's presence watch.
func (s *session) setWatch(userIDs []string, cancel func()) {
	s.mu.Lock()
	old := s.watchCancel
	s.watchCancel, s.watched = cancel, userIDs
	s.mu.Unlock()
	if old != nil {
		old()
	}
}

// presenceChanged records a user's status as sent to this session and
// reports whether it differs from what was sent before.
func (s *session) presenceChanged(userID, status string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.presenceSeen == nil {
		s.presenceSeen = map[string]string{}
	}
	if s.presenceSeen[userID] == status {
		return false
	}
	s.presenceSeen[userID] = status
	return true
}

// presenceDropped forgets the status last sent for a user whose change
// was not queued: the session still shows the older one, so the next
// report of the user's status (a change, or the fresh watch of a resume)
// must be sent.
func (s *session) presenceDropped(userID string) {
	s.mu.Lock()
	delete(s.presenceSeen, userID)
	s.presenceStale = true
	s.mu.Unlock()
}

// takePresenceStale reports whether presence was dropped since the last
// call, and the users then watched.
func (s *session) takePresenceStale() (bool, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stale := s.presenceStale
	s.presenceStale = false
	return stale, s.watched
}

func (s *session) setFocus(ids []string) {
	s.mu.Lock()
	s.focus = ids
	s.mu.Unlock()
}

// sink is where a partition writes a session's frames: a socket, or a
// discarding stand-in in benchmarks.
type sink interface {
	// pending is how many bytes were written but have not reached the
	// socket yet.
	pending() int
	// cork starts a batch: frames are gathered in buf until uncork writes
	// them to the socket at once and returns buf for reuse.
	cork(buf []byte)
	text(payload []byte) bool
	uncork() []byte
	// armWritable asks for a call to the session's partition once pending
	// has drained; false means it already has (flush again now).
	armWritable() bool
	// closeWith sends a close frame and closes the socket.
	closeWith(code int, reason string)
	// closed reports whether the socket is gone.
	closed() bool
}
