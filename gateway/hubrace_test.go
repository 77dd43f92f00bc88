package gateway

import (
	"sync"
	"testing"
	"time"

	"parley"
)

// The last session of a channel on the node goes away while another
// identifies: the hub's release of the channel's topic and the new
// session's acquire of it meet. The node's subscriptions go through a mux,
// which holds one subscription per topic; before, the acquire could find
// the old subscription still open (a no-op subscribe), and the release
// then closed it: the node believed itself subscribed, the bus sent it
// nothing more of the channel, and the new session was given nothing of it
// from then on — no event, no summary, no gap to notice. The chaos run's
// readers of #general stopped that way. Here the acquire happens at the
// moment the release has dropped the last reference (releaseHook); the new
// session must still get the channel's next message.
func TestSubscriptionSurvivesReleaseMeetingAcquire(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ResumeWindow = 200 * time.Millisecond })
	owner, u := e.user("owner"), e.user("u")
	ws := e.workspace(owner, u)
	ch := e.channel(ws, owner, "room", parley.KindPublic)
	e.addMembers(owner, ch, u)
	topic := parley.TopicChannel(ch.ID)

	first, _ := e.identify(u, ws)
	waitUntil(t, "the node to follow the channel", func() bool { return e.gw.hub.refs(topic) == 1 })

	var once sync.Once
	second := make(chan *client, 1)
	hook := func(released string) {
		if released != topic {
			return
		}
		once.Do(func() {
			c, _ := e.identify(owner, ws) // takes the topic as the release ends
			second <- c
		})
	}
	e.gw.releaseHook.Store(&hook)

	first.drop() // its session ends with the resume window: the last reference goes
	var c *client
	select {
	case c = <-second:
	case <-time.After(waitTimeout):
		t.Fatal("the channel's topic was never released")
	}
	e.gw.releaseHook.Store(nil)
	if got := e.gw.hub.refs(topic); got != 1 {
		t.Fatalf("the node holds %d references on the channel, want 1 (the new session's)", got)
	}
	e.post(u, ch, "after the meeting")
	evs := c.waitEvents(parley.EventMessageCreated, 1)
	if got := evs[0].data(t).Message.Text; got != "after the meeting" {
		t.Fatalf("message %q", got)
	}
}
