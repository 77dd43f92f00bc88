package parley

import (
	"context"
	"time"
)

// Moving a workspace's history in and out (docs/import.md): what an
// importer (package transfer) hands a store to write in bulk, and what a
// store hands an exporter. Both sides are keyed by the source's own ids, so
// that an import run twice, or again after a crash, writes nothing twice.

// Import sources: the namespace of the external ids in the import mapping.
const (
	ImportSlack  = "slack"
	ImportParley = "parley"
)

// ImportUser is an account of the source workspace.
type ImportUser struct {
	ExtID  string // the source's user id
	Email  string // "" when the source has none (bots, some deleted users)
	Handle string // wanted handle; made unique on the server if taken
	Name   string
	Title  string
	Admin  bool // an admin or owner in the source: an admin here
}

// ImportedUser says where an ImportUser went.
type ImportedUser struct {
	ExtID   string
	UserID  string
	Handle  string // the account's handle here
	Matched bool   // an existing account with the same email
	Created bool   // a new account, deactivated until claimed
	Mapped  bool   // imported by an earlier run
}

// ImportChannel is a channel of the source workspace. Members are Parley
// user ids; CreatedBy too.
type ImportChannel struct {
	ExtID      string
	Name       string
	Kind       ChannelKind // public or private
	Topic      string
	Purpose    string
	CreatedBy  string
	CreatedAt  time.Time
	ArchivedAt *time.Time
	Members    []string
}

// ImportedChannel says where an ImportChannel went.
type ImportedChannel struct {
	ChannelID string
	Created   bool // a new channel (false: an earlier run's, or an existing channel of that name)
}

// ImportMessage is one message of a channel, in the source's order. User
// ids are Parley's; ThreadExtID names the root by its ExtID.
type ImportMessage struct {
	ExtID       string
	ThreadExtID string
	UserID      string
	Text        string
	CreatedAt   time.Time
	EditedAt    *time.Time
	Deleted     bool // a deleted root kept for its replies
	Reactions   []ImportReaction
	PinnedBy    string // "" when not pinned
	PinnedAt    time.Time
	Files       []ImportFile
	// BotProfile is the name and icon the source showed the message with
	// (a webhook's username, icon_emoji, icon_url); the store checks it
	// with ValidateBotProfile and refuses the batch if it is invalid (the
	// import driver drops such a profile first, counted).
	BotProfile *BotProfile
	// Notice, when set, makes this a membership notice instead of a
	// message: EventMemberJoined or EventMemberLeft of UserID at
	// CreatedAt, written to the channel's log at its place in time order,
	// as the live server records a join or leave (Text and the rest unused).
	Notice string
}

// ImportReaction is one emoji on a message and who reacted with it.
type ImportReaction struct {
	Emoji   string
	UserIDs []string
}

// ImportFile is a file's metadata from the source, recorded beside its
// message until the bytes can be attached (docs/import.md).
type ImportFile struct {
	ExtID    string `json:"id"`
	Name     string `json:"name"`
	Title    string `json:"title,omitempty"`
	MimeType string `json:"mimetype,omitempty"`
	Size     int64  `json:"size"`
	URL      string `json:"url,omitempty"`
}

// ImportBatchResult counts what one batch of messages wrote.
type ImportBatchResult struct {
	Messages  int // new messages
	Replies   int // of those, thread replies
	Skipped   int // imported by an earlier run
	Orphans   int // replies whose root is not in the channel: imported as top-level messages
	Reactions int // (emoji, user) pairs
	Pins      int
	Files     int
	Notices   int // membership notices written (member.joined, member.left)
}

// Importer is a store that takes imported history in bulk.
type Importer interface {
	// ImportWorkspace returns the workspace with that slug, creating it
	// (owned by ownerID) when missing; an existing one must be owned by
	// ownerID.
	ImportWorkspace(ctx context.Context, ownerID, name, slug string) (ws *Workspace, created bool, err error)
	// ImportUsers matches users by email or creates them deactivated, and
	// makes them members of the workspace.
	ImportUsers(ctx context.Context, workspaceID, source string, users []ImportUser) ([]ImportedUser, error)
	// ImportChannel finds or creates a channel and adds its members.
	ImportChannel(ctx context.Context, workspaceID, source string, ch ImportChannel) (*ImportedChannel, error)
	// ImportMessages appends msgs (in order, roots before their replies)
	// to the channel in one transaction, skipping those already imported.
	ImportMessages(ctx context.Context, workspaceID, source, channelID string, msgs []ImportMessage) (*ImportBatchResult, error)
	// ImportedMessages returns the ExtIDs already imported into a channel.
	ImportedMessages(ctx context.Context, workspaceID, source, channelID string) (map[string]bool, error)
}

// ExportOptions say what an export holds.
type ExportOptions struct {
	// Private adds the private channels (DMs are never exported).
	Private bool
}

// ExportUser is a member of the exported workspace, email included (the
// owner exports it; the import matches accounts by it).
type ExportUser struct {
	ID          string `json:"id"`
	Email       string `json:"email"`
	Handle      string `json:"handle"`
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Role        Role   `json:"role"`
	Deactivated bool   `json:"deactivated,omitempty"`
}

// ExportChannel is an exported channel with its member ids.
type ExportChannel struct {
	ID         string      `json:"id"`
	Name       string      `json:"name"`
	Kind       ChannelKind `json:"kind"`
	Topic      string      `json:"topic"`
	Purpose    string      `json:"purpose"`
	CreatedBy  string      `json:"created_by"`
	CreatedAt  time.Time   `json:"created_at"`
	ArchivedAt *time.Time  `json:"archived_at,omitempty"`
	Members    []string    `json:"members"`
}

// ExportMessage is an exported message; deleted messages are left out
// unless they are the root of a thread.
type ExportMessage struct {
	ID           string           `json:"id"`
	Seq          int64            `json:"seq"`
	UserID       string           `json:"user_id"`
	Text         string           `json:"text"`
	CreatedAt    time.Time        `json:"created_at"`
	EditedAt     *time.Time       `json:"edited_at,omitempty"`
	Deleted      bool             `json:"deleted,omitempty"`
	ThreadRootID string           `json:"thread_root_id,omitempty"`
	ReplyCount   int              `json:"reply_count,omitempty"`
	LastReplyAt  *time.Time       `json:"last_reply_at,omitempty"`
	Reactions    []ExportReaction `json:"reactions,omitempty"`
	PinnedBy     string           `json:"pinned_by,omitempty"`
	PinnedAt     *time.Time       `json:"pinned_at,omitempty"`
	Files        []ImportFile     `json:"files,omitempty"`
	BotProfile   *BotProfile      `json:"bot_profile,omitempty"`
}

// ExportReaction is one emoji on a message with its users, in reaction order.
type ExportReaction struct {
	Emoji   string   `json:"emoji"`
	UserIDs []string `json:"users"`
}

// ExportSink receives an export as the store reads it: the workspace, its
// members, then each channel followed by its messages in seq order.
type ExportSink interface {
	Workspace(ws *Workspace) error
	Users(users []ExportUser) error
	Channel(ch *ExportChannel) error
	Message(m *ExportMessage) error
}

// Exporter is a store that can read a whole workspace out.
type Exporter interface {
	// ExportWorkspace streams the workspace to sink; only its owner may.
	ExportWorkspace(ctx context.Context, actor, workspaceID string, opts ExportOptions, sink ExportSink) error
}

// PendingImportFile is a file of an imported message whose bytes are not
// attached yet (import_files with attached_at NULL).
type PendingImportFile struct {
	MessageID string
	ExtID     string
	Position  int
	Name      string
	Title     string
	MimeType  string
	Size      int64 // as the source said
	URL       string
}

// ImportFileStore attaches the bytes of imported messages' files
// (docs/import.md, "Files").
type ImportFileStore interface {
	// PendingImportFiles pages the workspace's files not attached yet, by
	// (message id, position), after the given one ("" and 0 to start).
	PendingImportFiles(ctx context.Context, workspaceID, afterMessage string, afterPosition, limit int) ([]PendingImportFile, error)
	// AttachImportedFile records f (stored bytes) as the pending file p,
	// attached to p's message and uploaded by its author, counts it in the
	// workspace's usage within q (ETOOLARGE past it) and marks p attached,
	// in one transaction. ECONFLICT when p is attached already (another
	// run did it), ENOTFOUND when its message is gone: the caller then
	// removes the bytes it stored.
	AttachImportedFile(ctx context.Context, workspaceID string, p PendingImportFile, f File, q FileQuota) (*File, error)
}
