package transfer

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"parley"
)

// Reading a Slack export (Workspace settings → Import/Export data): a zip
// with users.json, channels.json (public channels), groups.json, dms.json
// and mpims.json (private channels and DMs, in exports that have them),
// and one directory per public channel, named after it, holding one JSON
// array of messages per day (general/2024-01-31.json). docs/import.md
// lists the fields read.

// maxSlackFile bounds one JSON file of the export (a day of a busy
// channel is a few MB).
const maxSlackFile = 256 << 20

type slackUser struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	RealName string `json:"real_name"`
	Deleted  bool   `json:"deleted"`
	IsAdmin  bool   `json:"is_admin"`
	IsOwner  bool   `json:"is_owner"`
	IsBot    bool   `json:"is_bot"`
	Profile  struct {
		Email       string `json:"email"`
		RealName    string `json:"real_name"`
		DisplayName string `json:"display_name"`
		Title       string `json:"title"`
	} `json:"profile"`
}

type slackText struct {
	Value string `json:"value"`
}

type slackPin struct {
	ID      string `json:"id"` // the message's ts
	User    string `json:"user"`
	Created int64  `json:"created"`
}

type slackChannel struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Created    int64      `json:"created"`
	Creator    string     `json:"creator"`
	IsArchived bool       `json:"is_archived"`
	Members    []string   `json:"members"`
	Topic      slackText  `json:"topic"`
	Purpose    slackText  `json:"purpose"`
	Pins       []slackPin `json:"pins"`
}

type slackFile struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	Title              string `json:"title"`
	Mimetype           string `json:"mimetype"`
	Size               int64  `json:"size"`
	URLPrivate         string `json:"url_private"`
	URLPrivateDownload string `json:"url_private_download"`
}

type slackMessage struct {
	Type       string `json:"type"`
	Subtype    string `json:"subtype"`
	User       string `json:"user"`
	BotID      string `json:"bot_id"`
	Username   string `json:"username"`
	BotProfile *struct {
		Name  string          `json:"name"`
		Icons json.RawMessage `json:"icons"`
	} `json:"bot_profile"`
	Icons      json.RawMessage `json:"icons"` // read leniently (iconsOf): a malformed one loses the icon, not the message
	Text       string          `json:"text"`
	TS         string          `json:"ts"`
	ThreadTS   string          `json:"thread_ts"`
	ReplyCount int             `json:"reply_count"`
	Reactions  []struct {
		Name  string   `json:"name"`
		Users []string `json:"users"`
		Count int      `json:"count"`
	} `json:"reactions"`
	PinnedTo []string `json:"pinned_to"`
	Edited   *struct {
		User string `json:"user"`
		TS   string `json:"ts"`
	} `json:"edited"`
	Files []slackFile `json:"files"`
}

// SlackTS turns a Slack timestamp ("1700000000.000100": seconds and
// microseconds) into a time.
func SlackTS(ts string) (time.Time, error) {
	sec, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil || s < 0 || len(frac) > 9 {
		return time.Time{}, fmt.Errorf("bad Slack timestamp %q", ts)
	}
	frac = (frac + "000000")[:6]
	us, err := strconv.ParseInt(frac, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad Slack timestamp %q", ts)
	}
	return time.Unix(s, us*1000).UTC(), nil
}

// ReadSlack reads a Slack export. A missing or malformed users.json or
// channels.json is an error; a malformed day file is a Problem of the
// source, and the rest is read.
func ReadSlack(r io.ReaderAt, size int64) (*Source, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("read Slack export: %w", err)
	}
	files := map[string]*zip.File{}
	root := ""
	for _, f := range zr.File {
		files[f.Name] = f
		if path.Base(f.Name) == "channels.json" && strings.Count(f.Name, "/") <= 1 {
			root = path.Dir(f.Name)
		}
	}
	if root == "." {
		root = ""
	} else if root != "" {
		root += "/"
	}
	if files[root+"parley-export.json"] != nil {
		return nil, fmt.Errorf("%w: this is a Parley export (import it as parley, not slack)", errMalformed)
	}
	src := &Source{Kind: parley.ImportSlack, Skipped: map[string]int{}}
	var users []slackUser
	if err := readZipJSON(files, root+"users.json", &users); err != nil {
		return nil, err
	}
	var chans []slackChannel
	if err := readZipJSON(files, root+"channels.json", &chans); err != nil {
		return nil, err
	}
	for _, other := range []struct{ file, what string }{
		{"groups.json", "private channels (groups.json)"},
		{"dms.json", "direct messages (dms.json)"},
		{"mpims.json", "group direct messages (mpims.json)"},
	} {
		var list []json.RawMessage
		if f := files[root+other.file]; f != nil {
			if err := readZipJSON(files, root+other.file, &list); err != nil {
				src.Problems = append(src.Problems, err.Error())
			}
			src.Skipped[other.what] += len(list)
		}
	}
	for _, u := range users {
		if u.ID == "" {
			src.Problems = append(src.Problems, "users.json: a user without an id")
			continue
		}
		name := firstOf(u.Profile.RealName, u.RealName, u.Profile.DisplayName, u.Name)
		src.Users = append(src.Users, SrcUser{ExtID: u.ID, Email: u.Profile.Email, Handle: firstOf(u.Name, u.ID),
			Name: name, Title: u.Profile.Title, Admin: u.IsAdmin || u.IsOwner})
	}
	// Bots that post without a user: one account per bot, named after it.
	src.Names = map[string]string{}
	taken := map[string]bool{}
	for _, c := range chans {
		if c.ID == "" || c.Name == "" {
			src.Problems = append(src.Problems, "channels.json: a channel without an id or name")
			continue
		}
		name := channelName(c.Name, c.ID, taken)
		sc := &SrcChannel{ExtID: c.ID, Name: name, Kind: parley.KindPublic, Topic: c.Topic.Value,
			Purpose: c.Purpose.Value, Creator: c.Creator, CreatedAt: time.Unix(c.Created, 0).UTC(),
			Members: c.Members, ConvertMentions: true}
		if c.IsArchived {
			t := time.Now().UTC().Truncate(time.Second)
			sc.ArchivedAt = &t
		}
		dir := root + c.Name + "/"
		pins := map[string]slackPin{}
		for _, p := range c.Pins {
			pins[p.ID] = p
		}
		sc.Load = func() ([]SrcMessage, error) {
			var days []string
			for n := range files {
				if strings.HasPrefix(n, dir) && strings.HasSuffix(n, ".json") && !strings.Contains(n[len(dir):], "/") {
					days = append(days, n)
				}
			}
			slices.Sort(days)
			var out []SrcMessage
			for _, d := range days {
				var msgs []json.RawMessage
				if err := readZipJSON(files, d, &msgs); err != nil {
					src.Problems = append(src.Problems, err.Error())
					continue
				}
				for i, raw := range msgs {
					m, skip, err := slackToSrc(raw, c.ID, pins)
					switch {
					case err != nil:
						src.Problems = append(src.Problems, fmt.Sprintf("%s: message %d: %v", d, i, err))
					case skip != "":
						src.Skipped[skip]++
					default:
						if m.botName != "" {
							src.Names[m.User] = m.botName
						}
						if m.badProfile > 0 {
							src.Skipped[SkipSlackProfile] += m.badProfile
						}
						out = append(out, m.SrcMessage)
					}
				}
			}
			return out, nil
		}
		src.Channels = append(src.Channels, sc)
	}
	return src, nil
}

// channelName makes a Slack channel name a valid, unused Parley name.
func channelName(name, id string, taken map[string]bool) string {
	n := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, name)
	n = strings.TrimLeft(n, "._-")
	if len(n) > 80 {
		n = n[:80]
	}
	if n == "" {
		n = "channel-" + strings.ToLower(id)
	}
	base := n
	for i := 2; taken[n]; i++ {
		s := "-" + strconv.Itoa(i)
		n = base[:min(len(base), 80-len(s))] + s
	}
	taken[n] = true
	return n
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}

// Subtypes left out, by the reason counted in the summary.
var slackSkips = map[string]string{
	"channel_topic":     "channel notices (topic, purpose, name, archive, pins, integrations)",
	"channel_purpose":   "channel notices (topic, purpose, name, archive, pins, integrations)",
	"channel_name":      "channel notices (topic, purpose, name, archive, pins, integrations)",
	"channel_archive":   "channel notices (topic, purpose, name, archive, pins, integrations)",
	"channel_unarchive": "channel notices (topic, purpose, name, archive, pins, integrations)",
	"pinned_item":       "channel notices (topic, purpose, name, archive, pins, integrations)",
	"unpinned_item":     "channel notices (topic, purpose, name, archive, pins, integrations)",
	"bot_add":           "channel notices (topic, purpose, name, archive, pins, integrations)",
	"bot_remove":        "channel notices (topic, purpose, name, archive, pins, integrations)",
}

// slackMsg is a message read, with the name of the bot that posted it.
type slackMsg struct {
	SrcMessage
	botName    string
	badProfile int // parts of its bot profile dropped as invalid
}

// SkipSlackProfile (a reason of Summary.Skipped) counts the parts of bot messages' profiles (a
// username, an icon emoji, an icon URL) that parley.ValidateBotProfile
// refuses: each is dropped, the rest of the profile kept.
const SkipSlackProfile = "bot message names or icons Parley does not take (dropped, the rest kept)"

// slackProfile is the bot profile of a bot's message: the name from
// username (else bot_profile.name), the emoji from icons.emoji, the URL
// from the largest icons.image_* (else bot_profile.icons.image_*). Each
// part is checked on its own; one refused is dropped and counted in bad.
func slackProfile(m *slackMessage) (p *parley.BotProfile, bad int) {
	var name string
	var botIcons map[string]json.RawMessage
	if m.BotProfile != nil {
		name, botIcons = m.BotProfile.Name, iconsOf(m.BotProfile.Icons)
	}
	icons := iconsOf(m.Icons)
	name = firstOf(m.Username, name)
	var out parley.BotProfile
	keep := func(part parley.BotProfile, set func(*parley.BotProfile)) bool {
		v, err := parley.ValidateBotProfile(&part)
		if err != nil {
			return false
		}
		if v != nil {
			set(v)
		}
		return true
	}
	if strings.TrimSpace(name) != "" && !keep(parley.BotProfile{Name: name}, func(v *parley.BotProfile) { out.Name = v.Name }) {
		bad++
	}
	if e := iconString(icons["emoji"]); strings.TrimSpace(e) != "" &&
		!keep(parley.BotProfile{IconEmoji: e}, func(v *parley.BotProfile) { out.IconEmoji = v.IconEmoji }) {
		bad++
	}
	urls := iconImages(icons)
	if len(urls) == 0 {
		urls = iconImages(botIcons)
	}
	if len(urls) > 0 && !slices.ContainsFunc(urls, func(u string) bool {
		return keep(parley.BotProfile{IconURL: u}, func(v *parley.BotProfile) { out.IconURL = v.IconURL })
	}) {
		bad++
	}
	if out == (parley.BotProfile{}) {
		return nil, bad
	}
	return &out, bad
}

// iconsOf reads an icons object; anything else is none.
func iconsOf(raw json.RawMessage) map[string]json.RawMessage {
	var icons map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &icons) != nil {
		return nil
	}
	return icons
}

// iconString is an icons value that is a string ("" otherwise).
func iconString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// iconImages lists the non-empty image_* URLs of an icons object, the
// largest first: image_original, then by the size in the key (image_72
// before image_48).
func iconImages(icons map[string]json.RawMessage) []string {
	type img struct {
		size int
		url  string
	}
	var imgs []img
	for k, raw := range icons {
		rest, ok := strings.CutPrefix(k, "image_")
		u := iconString(raw)
		if !ok || strings.TrimSpace(u) == "" {
			continue
		}
		size, err := strconv.Atoi(rest)
		switch {
		case rest == "original":
			size = 1 << 30
		case err != nil || size <= 0:
			continue
		}
		imgs = append(imgs, img{size, u})
	}
	slices.SortFunc(imgs, func(a, b img) int { return b.size - a.size })
	out := make([]string, len(imgs))
	for i, m := range imgs {
		out[i] = m.url
	}
	return out
}

// slackToSrc reads one message. skip names why it is left out.
func slackToSrc(raw json.RawMessage, channelID string, pins map[string]slackPin) (slackMsg, string, error) {
	var m slackMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return slackMsg{}, "", fmt.Errorf("not a message: %v", err)
	}
	if m.Type != "" && m.Type != "message" {
		return slackMsg{}, "entries that are not messages", nil
	}
	if r, ok := slackSkips[m.Subtype]; ok {
		return slackMsg{}, r, nil
	}
	at, err := SlackTS(m.TS)
	if err != nil {
		return slackMsg{}, "", err
	}
	var res slackMsg
	out := &res.SrcMessage
	*out = SrcMessage{ExtID: channelID + "/" + m.TS, User: m.User, Text: m.Text, CreatedAt: at}
	if out.User == "" { // a bot (or an integration) without a user of its own
		bot := firstOf(m.BotID, m.Username)
		if m.BotProfile != nil {
			bot = firstOf(m.BotID, m.BotProfile.Name, m.Username)
		}
		if bot == "" {
			return slackMsg{}, "", fmt.Errorf("message %s has no user", m.TS)
		}
		out.User = "bot:" + bot
		res.botName = firstOf(m.Username, bot)
		if m.BotProfile != nil {
			res.botName = firstOf(m.BotProfile.Name, res.botName)
		}
	}
	if m.ThreadTS != "" && m.ThreadTS != m.TS {
		out.ThreadExtID = channelID + "/" + m.ThreadTS
	}
	switch m.Subtype {
	case "channel_join", "group_join":
		// Membership notices: an event in the log, no message (Slack's
		// text "<@U…> has joined the channel" says nothing more).
		*out = SrcMessage{ExtID: out.ExtID, User: out.User, CreatedAt: at, Notice: parley.EventMemberJoined}
		return res, "", nil
	case "channel_leave", "group_leave":
		*out = SrcMessage{ExtID: out.ExtID, User: out.User, CreatedAt: at, Notice: parley.EventMemberLeft}
		return res, "", nil
	case "me_message":
		out.Text = "_" + out.Text + "_"
	case "tombstone":
		out.Deleted, out.Text = true, ""
	}
	if (m.Subtype == "bot_message" || m.BotID != "") && !out.Deleted {
		out.BotProfile, res.badProfile = slackProfile(&m)
	}
	if m.Edited != nil && m.Edited.TS != "" {
		if t, err := SlackTS(m.Edited.TS); err == nil {
			out.EditedAt = &t
		}
	}
	for _, r := range m.Reactions {
		out.Reactions = append(out.Reactions, SrcReaction{Emoji: r.Name, Users: r.Users})
	}
	if p, ok := pins[m.TS]; ok {
		out.PinnedBy, out.PinnedAt = firstOf(p.User, out.User), time.Unix(p.Created, 0).UTC()
	} else if slices.Contains(m.PinnedTo, channelID) {
		out.PinnedBy, out.PinnedAt = out.User, at
	}
	for _, f := range m.Files {
		if f.ID == "" {
			continue
		}
		out.Files = append(out.Files, parley.ImportFile{ExtID: f.ID, Name: firstOf(f.Name, f.Title, f.ID), Title: f.Title,
			MimeType: f.Mimetype, Size: f.Size, URL: firstOf(f.URLPrivateDownload, f.URLPrivate)})
	}
	return res, "", nil
}

// readZipJSON decodes one file of the zip into v.
func readZipJSON(files map[string]*zip.File, name string, v any) error {
	f := files[name]
	if f == nil {
		return fmt.Errorf("%w: %s is missing", errMalformed, name)
	}
	rc, err := f.Open()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer rc.Close()
	b, err := readAllLimited(rc, maxSlackFile)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %s: %v", errMalformed, name, err)
	}
	return nil
}
