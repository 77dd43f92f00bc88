// Package transfer moves a workspace's history in and out of Parley: it
// reads a Slack export or a Parley export (a zip of JSON files) into one
// source model and writes it through a parley.Importer in ordered batches,
// and it writes a parley.Exporter's stream as a Parley export
// (docs/import.md).
//
// It must not know about SQL or the bus, nor serve HTTP: the store does
// the writes (sqlstore/importer.go) and the authorization, the command
// line and the HTTP API only hand it readers and writers. The one HTTP it
// speaks is as a client, fetching an export's files from the source's
// allowed hosts (files.go).
package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"parley"
)

// Source is an export read into memory but for the messages, which are
// read one channel at a time (Channel.Load).
type Source struct {
	Kind          string // parley.ImportSlack or parley.ImportParley
	WorkspaceName string
	Users         []SrcUser
	Channels      []*SrcChannel
	// Skipped counts what the source holds but the import leaves out, by
	// reason.
	Skipped map[string]int
	// Problems are the files that could not be read (malformed JSON, …):
	// reported, not fatal.
	Problems []string
	// Names are display names of the users the messages name that the
	// users list lacks (Slack's bots), by ext id.
	Names map[string]string
}

// SrcUser is an account of the source.
type SrcUser struct {
	ExtID, Email, Handle, Name, Title string
	Admin                             bool
}

// SrcChannel is a channel of the source; Load reads its messages.
type SrcChannel struct {
	ExtID, Name     string
	Kind            parley.ChannelKind
	Topic, Purpose  string
	Creator         string // ext user id
	CreatedAt       time.Time
	ArchivedAt      *time.Time
	Members         []string // ext user ids
	Load            func() ([]SrcMessage, error)
	ConvertMentions bool // the text is Slack's markup and needs the users' handles (slacktext.go)
}

// SrcMessage is a message of the source. Times are the source's.
type SrcMessage struct {
	ExtID, ThreadExtID string
	User               string // ext user id
	Text               string
	CreatedAt          time.Time
	EditedAt           *time.Time
	Deleted            bool
	Reactions          []SrcReaction
	PinnedBy           string // ext user id, "" when not pinned
	PinnedAt           time.Time
	Files              []parley.ImportFile
	// BotProfile is the name and icon a bot's message showed (nil for
	// none); Import checks it (parley.ValidateBotProfile) and drops an
	// invalid one, counted.
	BotProfile *parley.BotProfile
	// Notice is parley.EventMemberJoined or EventMemberLeft for a
	// membership notice of User; "" for a message.
	Notice string
}

// SrcReaction is one emoji and its users (ext ids).
type SrcReaction struct {
	Emoji string
	Users []string
}

// Options tune an import.
type Options struct {
	// OwnerID owns the workspace (created when the slug is free).
	OwnerID string
	// Slug names the workspace; Name is used when it is created (default:
	// the source's name, else the slug).
	Slug, Name string
	// Batch is the messages per transaction (default 2000).
	Batch int
	// Progress, if set, hears of every batch committed.
	Progress func(Progress)
}

// Progress is where an import stands.
type Progress struct {
	Channel            string
	ChannelsDone       int
	Channels           int
	Messages           int // imported so far in this run
	MessagesOfChannel  int
	ChannelMessagesNew int
}

// Summary is what an import did.
type Summary struct {
	WorkspaceID      string         `json:"workspace_id"`
	WorkspaceCreated bool           `json:"workspace_created"`
	UsersCreated     int            `json:"users_created"`
	UsersMatched     int            `json:"users_matched"`
	UsersKnown       int            `json:"users_already_imported"`
	Bots             int            `json:"bots"` // accounts for bots that posted without a user (of the created or known)
	ChannelsCreated  int            `json:"channels_created"`
	ChannelsKnown    int            `json:"channels_existing"`
	Messages         int            `json:"messages"`
	Threads          int            `json:"threads"`
	Replies          int            `json:"replies"`
	Reactions        int            `json:"reactions"`
	Pins             int            `json:"pins"`
	Files            int            `json:"files_recorded"`
	Notices          int            `json:"membership_notices"`
	NoticesKnown     int            `json:"membership_notices_already_imported"`
	AlreadyImported  int            `json:"messages_already_imported"`
	Skipped          map[string]int `json:"skipped,omitempty"`
	Problems         []string       `json:"problems,omitempty"`
	// FileImport is what ImportFiles did, when the caller ran it.
	FileImport *FileSummary  `json:"file_import,omitempty"`
	Took       time.Duration `json:"took_ns"`
}

// SkipBotProfile is the summary's reason (Summary.Skipped) for a message's bot profile
// (name and icon) that parley.ValidateBotProfile refuses: the message is
// imported without it.
const SkipBotProfile = "bot profiles (name and icon of a bot message) Parley does not take (the message imported without)"

// skip counts one thing left out.
func (s *Summary) skip(reason string, n int) {
	if n == 0 {
		return
	}
	if s.Skipped == nil {
		s.Skipped = map[string]int{}
	}
	s.Skipped[reason] += n
}

// Import writes src into the workspace opts.Slug through im. It can be run
// again over the same source: what an earlier run imported is skipped, and
// a run cut short continues where its last batch committed.
func Import(ctx context.Context, im parley.Importer, src *Source, opts Options) (*Summary, error) {
	start := time.Now()
	if opts.Batch <= 0 {
		opts.Batch = 2000
	}
	name := opts.Name
	if name == "" {
		name = src.WorkspaceName
	}
	if name == "" {
		name = opts.Slug
	}
	sum := &Summary{}
	ws, created, err := im.ImportWorkspace(ctx, opts.OwnerID, name, opts.Slug)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", opts.Slug, err)
	}
	sum.WorkspaceID, sum.WorkspaceCreated = ws.ID, created

	users := newUserMap()
	if err := users.add(ctx, im, ws.ID, src.Kind, src.Users, sum); err != nil {
		return nil, err
	}
	chanNames := map[string]string{} // ext channel id → Parley name, for links
	for _, c := range src.Channels {
		chanNames[c.ExtID] = c.Name
	}
	done := 0
	for ci, c := range src.Channels {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		msgs, err := c.Load()
		if err != nil {
			return nil, fmt.Errorf("channel %s: %w", c.Name, err)
		}
		// Users the messages name that the users list lacks.
		var unknown []SrcUser
		need := slices.Concat(c.Members, []string{c.Creator})
		for _, m := range msgs {
			need = append(need, m.User, m.PinnedBy)
			for _, r := range m.Reactions {
				need = append(need, r.Users...)
			}
		}
		for _, id := range need {
			if id != "" && users.ids[id] == "" && !slices.ContainsFunc(unknown, func(u SrcUser) bool { return u.ExtID == id }) {
				u := SrcUser{ExtID: id, Handle: src.Kind + "-" + id, Name: id}
				if n := src.Names[id]; n != "" {
					u.Handle, u.Name = n, n
				}
				unknown = append(unknown, u)
			}
		}
		if len(unknown) > 0 {
			if err := users.add(ctx, im, ws.ID, src.Kind, unknown, sum); err != nil {
				return nil, err
			}
			bots := 0
			for _, u := range unknown {
				if src.Names[u.ExtID] != "" {
					bots++
				}
			}
			sum.Bots += bots
			sum.skip("users named by messages but missing from the users list (imported as placeholders)", len(unknown)-bots)
		}
		members := make([]string, 0, len(c.Members)+1)
		for _, m := range c.Members {
			members = append(members, users.ids[m])
		}
		creator := users.ids[c.Creator]
		if creator == "" {
			creator = opts.OwnerID
		}
		members = append(members, opts.OwnerID) // the owner sees what they imported
		slices.Sort(members)
		members = slices.Compact(members)
		ich, err := im.ImportChannel(ctx, ws.ID, src.Kind, parley.ImportChannel{
			ExtID: c.ExtID, Name: c.Name, Kind: c.Kind, Topic: c.Topic, Purpose: c.Purpose,
			CreatedBy: creator, CreatedAt: c.CreatedAt, ArchivedAt: c.ArchivedAt, Members: members,
		})
		if err != nil {
			return nil, fmt.Errorf("channel %s: %w", c.Name, err)
		}
		if ich.Created {
			sum.ChannelsCreated++
		} else {
			sum.ChannelsKnown++
		}
		have, err := im.ImportedMessages(ctx, ws.ID, src.Kind, ich.ChannelID)
		if err != nil {
			return nil, err
		}
		out := make([]parley.ImportMessage, 0, len(msgs))
		for _, m := range msgs {
			if have[m.ExtID] && m.Notice != "" {
				sum.NoticesKnown++
				continue
			}
			if have[m.ExtID] {
				sum.AlreadyImported++
				continue
			}
			if m.Notice != "" {
				out = append(out, parley.ImportMessage{ExtID: m.ExtID, UserID: users.ids[m.User],
					CreatedAt: m.CreatedAt, Notice: m.Notice})
				continue
			}
			text := m.Text
			if c.ConvertMentions {
				text = SlackText(text, users.handles, chanNames)
			}
			text, fixed := CleanText(text)
			if fixed != "" {
				sum.skip(fixed, 1)
			}
			if !m.Deleted && isBlank(text) && len(m.Files) == 0 {
				sum.skip("messages with no text", 1)
				continue
			}
			if !m.Deleted && isBlank(text) {
				text = fileNote(m.Files)
			}
			om := parley.ImportMessage{
				ExtID: m.ExtID, ThreadExtID: m.ThreadExtID, UserID: users.ids[m.User], Text: text,
				CreatedAt: m.CreatedAt, EditedAt: m.EditedAt, Deleted: m.Deleted, Files: m.Files,
				PinnedBy: users.ids[m.PinnedBy], PinnedAt: m.PinnedAt,
			}
			if m.BotProfile != nil && !m.Deleted {
				p, err := parley.ValidateBotProfile(m.BotProfile)
				if err != nil {
					sum.skip(SkipBotProfile, 1)
				}
				om.BotProfile = p
			}
			for _, r := range m.Reactions {
				emoji, ok := CleanEmoji(r.Emoji)
				if !ok {
					sum.skip("reactions with an emoji name Parley does not take", 1)
					continue
				}
				// Skin tones of one emoji are one reaction here.
				i := slices.IndexFunc(om.Reactions, func(r parley.ImportReaction) bool { return r.Emoji == emoji })
				if i < 0 {
					om.Reactions = append(om.Reactions, parley.ImportReaction{Emoji: emoji})
					i = len(om.Reactions) - 1
				}
				for _, u := range r.Users {
					om.Reactions[i].UserIDs = append(om.Reactions[i].UserIDs, users.ids[u])
				}
			}
			out = append(out, om)
		}
		// Roots before replies, oldest first: seq in time order.
		sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
		newOfChannel := 0
		threads := map[string]bool{}
		for batch := range slices.Chunk(out, opts.Batch) {
			res, err := im.ImportMessages(ctx, ws.ID, src.Kind, ich.ChannelID, batch)
			if err != nil {
				return nil, fmt.Errorf("channel %s: %w", c.Name, err)
			}
			sum.Messages += res.Messages
			sum.Replies += res.Replies
			sum.Reactions += res.Reactions
			sum.Pins += res.Pins
			sum.Files += res.Files
			sum.Notices += res.Notices
			sum.AlreadyImported += res.Skipped
			sum.skip("replies whose thread root is missing (imported as top-level messages)", res.Orphans)
			newOfChannel += res.Messages
			if opts.Progress != nil {
				opts.Progress(Progress{Channel: c.Name, ChannelsDone: done, Channels: len(src.Channels),
					Messages: sum.Messages, MessagesOfChannel: len(out), ChannelMessagesNew: newOfChannel})
			}
		}
		for _, m := range out {
			if m.ThreadExtID != "" && m.ThreadExtID != m.ExtID {
				threads[m.ThreadExtID] = true
			}
		}
		sum.Threads += len(threads)
		done = ci + 1
		if opts.Progress != nil {
			opts.Progress(Progress{Channel: c.Name, ChannelsDone: done, Channels: len(src.Channels),
				Messages: sum.Messages, MessagesOfChannel: len(out), ChannelMessagesNew: newOfChannel})
		}
	}
	// Channels load their messages as they go: what they left out is
	// known only now.
	sum.Problems = src.Problems
	for r, n := range src.Skipped {
		sum.skip(r, n)
	}
	sum.Took = time.Since(start)
	return sum, nil
}

func isBlank(s string) bool {
	for _, r := range s {
		if r != ' ' && r != '\n' && r != '\t' && r != '\r' {
			return false
		}
	}
	return true
}

// fileNote is the text of a message that only shared files.
func fileNote(files []parley.ImportFile) string {
	s := "(shared "
	for i, f := range files {
		if i > 0 {
			s += ", "
		}
		s += f.Name
	}
	return s + ")"
}

// userMap maps the source's user ids to Parley's ids and handles.
type userMap struct {
	ids     map[string]string // ext → Parley id
	handles map[string]string // ext → Parley handle
}

func newUserMap() *userMap {
	return &userMap{ids: map[string]string{}, handles: map[string]string{}}
}

func (um *userMap) add(ctx context.Context, im parley.Importer, workspaceID, source string, src []SrcUser, sum *Summary) error {
	in := make([]parley.ImportUser, len(src))
	for i, u := range src {
		in[i] = parley.ImportUser{ExtID: u.ExtID, Email: u.Email, Handle: u.Handle, Name: u.Name, Title: u.Title, Admin: u.Admin}
	}
	out, err := im.ImportUsers(ctx, workspaceID, source, in)
	if err != nil {
		return fmt.Errorf("users: %w", err)
	}
	for _, r := range out {
		um.ids[r.ExtID], um.handles[r.ExtID] = r.UserID, r.Handle
		switch {
		case r.Mapped:
			sum.UsersKnown++
		case r.Matched:
			sum.UsersMatched++
		case r.Created:
			sum.UsersCreated++
		}
	}
	return nil
}

// errMalformed marks a source that cannot be read at all.
var errMalformed = errors.New("malformed export")

// readAllLimited reads r up to limit bytes.
func readAllLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: a file is larger than %d bytes", errMalformed, limit)
	}
	return b, nil
}
