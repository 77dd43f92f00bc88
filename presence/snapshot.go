package presence

import (
	"context"

	"parley"
)

var _ parley.PresenceSnapshot = (*Tracker)(nil)

// ActiveUsers implements parley.PresenceSnapshot for @here: it returns
// those of userIDs who are online (not away, not offline) as far as this
// node can tell right now, without a bus round trip (the store calls it
// inside a write):
//
//   - a user with a session here that is online is active;
//   - else a user set away by hand (known on every node) is not active;
//   - else, on a node alone (no other live node), the user is not active:
//     a user whose last session left is not active even during the grace
//     that keeps their presence dot online for a reconnect;
//   - else a user watched here (some session has them in view) is active
//     when the aggregate over every node says online;
//   - else the user may have sessions on another node that this one knows
//     nothing about, and counts as active: an extra @here notification is
//     cheaper than a missed one.
func (t *Tracker) ActiveUsers(_ context.Context, userIDs []string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	alone := true
	for _, p := range t.peers {
		if p.live {
			alone = false
			break
		}
	}
	var out []string
	for _, id := range userIDs {
		if u := t.local[id]; u != nil && len(u.sessions) > 0 && u.status == stOnline {
			out = append(out, id)
			continue
		}
		if _, away := t.manual[id]; away || alone { // away by hand is away everywhere; alone, this node knows every session
			continue
		}
		if wu := t.watched[id]; wu == nil || !wu.synced || wu.status == stOnline {
			out = append(out, id)
		}
	}
	return out
}
