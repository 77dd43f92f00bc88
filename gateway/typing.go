package gateway

import (
	"context"
	"sync"
	"time"

	"parley"
)

// typing handles the typing op: a member of the channel, at most once per
// TypingInterval per user and channel, is published as an ephemeral
// typing.started on the channel topic; every node delivers it to the
// channel's other members.
func (c *conn) typing(s *session, f *inFrame) {
	g := c.g
	// Ids that no store row can hold name nothing; the thread id would
	// otherwise be fanned out to every member as it came.
	if f.ChannelID == "" || len(f.ChannelID) > maxIDBytes || len(f.ThreadRootID) > maxIDBytes ||
		parley.CheckText("channel_id", f.ChannelID) != nil || parley.CheckText("thread_root_id", f.ThreadRootID) != nil {
		g.metrics.typingDropped.Inc()
		return
	}
	now := g.now()
	if !g.typing.allow(s.userID, f.ChannelID, now) {
		g.metrics.typingDropped.Inc()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	ok, err := g.store.ChannelMember(ctx, s.userID, f.ChannelID)
	cancel()
	if err != nil || !ok {
		g.metrics.typingDropped.Inc()
		return
	}
	g.bus.Publish([]parley.Event{typingEvent(s.workspaceID, f.ChannelID, f.ThreadRootID, s.userID, now)})
	g.presenceActivity(s)
}

// typingLimiter remembers when each (user, channel) last typed.
type typingLimiter struct {
	interval time.Duration

	mu   sync.Mutex
	last map[typingKey]time.Time // guarded by mu
}

type typingKey struct{ userID, channelID string }

// maxTypingKeys bounds the limiter; past it, old entries are swept.
const maxTypingKeys = 100_000

func newTypingLimiter(interval time.Duration) *typingLimiter {
	return &typingLimiter{interval: interval, last: map[typingKey]time.Time{}}
}

func (l *typingLimiter) allow(userID, channelID string, now time.Time) bool {
	k := typingKey{userID, channelID}
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[k]; ok && now.Sub(t) < l.interval {
		return false
	}
	if len(l.last) >= maxTypingKeys {
		for k, t := range l.last {
			if now.Sub(t) >= l.interval {
				delete(l.last, k)
			}
		}
	}
	l.last[k] = now
	return true
}
