package parley

import (
	"context"
	"time"
)

// Email for missed mentions and DMs (package notify, docs/email.md).

// Notification modes: a user gets email for missed mentions and DMs, or none.
const (
	NotifyOff = "off"
	NotifyOn  = "on"
)

// NotifyIntervals are the intervals a user may choose, in seconds: 15
// minutes, an hour, a day. NotifyDefaultInterval is the default's.
var NotifyIntervals = []int64{900, 3600, 86400}

// NotifyDefaultInterval is the interval of a user who chose none.
const NotifyDefaultInterval int64 = 900

// NotifyPrefs is a user's email preference. IntervalSeconds is the least
// time between two emails, and how long an unread mention or DM waits
// before it is emailed (read by then, it is not).
type NotifyPrefs struct {
	Mode            string `json:"mode"`
	IntervalSeconds int64  `json:"interval_seconds"`
}

// DefaultNotifyPrefs is what a user who never chose gets: on, every 15 minutes.
func DefaultNotifyPrefs() NotifyPrefs {
	return NotifyPrefs{Mode: NotifyOn, IntervalSeconds: NotifyDefaultInterval}
}

// Validate checks p, with a clear error for the client.
func (p NotifyPrefs) Validate() error {
	if p.Mode != NotifyOff && p.Mode != NotifyOn {
		return Errorf(EINVALID, "mode must be %q or %q", NotifyOff, NotifyOn)
	}
	for _, v := range NotifyIntervals {
		if p.IntervalSeconds == v {
			return nil
		}
	}
	return Errorf(EINVALID, "interval_seconds must be one of 900, 3600 or 86400")
}

// MissedItem is one unread mention or DM message that may go in an email.
type MissedItem struct {
	WorkspaceID   string
	WorkspaceName string
	ChannelID     string
	ChannelName   string
	ChannelKind   ChannelKind
	Seq           int64
	MessageID     string
	AuthorName    string
	AuthorHandle  string
	Text          string
	CreatedAt     time.Time
	// Mention is true for a mention, false for a DM message that does not
	// mention the user.
	Mention bool
}

// NotifyRecipient is a user who has something unread that was never
// emailed, with their address and preference.
type NotifyRecipient struct {
	UserID     string
	Email      string
	Name       string
	Prefs      NotifyPrefs
	LastSentAt time.Time // zero: never
}

// NotifyStore keeps the preferences and the notifier's state.
type NotifyStore interface {
	NotifyPrefs(ctx context.Context, userID string) (NotifyPrefs, error)
	SetNotifyPrefs(ctx context.Context, userID string, p NotifyPrefs) (NotifyPrefs, error)
	// NotifyRecipients returns up to limit users, email on, with unread
	// mentions or DM messages newer than what was emailed to them.
	NotifyRecipients(ctx context.Context, limit int) ([]NotifyRecipient, error)
	// MissedItems returns the user's unread mentions and DM messages that
	// were never emailed, oldest first, at most limit.
	MissedItems(ctx context.Context, userID string, limit int) ([]MissedItem, error)
	// ClaimNotify makes node the only sender for the user until until,
	// unless another node holds an unexpired claim (false). It returns
	// when the last email went out as of the claim (zero: never).
	ClaimNotify(ctx context.Context, userID, node string, now, until time.Time) (ok bool, lastSent time.Time, err error)
	// NotifySent records an email with items sent at sentAt and releases
	// node's claim; ReleaseNotify only releases it.
	NotifySent(ctx context.Context, userID, node string, items []MissedItem, sentAt time.Time) error
	ReleaseNotify(ctx context.Context, userID, node string) error
}
