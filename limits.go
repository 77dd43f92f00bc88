package parley

// Caps bounds how much of each kind a store keeps, so that no client can
// grow one object without end: a message with thousands of reactions is
// shipped whole on every read and every reaction event. A store enforces
// each cap inside the transaction of the write that would pass it, so
// concurrent writes cannot overshoot; the refusal is ELIMIT (409). The zero
// value of every field means its default.
type Caps struct {
	// ReactionsPerMessage bounds the distinct emoji on one message (default
	// 50). More people may still add an emoji already there.
	ReactionsPerMessage int
	// PinsPerChannel bounds the pinned messages of one channel (default 100).
	PinsPerChannel int
	// PrivateChannelMembers bounds the members of one private channel
	// (default 1,000). Public channels are unbounded (#general holds
	// everyone); group DMs have their own fixed bound, MaxGroupDMOthers.
	PrivateChannelMembers int
	// ChannelsPerWorkspace bounds the active (not archived) public and
	// private channels of one workspace (default 20,000, room for the seed
	// tool's 10,000 and more). DMs do not count.
	ChannelsPerWorkspace int
	// InvitesPerWorkspace bounds the outstanding invites of one workspace:
	// those neither expired nor used up (default 1,000).
	InvitesPerWorkspace int
}

// Default caps.
const (
	DefaultReactionsPerMessage   = 50
	DefaultPinsPerChannel        = 100
	DefaultPrivateChannelMembers = 1000
	DefaultChannelsPerWorkspace  = 20000
	DefaultInvitesPerWorkspace   = 1000
)

// WithDefaults returns c with every zero or negative field set to its
// default.
func (c Caps) WithDefaults() Caps {
	or := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	or(&c.ReactionsPerMessage, DefaultReactionsPerMessage)
	or(&c.PinsPerChannel, DefaultPinsPerChannel)
	or(&c.PrivateChannelMembers, DefaultPrivateChannelMembers)
	or(&c.ChannelsPerWorkspace, DefaultChannelsPerWorkspace)
	or(&c.InvitesPerWorkspace, DefaultInvitesPerWorkspace)
	return c
}
