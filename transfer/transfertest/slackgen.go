// Package transfertest generates Slack exports of a realistic shape for
// the import's tests and benchmarks, with what Parley must make of each
// message beside it, so that a test can check an import field by field.
package transfertest

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"parley"
)

// Config shapes a generated export. Zero fields take the defaults.
type Config struct {
	Seed     uint64
	Messages int // about this many message entries, notices included (default 3000)
	Days     int // spread over this many days (default 12)
	Users    int // ordinary users besides the special ones (default 20)
	// Edge adds the edge cases: NUL, huge text, tombstone, orphan reply,
	// a missing user, a malformed day file, a bad emoji (default true
	// unless NoEdge).
	NoEdge bool
	// FileURLBase is where the files' url_private point (default
	// https://files.slack.example): a test serves them there.
	FileURLBase string
}

// Export is a generated export and what an import must make of it.
type Export struct {
	Zip      []byte
	Users    []User
	Channels []Channel
	// Messages are the messages that must be imported, by channel ext id,
	// in ts order (roots and replies mixed, as in the export).
	Messages map[string][]Message
	// Joins counts the join and leave notices (imported as member.joined
	// and member.left events; Memberships lists them by channel ext id,
	// in ts order); the other counts are of entries left out: "channel
	// notices …", and the private channels and DMs.
	Joins, Notices, Private, DMs, MPIMs int
	Memberships                         map[string][]Membership
	BadEmoji                            int
	Malformed                           []string // files that must be reported
	BadEntries                          int      // entries of valid files that are not messages
	Ghost                               string   // a user id messages name that users.json lacks ("" without edge cases)
	BadProfileParts                     int      // bot messages' usernames and icons Parley must drop as invalid
	Bot                                 string   // the ext id bot messages are mapped to ("bot:B0001")
	Start                               time.Time
}

// Membership is a join or leave notice: Type is parley.EventMemberJoined
// or EventMemberLeft.
type Membership struct {
	User, Type string
	At         time.Time
}

// User is an account of the export.
type User struct {
	ID, Name, RealName, Email string
	Deleted, Bot, Admin       bool
}

// Channel is a public channel of the export.
type Channel struct {
	ID, Name, Want string // Want: the name Parley gives it
	Archived       bool
	Members        []string
}

// Message is one message as Parley must show it.
type Message struct {
	ExtID, TS string
	Root      string // ext id of the root; "" for top-level ones (orphans included)
	User      string // ext user id ("bot:B0001" for the bot)
	// Want is the text with {{Uxxx}} where the handle of user Uxxx goes.
	Want      string
	At        time.Time
	EditedAt  *time.Time
	Reactions []Reaction // as Parley must count them, in order
	PinnedBy  string
	Files     int
	Deleted   bool
	Orphan    bool
	// Profile is the bot profile Parley must show it with (nil for none).
	Profile *Profile
}

// Profile is a bot message's name and icon as Parley must store them.
type Profile struct {
	Name, IconEmoji, IconURL string
}

// Reaction is an emoji with the users who reacted.
type Reaction struct {
	Emoji string
	Users []string
}

// TSOf formats a time as a Slack ts.
func TSOf(t time.Time) string {
	return fmt.Sprintf("%d.%06d", t.Unix(), t.Nanosecond()/1000)
}

type jsonMap = map[string]any

// Generate builds an export.
func Generate(cfg Config) *Export {
	if cfg.Messages <= 0 {
		cfg.Messages = 3000
	}
	if cfg.Days <= 0 {
		cfg.Days = 12
	}
	if cfg.Users <= 0 {
		cfg.Users = 20
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 7))
	start := time.Date(2024, 3, 1, 8, 0, 0, 0, time.UTC)
	fileBase := cfg.FileURLBase
	if fileBase == "" {
		fileBase = "https://files.slack.example"
	}
	ex := &Export{Messages: map[string][]Message{}, Memberships: map[string][]Membership{}, Bot: "bot:B0001", Start: start}

	// Users: Ada matches an account the tests create; the others are new.
	ex.Users = append(ex.Users, User{ID: "U0ADA", Name: "ada", RealName: "Ada Lovelace", Email: "ada@example.com", Admin: true})
	names := []string{"Zoë Ünal", "李雷", "José Núñez", "Ørjan Østby", "Priya Patel", "Łukasz Żak"}
	for i := range cfg.Users {
		rn := fmt.Sprintf("User %02d", i)
		if i < len(names) {
			rn = names[i]
		}
		ex.Users = append(ex.Users, User{ID: fmt.Sprintf("U%04d", i+1), Name: fmt.Sprintf("user%02d", i),
			RealName: rn, Email: fmt.Sprintf("user%02d@corp.example", i)})
	}
	ex.Users = append(ex.Users,
		User{ID: "U0DEL", Name: "gone", RealName: "Gone Person", Email: "gone@corp.example", Deleted: true},
		User{ID: "U0NOMAIL", Name: "nomail", RealName: "No Mail"},
		User{ID: "U0BOTU", Name: "deploybot", RealName: "Deploy Bot", Bot: true},
		User{ID: "U0DUP", Name: "ada", RealName: "Another Ada", Email: "ada2@corp.example"}, // same Slack name, another person
	)
	people := []string{}
	for _, u := range ex.Users {
		if !u.Bot {
			people = append(people, u.ID)
		}
	}
	if !cfg.NoEdge {
		ex.Ghost = "U0GHOST"
	}

	ex.Channels = []Channel{
		{ID: "C0GEN", Name: "general", Want: "general"},
		{ID: "C0RND", Name: "random", Want: "random"},
		{ID: "C0ENG", Name: "eng", Want: "eng"},
		{ID: "C0DES", Name: "Design Team", Want: "design-team"},
		{ID: "C0OLD", Name: "old-stuff", Want: "old-stuff", Archived: true},
	}
	for i := range ex.Channels {
		c := &ex.Channels[i]
		for j, p := range people {
			if i == 0 || (j+i)%2 == 0 {
				c.Members = append(c.Members, p)
			}
		}
	}

	type entry struct {
		ts  time.Time
		raw jsonMap
	}
	entries := map[string][]entry{} // by channel
	roots := map[string][]*Message{}
	rootRaw := map[string]jsonMap{}
	var pins []struct{ ch, ts, user string }
	step := time.Duration(cfg.Days) * 24 * time.Hour / time.Duration(cfg.Messages)
	at := start
	pick := func(list []string) string { return list[rng.IntN(len(list))] }
	for i := range cfg.Messages {
		at = at.Add(step/2 + time.Duration(rng.Int64N(int64(step)))).Truncate(time.Microsecond)
		ci := rng.IntN(len(ex.Channels))
		c := ex.Channels[ci]
		user := pick(c.Members)
		ts := TSOf(at)
		raw := jsonMap{"type": "message", "ts": ts, "user": user}
		m := &Message{ExtID: c.ID + "/" + ts, TS: ts, User: user, At: at}
		keep := true
		switch r := rng.IntN(100); {
		case r < 4:
			raw["subtype"] = "channel_join"
			raw["text"] = "<@" + user + "> has joined the channel"
			ex.Joins++
			ex.Memberships[c.ID] = append(ex.Memberships[c.ID], Membership{User: user, Type: parley.EventMemberJoined, At: at})
			keep = false
		case r < 5:
			raw["subtype"] = "channel_leave"
			raw["text"] = "<@" + user + "> has left the channel"
			ex.Joins++
			ex.Memberships[c.ID] = append(ex.Memberships[c.ID], Membership{User: user, Type: parley.EventMemberLeft, At: at})
			keep = false
		case r < 6:
			raw["subtype"] = "channel_topic"
			raw["text"] = "<@" + user + "> set the channel topic: things"
			ex.Notices++
			keep = false
		case r < 9:
			delete(raw, "user")
			raw["subtype"] = "bot_message"
			raw["bot_id"] = "B0001"
			raw["username"] = "ci"
			raw["text"] = fmt.Sprintf("Build #%d passed <https://ci.example/b/%d|details>", i, i)
			m.User = ex.Bot
			m.Profile = &Profile{Name: "ci"}
			img := func(n int) string { return fmt.Sprintf("https://avatars.slack-edge.example/ci/%d_%d.png", i, n) }
			switch i % 6 { // the shapes bot messages' names and icons come in
			case 1: // a webhook's icon_emoji, with Slack's images beside it: the largest wins
				raw["icons"] = jsonMap{"emoji": ":robot_face:", "image_36": img(36), "image_72": img(72), "image_48": img(48)}
				m.Profile.IconEmoji, m.Profile.IconURL = "robot_face", img(72)
			case 2: // the app's own icons, from bot_profile
				raw["bot_profile"] = jsonMap{"id": "B0001", "name": "ci", "icons": jsonMap{"image_36": img(36), "image_72": img(72)}}
				m.Profile.IconURL = img(72)
			case 3: // an icon_url of the payload (image_original) beats the app's
				raw["icons"] = jsonMap{"image_original": img(1024), "image_512": img(512)}
				raw["bot_profile"] = jsonMap{"id": "B0001", "name": "ci", "icons": jsonMap{"image_72": img(72)}}
				m.Profile.IconURL = img(1024)
			case 4: // parts Parley refuses: dropped, counted, the name kept
				raw["icons"] = jsonMap{"emoji": ":Not An Emoji!:", "image_72": "javascript:alert(1)", "image_48": "https://user:pw@x.example/i.png"}
				ex.BadProfileParts += 2
			case 5: // a refused emoji (NUL) beside a good image: the image kept
				raw["icons"] = jsonMap{"emoji": "ghost\x00", "image_48": "https://x.example/<script>", "image_36": img(36)}
				m.Profile.IconURL = img(36)
				ex.BadProfileParts++
			}
			m.Want = fmt.Sprintf("Build #%d passed [details](https://ci.example/b/%d)", i, i)
		case r < 11:
			raw["subtype"] = "bot_message"
			raw["user"] = "U0BOTU"
			raw["bot_id"] = "B0002"
			raw["text"] = "deployed &lt;main&gt; to prod"
			m.User = "U0BOTU"
			m.Want = "deployed <main> to prod"
		case r < 12:
			raw["subtype"] = "me_message"
			raw["text"] = "waves"
			m.Want = "_waves_"
		case r < 28 && len(roots[c.ID]) > 0:
			rs := roots[c.ID]
			root := rs[max(0, len(rs)-1-rng.IntN(min(len(rs), 8)))]
			raw["thread_ts"] = root.TS
			raw["parent_user_id"] = root.User
			raw["text"] = fmt.Sprintf("reply %d to <@%s>", i, root.User)
			m.Root = root.ExtID
			m.Want = fmt.Sprintf("reply %d to @{{%s}}", i, root.User)
			rr := rootRaw[root.ExtID]
			rr["thread_ts"] = root.TS
			rr["reply_count"] = toInt(rr["reply_count"]) + 1
			replies, _ := rr["replies"].([]jsonMap)
			rr["replies"] = append(replies, jsonMap{"user": user, "ts": ts})
		default:
			other := pick(people)
			oc := ex.Channels[rng.IntN(len(ex.Channels))]
			switch rng.IntN(6) {
			case 0:
				raw["text"] = fmt.Sprintf("hey <@%s>, see <#%s|%s> and <https://example.com/p?a=1&amp;b=%d|the doc>", other, oc.ID, oc.Name, i)
				m.Want = fmt.Sprintf("hey @{{%s}}, see #%s and [the doc](https://example.com/p?a=1&b=%d)", other, oc.Want, i)
			case 1:
				raw["text"] = fmt.Sprintf("<!here> *standup* in 5 — `x &lt; %d` 🎉", i)
				m.Want = fmt.Sprintf("@here **standup** in 5 — `x < %d` 🎉", i)
			case 2:
				raw["text"] = fmt.Sprintf("mail <mailto:a%d@example.com|a%d@example.com> or <https://x.example/%d>", i, i, i)
				m.Want = fmt.Sprintf("mail a%d@example.com or https://x.example/%d", i, i)
			case 3:
				raw["text"] = fmt.Sprintf("こんにちは %d — Ünïcödé ok ✓", i)
				m.Want = raw["text"].(string)
			default:
				raw["text"] = fmt.Sprintf("message %d about %s", i, strings.Repeat("things ", 1+rng.IntN(6)))
				m.Want = raw["text"].(string)
			}
		}
		if !keep {
			entries[c.ID] = append(entries[c.ID], entry{at, raw})
			continue
		}
		if rng.IntN(10) == 0 {
			e := at.Add(90 * time.Second).Truncate(time.Microsecond)
			raw["edited"] = jsonMap{"user": user, "ts": TSOf(e)}
			m.EditedAt = &e
		}
		if rng.IntN(8) == 0 {
			var rs []jsonMap
			emojis := []string{"thumbsup", "tada", "+1", "eyes", "white_check_mark"}
			for k := range 1 + rng.IntN(3) {
				name := emojis[(i+k)%len(emojis)]
				slackName := name
				if k == 1 {
					slackName += "::skin-tone-3"
				}
				var us []string
				for _, u := range people[:1+rng.IntN(4)] {
					us = append(us, u)
				}
				rs = append(rs, jsonMap{"name": slackName, "users": us, "count": len(us)})
				m.Reactions = mergeReaction(m.Reactions, name, us)
			}
			raw["reactions"] = rs
		}
		if rng.IntN(50) == 0 && m.Root == "" {
			raw["pinned_to"] = []string{c.ID}
			m.PinnedBy = m.User
			if rng.IntN(2) == 0 {
				pins = append(pins, struct{ ch, ts, user string }{c.ID, ts, "U0ADA"})
				m.PinnedBy = "U0ADA"
			}
		}
		if _, sub := raw["subtype"]; rng.IntN(30) == 0 && !sub {
			raw["subtype"] = "file_share"
			n := 1 + rng.IntN(2)
			var fs []jsonMap
			for k := range n {
				fs = append(fs, jsonMap{"id": fmt.Sprintf("F%d_%d", i, k), "name": fmt.Sprintf("shot-%d-%d.png", i, k),
					"title": "Screenshot", "mimetype": "image/png", "size": 1000 + i,
					"url_private": fmt.Sprintf("%s/F%d_%d/shot.png", fileBase, i, k)})
			}
			raw["files"] = fs
			m.Files = n
		}
		entries[c.ID] = append(entries[c.ID], entry{at, raw})
		ex.Messages[c.ID] = append(ex.Messages[c.ID], *m)
		if m.Root == "" && m.User != ex.Bot {
			cp := *m
			roots[c.ID] = append(roots[c.ID], &cp)
			rootRaw[m.ExtID] = raw
		}
	}

	if !cfg.NoEdge {
		c := ex.Channels[1] // random
		add := func(raw jsonMap, m Message) {
			at = at.Add(time.Minute)
			ts := TSOf(at)
			raw["type"], raw["ts"] = "message", ts
			m.ExtID, m.TS, m.At = c.ID+"/"+ts, ts, at
			entries[c.ID] = append(entries[c.ID], entry{at, raw})
			ex.Messages[c.ID] = append(ex.Messages[c.ID], m)
		}
		add(jsonMap{"user": "U0001", "text": "nul\x00byte"}, Message{User: "U0001", Want: "nulbyte"})
		huge := strings.Repeat("é", 45000)
		add(jsonMap{"user": "U0001", "text": huge}, Message{User: "U0001", Want: string([]rune(huge)[:40000-len([]rune("\n… (cut on import)"))]) + "\n… (cut on import)"})
		add(jsonMap{"user": ex.Ghost, "text": "I am not in users.json"}, Message{User: ex.Ghost, Want: "I am not in users.json"})
		add(jsonMap{"user": "U0001", "text": "nice", "reactions": []jsonMap{{"name": "Bad Emoji!", "users": []string{"U0002"}, "count": 1}}},
			Message{User: "U0001", Want: "nice"})
		ex.BadEmoji++
		// A deleted root that keeps its replies.
		tomb := jsonMap{"user": "USLACKBOT", "subtype": "tombstone", "text": "This message was deleted.", "hidden": true}
		add(tomb, Message{User: "USLACKBOT", Deleted: true})
		rootExt, rootTS := ex.Messages[c.ID][len(ex.Messages[c.ID])-1].ExtID, tomb["ts"].(string)
		tomb["thread_ts"], tomb["reply_count"] = rootTS, 2
		add(jsonMap{"user": "U0002", "text": "reply to a deleted root", "thread_ts": rootTS}, Message{User: "U0002", Want: "reply to a deleted root", Root: rootExt})
		add(jsonMap{"user": "U0003", "text": "another", "thread_ts": rootTS}, Message{User: "U0003", Want: "another", Root: rootExt})
		add(jsonMap{"user": "U0002", "text": "orphan reply", "thread_ts": "1000000000.000001"}, Message{User: "U0002", Want: "orphan reply", Orphan: true})
		add(jsonMap{"user": "U0002", "subtype": "file_share", "text": "", "files": []jsonMap{{"id": "FONLY", "name": "report.pdf", "mimetype": "application/pdf", "size": 5}}},
			Message{User: "U0002", Want: "(shared report.pdf)", Files: 1})
	}

	// The zip.
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	put := func(name string, v any) {
		w, err := zw.Create(name)
		if err != nil {
			panic(err)
		}
		var b []byte
		if s, ok := v.(string); ok {
			b = []byte(s)
		} else if b, err = json.MarshalIndent(v, "", " "); err != nil {
			panic(err)
		}
		if _, err := w.Write(b); err != nil {
			panic(err)
		}
	}
	var us []jsonMap
	for _, u := range ex.Users {
		p := jsonMap{"real_name": u.RealName, "display_name": u.Name, "title": ""}
		if u.Email != "" {
			p["email"] = u.Email
		}
		us = append(us, jsonMap{"id": u.ID, "team_id": "T0001", "name": u.Name, "real_name": u.RealName,
			"deleted": u.Deleted, "is_bot": u.Bot, "is_admin": u.Admin, "profile": p})
	}
	put("users.json", us)
	var cs []jsonMap
	for _, c := range ex.Channels {
		var ps []jsonMap
		for _, p := range pins {
			if p.ch == c.ID {
				ps = append(ps, jsonMap{"id": p.ts, "type": "C", "user": p.user, "created": start.Unix() + 86400*int64(cfg.Days)})
			}
		}
		cs = append(cs, jsonMap{"id": c.ID, "name": c.Name, "created": start.Add(-time.Hour).Unix(), "creator": "U0ADA",
			"is_archived": c.Archived, "is_general": c.ID == "C0GEN", "members": c.Members,
			"topic":   jsonMap{"value": "Topic of " + c.Name, "creator": "U0ADA", "last_set": 0},
			"purpose": jsonMap{"value": "Purpose of " + c.Name, "creator": "U0ADA", "last_set": 0}, "pins": ps})
	}
	put("channels.json", cs)
	put("groups.json", []jsonMap{{"id": "G0001", "name": "secret", "members": []string{"U0ADA"}}})
	put("dms.json", []jsonMap{{"id": "D0001", "members": []string{"U0ADA", "U0001"}}, {"id": "D0002", "members": []string{"U0ADA", "U0002"}}})
	put("mpims.json", []jsonMap{{"id": "G0002", "name": "mpdm-a--b--c-1", "members": []string{"U0ADA", "U0001", "U0002"}}})
	ex.Private, ex.DMs, ex.MPIMs = 1, 2, 1
	put("integration_logs.json", []jsonMap{})
	for _, c := range ex.Channels {
		days := map[string][]jsonMap{}
		for _, e := range entries[c.ID] {
			d := e.ts.Format("2006-01-02")
			days[d] = append(days[d], e.raw)
		}
		keys := make([]string, 0, len(days))
		for d := range days {
			keys = append(keys, d)
		}
		sort.Strings(keys)
		for k, d := range keys {
			list := days[d]
			if !cfg.NoEdge && c.ID == "C0ENG" && k == 1 {
				// An entry that is not a message object.
				put(c.Name+"/"+d+".json", append([]any{42}, toAny(list)...))
				ex.BadEntries++
				continue
			}
			put(c.Name+"/"+d+".json", list)
		}
	}
	if !cfg.NoEdge {
		// A day file cut off mid-way: reported, the rest imported.
		put("random/2099-01-01.json", `[{"type": "message", "user": "U0001", "text": "cut`)
		ex.Malformed = append(ex.Malformed, "random/2099-01-01.json")
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	ex.Zip = buf.Bytes()
	return ex
}

func toAny(list []jsonMap) []any {
	out := make([]any, len(list))
	for i, v := range list {
		out[i] = v
	}
	return out
}

func toInt(v any) int {
	n, _ := v.(int)
	return n
}

// mergeReaction adds users to emoji's reaction, one per user.
func mergeReaction(rs []Reaction, emoji string, users []string) []Reaction {
	for i := range rs {
		if rs[i].Emoji == emoji {
			for _, u := range users {
				if !contains(rs[i].Users, u) {
					rs[i].Users = append(rs[i].Users, u)
				}
			}
			return rs
		}
	}
	return append(rs, Reaction{Emoji: emoji, Users: append([]string(nil), users...)})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
