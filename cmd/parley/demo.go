package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"parley"
	"parley/auth"
)

// The demo workspace: five people, a few channels, DMs and some history, so
// that a fresh `parley serve --demo` has something to look at. It is seeded
// through the same Store methods the API uses, once: if its first user
// exists, nothing is done.
const (
	demoDomain   = "demo.parley.dev"
	demoPassword = "parley-demo"
	demoSlug     = "demo"
)

var demoOwnerEmail = "alice@" + demoDomain

// demoPerson is one seeded user; the first is the workspace owner.
type demoPerson struct {
	handle, name, title string
}

var demoPeople = []demoPerson{
	{"alice", "Alice Moreau", "Engineering manager"},
	{"bob", "Bob Okafor", "Backend engineer"},
	{"carol", "Carol Lindqvist", "Product designer"},
	{"dave", "Dave Tanaka", "Site reliability engineer"},
	{"erin", "Erin Walsh", "Product manager"},
}

// demoInfo is what the startup banner says about the demo.
type demoInfo struct {
	WorkspaceID string
	Seeded      bool // false when an earlier run had seeded it
}

func (d *demoInfo) print(w io.Writer) {
	others := make([]string, 0, len(demoPeople)-1)
	for _, p := range demoPeople[1:] {
		others = append(others, p.handle)
	}
	fmt.Fprintf(w, "Demo workspace %q (id %s): log in as %s / %s\n", "Demo", d.WorkspaceID, demoOwnerEmail, demoPassword)
	fmt.Fprintf(w, "Other demo users: %s, each @%s with the same password\n", strings.Join(others, ", "), demoDomain)
}

// seeder runs the seeding steps and keeps the first error, so that the
// script below reads as a story rather than as error handling.
type seeder struct {
	ctx   context.Context
	store parley.Store
	err   error
	users map[string]*parley.User // by handle
}

func (s *seeder) fail(what string, err error) {
	if s.err == nil && err != nil {
		s.err = fmt.Errorf("%s: %w", what, err)
	}
}

func (s *seeder) id(handle string) string { return s.users[handle].ID }

func (s *seeder) post(handle string, ch *parley.Channel, text string) *parley.Message {
	return s.reply(handle, ch, nil, text)
}

func (s *seeder) reply(handle string, ch *parley.Channel, root *parley.Message, text string) *parley.Message {
	if s.err != nil || ch == nil {
		return nil
	}
	nm := parley.NewMessage{Text: text}
	if root != nil {
		nm.ThreadRootID = root.ID
	}
	m, _, err := s.store.PostMessage(s.ctx, s.id(handle), ch.ID, nm)
	s.fail("post in "+ch.Name, err)
	return m
}

func (s *seeder) react(handle string, m *parley.Message, emoji string) {
	if s.err != nil || m == nil {
		return
	}
	_, err := s.store.AddReaction(s.ctx, s.id(handle), m.ID, emoji)
	s.fail("react", err)
}

func (s *seeder) join(ch *parley.Channel, handles ...string) {
	for _, h := range handles {
		if s.err != nil {
			return
		}
		_, err := s.store.JoinChannel(s.ctx, s.id(h), ch.ID)
		s.fail("join "+ch.Name, err)
	}
}

func (s *seeder) channel(owner, wsID, name, topic string, kind parley.ChannelKind) *parley.Channel {
	if s.err != nil {
		return nil
	}
	ch, err := s.store.CreateChannel(s.ctx, s.id(owner), wsID, parley.NewChannel{Name: name, Kind: kind, Topic: topic})
	s.fail("create #"+name, err)
	return ch
}

// seedDemo creates the demo workspace unless its owner already exists.
func seedDemo(ctx context.Context, store parley.Store, log *slog.Logger) (*demoInfo, error) {
	if u, _, err := store.UserCredentials(ctx, demoOwnerEmail); err == nil {
		wss, err := store.ListWorkspaces(ctx, u.ID)
		if err != nil {
			return nil, fmt.Errorf("list demo workspaces: %w", err)
		}
		info := &demoInfo{}
		for _, w := range wss {
			if w.Slug == demoSlug {
				info.WorkspaceID = w.ID
			}
		}
		log.Info("demo already seeded", "workspace_id", info.WorkspaceID)
		return info, nil
	} else if parley.ErrorCode(err) != parley.ENOTFOUND {
		return nil, fmt.Errorf("look up demo user: %w", err)
	}

	s := &seeder{ctx: ctx, store: store, users: map[string]*parley.User{}}
	for _, p := range demoPeople {
		hash, err := auth.HashPassword(demoPassword)
		if err != nil {
			return nil, err
		}
		u, err := store.CreateUser(ctx, parley.NewUser{
			Email: p.handle + "@" + demoDomain, Name: p.name, Handle: p.handle, PasswordHash: hash,
		})
		if err != nil {
			return nil, fmt.Errorf("create demo user %s: %w", p.handle, err)
		}
		title := p.title
		if _, err := store.UpdateMe(ctx, u.ID, parley.UserPatch{Title: &title}); err != nil {
			return nil, fmt.Errorf("set title of %s: %w", p.handle, err)
		}
		s.users[p.handle] = u
	}
	ws, err := store.CreateWorkspace(ctx, s.id("alice"), "Demo", demoSlug)
	if err != nil {
		return nil, fmt.Errorf("create demo workspace: %w", err)
	}
	inv, err := store.CreateInvite(ctx, s.id("alice"), ws.ID, parley.InviteParams{})
	if err != nil {
		return nil, fmt.Errorf("create demo invite: %w", err)
	}
	for _, p := range demoPeople[1:] {
		if _, err := store.AcceptInvite(ctx, s.id(p.handle), inv.Code); err != nil {
			return nil, fmt.Errorf("%s joins the demo: %w", p.handle, err)
		}
	}
	found, err := store.ListChannels(ctx, s.id("alice"), ws.ID, parley.ChannelQuery{Q: "general", Limit: 1})
	if err != nil || len(found.Channels) != 1 || found.Channels[0].Name != "general" {
		return nil, fmt.Errorf("find the demo's #general: %v", err)
	}
	general := &found.Channels[0]
	s.script(ws.ID, general)
	if s.err != nil {
		return nil, s.err
	}
	log.Info("demo seeded", "workspace_id", ws.ID, "users", len(demoPeople))
	return &demoInfo{WorkspaceID: ws.ID, Seeded: true}, nil
}

// script is the demo's content: channels, memberships, conversations.
func (s *seeder) script(wsID string, general *parley.Channel) {
	random := s.channel("alice", wsID, "random", "Non-work banter and water-cooler links", parley.KindPublic)
	eng := s.channel("bob", wsID, "engineering", "Builds, deploys and code review", parley.KindPublic)
	leads := s.channel("alice", wsID, "leads", "Team leads only", parley.KindPrivate)
	if s.err != nil {
		return
	}
	s.join(random, "bob", "carol", "dave", "erin")
	s.join(eng, "alice", "dave", "erin")
	if _, err := s.store.AddMembers(s.ctx, s.id("alice"), leads.ID, []string{s.id("bob")}); err != nil {
		s.fail("add bob to #leads", err)
		return
	}

	welcome := s.post("alice", general, "Welcome to the Parley demo workspace! :wave: This is #general, where everyone is.")
	s.post("erin", general, "Morning all. Planning for the 2.0 release starts Thursday, agenda is in the doc.")
	s.post("carol", general, "New onboarding mockups are up for review, comments welcome before Friday.")
	s.post("dave", general, "Heads-up: maintenance on the staging database tonight from 22:00 to 22:30 UTC.")
	s.post("bob", general, "@dave thanks, I'll hold the migration until you're done.")
	s.post("alice", general, "Reminder: all-hands is at 16:00 today, bring questions.")
	s.react("bob", welcome, "wave")
	s.react("carol", welcome, "wave")
	s.react("erin", welcome, "tada")
	if s.err == nil && welcome != nil {
		_, err := s.store.Pin(s.ctx, s.id("alice"), welcome.ID)
		s.fail("pin the welcome message", err)
	}

	s.post("dave", random, "Who else saw the aurora last night? Best one in years.")
	s.post("carol", random, "Missed it, clouds all evening. Photos please!")
	coffee := s.post("bob", random, "The new espresso machine on the 3rd floor is a big improvement.")
	s.react("erin", coffee, "coffee")
	s.react("alice", coffee, "coffee")
	s.post("erin", random, "Book club pick for next month: The Left Hand of Darkness.")

	root := s.post("bob", eng, "PR #412 moves the message store to group commit. Could someone review it today?")
	s.reply("dave", eng, root, "On it. Did you run the benchmark on the big instance?")
	s.reply("bob", eng, root, "Yes: about 6x the write throughput at the same p99. Numbers are in the PR description.")
	s.reply("alice", eng, root, "Nice. Let's ship it behind a flag first and watch it for a day.")
	s.reply("dave", eng, root, "Approved with two small comments.")
	s.react("alice", root, "eyes")
	s.post("dave", eng, "Deploy of 1.8.3 is done, all health checks green.")
	s.post("erin", eng, "Can we get the search latency dashboard linked from the runbook?")
	s.post("alice", eng, "@erin done, it's under Observability.")

	s.post("alice", leads, "Headcount for next quarter is approved: two backend roles, one SRE.")
	s.post("bob", leads, "Great. I'll draft the backend job descriptions this week.")
	s.post("alice", leads, "Please keep this quiet until the announcement on Monday.")

	if s.err != nil {
		return
	}
	dm, _, err := s.store.OpenDM(s.ctx, s.id("alice"), wsID, []string{s.id("bob")})
	if err != nil {
		s.fail("open the alice-bob DM", err)
		return
	}
	s.post("alice", dm, "Hey Bob, do you have a minute to talk about the on-call rotation?")
	s.post("bob", dm, "Sure, after standup?")
	s.post("alice", dm, "Perfect, I'll grab a room.")

	group, _, err := s.store.OpenDM(s.ctx, s.id("carol"), wsID, []string{s.id("dave"), s.id("erin")})
	if err != nil {
		s.fail("open the group DM", err)
		return
	}
	s.post("carol", group, "Lunch at the noodle place on Friday?")
	s.post("dave", group, "I'm in.")
	s.post("erin", group, "Same, but can we make it 12:30?")
}
