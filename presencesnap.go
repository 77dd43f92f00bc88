package parley

import "context"

// PresenceSnapshot tells the store who is active right now, so that @here
// (MentionHere) reaches only the members with a live, active session when
// the message is written, as in Slack. "Active" means online: a session is
// connected and the user has not gone away (idle past the away timeout, or
// set away by hand). Away and offline members are not notified by @here;
// @channel and @everyone still reach them.
//
// cmd/parley fills it with the presence tracker (package presence); the
// store must not import presence, hence this interface. It is called
// inside the write transaction, once per @here, so it must answer from
// memory.
type PresenceSnapshot interface {
	// ActiveUsers returns those of userIDs who are active now, in any
	// order. Implementations that cannot tell for some user should count
	// them active: an extra notification is better than a missed one.
	ActiveUsers(ctx context.Context, userIDs []string) []string
}
