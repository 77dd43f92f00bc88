package transfer

import (
	"archive/zip"
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"parley"
)

// The Parley export format (docs/import.md), version 1: a zip of
//
//	parley-export.json          the manifest: format, version, time, workspace, counts
//	users.json                  the members, emails included
//	channels.json               the channels with their members
//	channels/<channel id>.jsonl the channel's messages in seq order, one JSON object a line
//
// Message lines are parley.ExportMessage; a reply names its root by id.
// The reader below takes it back as a Source, so an export imports into
// another workspace (or server) like a Slack export does.

// ExportFormat and ExportVersion identify the format in the manifest.
const (
	ExportFormat  = "parley-export"
	ExportVersion = 1
)

// Manifest is parley-export.json.
type Manifest struct {
	Format     string            `json:"format"`
	Version    int               `json:"version"`
	ExportedAt time.Time         `json:"exported_at"`
	Workspace  *parley.Workspace `json:"workspace"`
	Users      int               `json:"users"`
	Channels   int               `json:"channels"`
	Messages   int               `json:"messages"`
}

// zipSink writes the export stream into a zip as it comes.
type zipSink struct {
	zw       *zip.Writer
	man      Manifest
	channels []*parley.ExportChannel
	cur      *bufio.Writer // the open channel file
	enc      *json.Encoder
}

var _ parley.ExportSink = (*zipSink)(nil)

func (z *zipSink) Workspace(ws *parley.Workspace) error {
	w := *ws
	w.Role = ""
	z.man.Workspace = &w
	return nil
}

func (z *zipSink) Users(users []parley.ExportUser) error {
	z.man.Users = len(users)
	return z.writeJSON("users.json", users)
}

func (z *zipSink) Channel(ch *parley.ExportChannel) error {
	if err := z.flush(); err != nil {
		return err
	}
	c := *ch
	z.channels = append(z.channels, &c)
	w, err := z.zw.Create("channels/" + ch.ID + ".jsonl")
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	z.cur = bufio.NewWriterSize(w, 64<<10)
	z.enc = json.NewEncoder(z.cur)
	z.enc.SetEscapeHTML(false)
	return nil
}

func (z *zipSink) Message(m *parley.ExportMessage) error {
	z.man.Messages++
	if err := z.enc.Encode(m); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

func (z *zipSink) flush() error {
	if z.cur == nil {
		return nil
	}
	err := z.cur.Flush()
	z.cur = nil
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

func (z *zipSink) writeJSON(name string, v any) error {
	if err := z.flush(); err != nil {
		return err
	}
	w, err := z.zw.Create(name)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("export %s: %w", name, err)
	}
	return nil
}

// Export writes the workspace as a Parley export zip to w, as actor (its
// owner), and returns the manifest.
func Export(ctx context.Context, ex parley.Exporter, actor, workspaceID string, opts parley.ExportOptions, w io.Writer) (*Manifest, error) {
	z := &zipSink{zw: zip.NewWriter(w), man: Manifest{Format: ExportFormat, Version: ExportVersion,
		ExportedAt: time.Now().UTC().Truncate(time.Second)}}
	if err := ex.ExportWorkspace(ctx, actor, workspaceID, opts, z); err != nil {
		return nil, err
	}
	if z.channels == nil {
		z.channels = []*parley.ExportChannel{}
	}
	z.man.Channels = len(z.channels)
	if err := z.writeJSON("channels.json", z.channels); err != nil {
		return nil, err
	}
	if err := z.writeJSON("parley-export.json", z.man); err != nil {
		return nil, err
	}
	if err := z.zw.Close(); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	return &z.man, nil
}

// ReadParley reads a Parley export. A missing or malformed manifest,
// users.json or channels.json is an error; a malformed message line is a
// Problem of the source.
func ReadParley(r io.ReaderAt, size int64) (*Source, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("read Parley export: %w", err)
	}
	files := map[string]*zip.File{}
	for _, f := range zr.File {
		files[f.Name] = f
	}
	var man Manifest
	if err := readZipJSON(files, "parley-export.json", &man); err != nil {
		return nil, err
	}
	if man.Format != ExportFormat || man.Version != ExportVersion {
		return nil, fmt.Errorf("%w: format %q version %d, want %q version %d", errMalformed,
			man.Format, man.Version, ExportFormat, ExportVersion)
	}
	var users []parley.ExportUser
	if err := readZipJSON(files, "users.json", &users); err != nil {
		return nil, err
	}
	var chans []parley.ExportChannel
	if err := readZipJSON(files, "channels.json", &chans); err != nil {
		return nil, err
	}
	src := &Source{Kind: parley.ImportParley, Skipped: map[string]int{}}
	if man.Workspace != nil {
		src.WorkspaceName = man.Workspace.Name
	}
	for _, u := range users {
		src.Users = append(src.Users, SrcUser{ExtID: u.ID, Email: u.Email, Handle: u.Handle, Name: u.Name,
			Title: u.Title, Admin: u.Role == parley.RoleAdmin || u.Role == parley.RoleOwner})
	}
	for _, c := range chans {
		sc := &SrcChannel{ExtID: c.ID, Name: c.Name, Kind: c.Kind, Topic: c.Topic, Purpose: c.Purpose,
			Creator: c.CreatedBy, CreatedAt: c.CreatedAt, ArchivedAt: c.ArchivedAt, Members: c.Members}
		name := "channels/" + c.ID + ".jsonl"
		sc.Load = func() ([]SrcMessage, error) {
			f := files[name]
			if f == nil {
				src.Problems = append(src.Problems, name+" is missing")
				return nil, nil
			}
			rc, err := f.Open()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			defer rc.Close()
			sc := bufio.NewScanner(rc)
			sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
			var out []SrcMessage
			for line := 1; sc.Scan(); line++ {
				var m parley.ExportMessage
				if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m.ID == "" {
					src.Problems = append(src.Problems, fmt.Sprintf("%s: line %d is not a message", name, line))
					continue
				}
				sm := SrcMessage{ExtID: m.ID, ThreadExtID: m.ThreadRootID, User: m.UserID, Text: m.Text,
					CreatedAt: m.CreatedAt, EditedAt: m.EditedAt, Deleted: m.Deleted, PinnedBy: m.PinnedBy, Files: m.Files,
					BotProfile: m.BotProfile}
				if m.PinnedAt != nil {
					sm.PinnedAt = *m.PinnedAt
				}
				for _, r := range m.Reactions {
					sm.Reactions = append(sm.Reactions, SrcReaction{Emoji: r.Emoji, Users: r.UserIDs})
				}
				out = append(out, sm)
			}
			if err := sc.Err(); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			return out, nil
		}
		src.Channels = append(src.Channels, sc)
	}
	return src, nil
}
