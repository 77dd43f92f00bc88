package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"parley"
)

// Contract tests of accounts, sessions, profiles and user lookups.

// signupAs creates a user with exactly that handle (and a matching email).
func signupAs(tb testing.TB, s parley.Store, handle, name string) *parley.User {
	tb.Helper()
	u, err := s.CreateUser(ctx(tb), parley.NewUser{
		Email: handle + "@example.com", Name: name, Handle: handle, PasswordHash: "hash-of-" + handle,
	})
	if err != nil {
		tb.Fatalf("create user %s: %v", handle, err)
	}
	return u
}

// userEventsOf returns the published events of type typ about user id, with
// their payloads decoded.
func userEventsOf(tb testing.TB, rec *Recorder, typ, id string) ([]parley.Event, []parley.User) {
	tb.Helper()
	var evs []parley.Event
	var users []parley.User
	for _, e := range rec.OfType(typ) {
		var d parley.UserEventData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			tb.Fatalf("decode %s: %v", typ, err)
		}
		if d.User != nil && d.User.ID == id {
			evs = append(evs, e)
			users = append(users, *d.User)
		}
	}
	return evs, users
}

func handlesOf(users []parley.User) []string {
	out := make([]string, len(users))
	for i, u := range users {
		out[i] = u.Handle
	}
	return out
}

func init() {
	register("Users/Signup", func(t *testing.T, open Opener) {
		rec := &Recorder{}
		s := open(t, rec)
		u, err := s.CreateUser(ctx(t), parley.NewUser{
			Email: "  Ada@Example.COM ", Name: "Ada Lovelace", Handle: "ada", PasswordHash: "h1",
		})
		NoErr(t, err)
		if u.ID == "" || u.Email != "ada@example.com" || u.Handle != "ada" || u.Name != "Ada Lovelace" ||
			u.CreatedAt.IsZero() || u.Deactivated || u.Status != nil {
			t.Fatalf("created user = %+v", u)
		}
		me, err := s.GetMe(ctx(t), u.ID)
		NoErr(t, err)
		if me.Email != "ada@example.com" || me.Handle != "ada" || !me.CreatedAt.Equal(u.CreatedAt) {
			t.Fatalf("GetMe = %+v, want %+v", me, u)
		}
		got, hash, err := s.UserCredentials(ctx(t), "ADA@example.com")
		NoErr(t, err)
		if got.ID != u.ID || got.Email != "ada@example.com" || hash != "h1" {
			t.Fatalf("credentials = %+v %q", got, hash)
		}
		_, _, err = s.UserCredentials(ctx(t), "nobody@example.com")
		Code(t, err, parley.ENOTFOUND)
		_, _, err = s.UserCredentials(ctx(t), "not an email")
		Code(t, err, parley.ENOTFOUND)
		_, err = s.GetMe(ctx(t), "Unope")
		Code(t, err, parley.ENOTFOUND)
		if evs := rec.Events(); len(evs) != 0 {
			t.Fatalf("signup published %d events, want none", len(evs))
		}
	})

	register("Users/SignupValidation", func(t *testing.T, open Opener) {
		s := open(t, nil)
		ok := parley.NewUser{Email: "a@example.com", Name: "A", Handle: "aa", PasswordHash: "h"}
		for name, mod := range map[string]func(*parley.NewUser){
			"bad email":    func(u *parley.NewUser) { u.Email = "no-at-sign" },
			"empty email":  func(u *parley.NewUser) { u.Email = "" },
			"bad handle":   func(u *parley.NewUser) { u.Handle = "Has Space" },
			"short handle": func(u *parley.NewUser) { u.Handle = "a" },
			"blank name":   func(u *parley.NewUser) { u.Name = "  " },
			"long name":    func(u *parley.NewUser) { u.Name = strings.Repeat("n", parley.MaxNameLen+1) },
			"no password":  func(u *parley.NewUser) { u.PasswordHash = "" },
		} {
			nu := ok
			mod(&nu)
			_, err := s.CreateUser(ctx(t), nu)
			if parley.ErrorCode(err) != parley.EINVALID {
				t.Errorf("%s: error = %v, want %s", name, err, parley.EINVALID)
			}
		}
		_, err := s.CreateUser(ctx(t), ok)
		NoErr(t, err)
	})

	register("Users/SignupConflicts", func(t *testing.T, open Opener) {
		s := open(t, nil)
		signupAs(t, s, "grace", "Grace")
		_, err := s.CreateUser(ctx(t), parley.NewUser{Email: "GRACE@example.com", Name: "G", Handle: "other", PasswordHash: "h"})
		Code(t, err, parley.ECONFLICT)
		if !strings.Contains(parley.ErrorMessage(err), "email") {
			t.Errorf("email conflict message = %q", parley.ErrorMessage(err))
		}
		_, err = s.CreateUser(ctx(t), parley.NewUser{Email: "g2@example.com", Name: "G", Handle: "grace", PasswordHash: "h"})
		Code(t, err, parley.ECONFLICT)
		if !strings.Contains(parley.ErrorMessage(err), "handle") {
			t.Errorf("handle conflict message = %q", parley.ErrorMessage(err))
		}
	})

	register("Users/SignupRace", func(t *testing.T, open Opener) {
		s := open(t, nil)
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = s.CreateUser(ctx(t), parley.NewUser{
					Email: fmt.Sprintf("racer%d@example.com", i), Name: "Racer", Handle: "racer", PasswordHash: "h",
				})
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch parley.ErrorCode(err) {
			case "":
				won++
			case parley.ECONFLICT:
			default:
				t.Fatalf("racing signup: %v", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d signups with one handle succeeded, want 1", won)
		}
	})

	register("Users/Sessions", func(t *testing.T, open Opener) {
		rec := &Recorder{}
		s := open(t, rec)
		u := MustUser(t, s, "sess")
		now := time.Now()
		NoErr(t, s.CreateSession(ctx(t), parley.Session{TokenHash: "live", UserID: u.ID, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}))
		NoErr(t, s.CreateSession(ctx(t), parley.Session{TokenHash: "other", UserID: u.ID, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}))
		NoErr(t, s.CreateSession(ctx(t), parley.Session{TokenHash: "old", UserID: u.ID, CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: now.Add(-time.Hour)}))

		sess, err := s.SessionByToken(ctx(t), "live")
		NoErr(t, err)
		if sess.UserID != u.ID || sess.TokenHash != "live" || sess.ExpiresAt.Sub(now.Add(time.Hour)).Abs() > time.Millisecond {
			t.Fatalf("session = %+v", sess)
		}
		_, err = s.SessionByToken(ctx(t), "unknown")
		Code(t, err, parley.EUNAUTHORIZED)
		_, err = s.SessionByToken(ctx(t), "old")
		Code(t, err, parley.EUNAUTHORIZED)

		NoErr(t, s.RevokeSession(ctx(t), "live"))
		_, err = s.SessionByToken(ctx(t), "live")
		Code(t, err, parley.EUNAUTHORIZED)
		if _, err := s.SessionByToken(ctx(t), "other"); err != nil {
			t.Fatalf("revoking one session ended another: %v", err)
		}
		NoErr(t, s.RevokeSession(ctx(t), "live"))    // idempotent
		NoErr(t, s.RevokeSession(ctx(t), "unknown")) // nothing to do

		evs := rec.OfType(parley.EventSessionRevoked)
		if len(evs) != 1 {
			t.Fatalf("%d session.revoked events, want 1", len(evs))
		}
		var d parley.SessionRevokedData
		NoErr(t, json.Unmarshal(evs[0].Data, &d))
		if d.TokenHash != "live" || len(evs[0].Topics) != 1 || evs[0].Topics[0] != parley.TopicUser(u.ID) {
			t.Fatalf("session.revoked = %+v (%s)", evs[0], evs[0].Data)
		}

		err = s.CreateSession(ctx(t), parley.Session{TokenHash: "x", UserID: "Unobody", ExpiresAt: now.Add(time.Hour)})
		Code(t, err, parley.ENOTFOUND)
	})

	register("Users/UpdateMe", func(t *testing.T, open Opener) {
		rec := &Recorder{}
		s := open(t, rec)
		u := MustUser(t, s, "upd")
		ws1, ws2 := MustWorkspace(t, s, u), MustWorkspace(t, s, u)

		name, title, avatar := "New Name", "Engineer", "abc123"
		me, err := s.UpdateMe(ctx(t), u.ID, parley.UserPatch{Name: &name, Title: &title, AvatarHash: &avatar})
		NoErr(t, err)
		if me.Name != name || me.Title != title || me.AvatarHash != avatar || me.Email != u.Email ||
			me.UpdatedAt.Before(u.UpdatedAt) {
			t.Fatalf("updated = %+v", me)
		}
		got, err := s.GetMe(ctx(t), u.ID)
		NoErr(t, err)
		if got.Name != name || got.Title != title || got.AvatarHash != avatar {
			t.Fatalf("GetMe after update = %+v", got)
		}

		evs, users := userEventsOf(t, rec, parley.EventUserUpdated, u.ID)
		if len(evs) != 2 {
			t.Fatalf("%d user.updated events, want one per workspace (2)", len(evs))
		}
		seen := map[string]bool{}
		for i, e := range evs {
			// The sessions that have the user in view, the user's own and
			// the caches: not every session of the workspace.
			if !slices.Equal(e.Topics, []string{parley.TopicProfile(u.ID), parley.TopicUser(u.ID), parley.TopicDirectory(e.WorkspaceID)}) {
				t.Errorf("user.updated topics = %v for workspace %s", e.Topics, e.WorkspaceID)
			}
			if users[i].Email != "" || users[i].Name != name {
				t.Errorf("user.updated payload = %+v (email must be hidden)", users[i])
			}
			seen[e.WorkspaceID] = true
		}
		if !seen[ws1.ID] || !seen[ws2.ID] {
			t.Fatalf("user.updated went to %v, want %s and %s", seen, ws1.ID, ws2.ID)
		}

		// Only the given fields change.
		title2 := ""
		me, err = s.UpdateMe(ctx(t), u.ID, parley.UserPatch{Title: &title2})
		NoErr(t, err)
		if me.Name != name || me.Title != "" || me.AvatarHash != avatar {
			t.Fatalf("partial update = %+v", me)
		}

		blank, long, badAvatar := " ", strings.Repeat("t", parley.MaxTitleLen+1), "not/alnum"
		for what, p := range map[string]parley.UserPatch{
			"blank name":  {Name: &blank},
			"long title":  {Title: &long},
			"bad avatar":  {AvatarHash: &badAvatar},
			"mixed valid": {Name: &name, Title: &long},
		} {
			_, err := s.UpdateMe(ctx(t), u.ID, p)
			if parley.ErrorCode(err) != parley.EINVALID {
				t.Errorf("%s: error = %v, want %s", what, err, parley.EINVALID)
			}
		}
	})

	register("Users/Status", func(t *testing.T, open Opener) {
		rec := &Recorder{}
		s := open(t, rec)
		u := MustUser(t, s, "stat")
		ws := MustWorkspace(t, s, u)

		me, err := s.SetStatus(ctx(t), u.ID, parley.Status{Emoji: "palm_tree", Text: "On holiday"})
		NoErr(t, err)
		if me.Status == nil || me.Status.Emoji != "palm_tree" || me.Status.Text != "On holiday" || me.Status.ExpiresAt != nil {
			t.Fatalf("status = %+v", me.Status)
		}
		evs, users := userEventsOf(t, rec, parley.EventUserStatus, u.ID)
		if len(evs) != 1 || evs[0].WorkspaceID != ws.ID || users[0].Status == nil || users[0].Email != "" {
			t.Fatalf("user.status events = %+v", evs)
		}
		if !slices.Equal(evs[0].Topics, []string{parley.TopicProfile(u.ID), parley.TopicUser(u.ID), parley.TopicDirectory(ws.ID)}) {
			t.Fatalf("user.status topics = %v, want the profile, user and directory topics", evs[0].Topics)
		}

		// Text alone is a status too; then clearing removes it.
		me, err = s.SetStatus(ctx(t), u.ID, parley.Status{Text: "busy"})
		NoErr(t, err)
		if me.Status == nil || me.Status.Emoji != "" || me.Status.Text != "busy" {
			t.Fatalf("text-only status = %+v", me.Status)
		}
		me, err = s.SetStatus(ctx(t), u.ID, parley.Status{})
		NoErr(t, err)
		if me.Status != nil {
			t.Fatalf("cleared status = %+v", me.Status)
		}
		if got, err := s.GetMe(ctx(t), u.ID); err != nil || got.Status != nil {
			t.Fatalf("GetMe after clear = %+v, %v", got, err)
		}

		past := time.Now().Add(-time.Minute)
		for what, st := range map[string]parley.Status{
			"bad emoji":    {Emoji: "Not An Emoji", Text: "x"},
			"long text":    {Text: strings.Repeat("x", parley.MaxStatusTextLen+1)},
			"past expires": {Emoji: "x", ExpiresAt: &past},
		} {
			_, err := s.SetStatus(ctx(t), u.ID, st)
			if parley.ErrorCode(err) != parley.EINVALID {
				t.Errorf("%s: error = %v, want %s", what, err, parley.EINVALID)
			}
		}

		// A status that expires reads as none once its time has passed.
		soon := time.Now().Add(300 * time.Millisecond)
		me, err = s.SetStatus(ctx(t), u.ID, parley.Status{Emoji: "coffee", Text: "brb", ExpiresAt: &soon})
		NoErr(t, err)
		if me.Status == nil || me.Status.ExpiresAt == nil || me.Status.ExpiresAt.Sub(soon).Abs() > time.Millisecond {
			t.Fatalf("expiring status = %+v", me.Status)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := s.GetMe(ctx(t), u.ID)
			NoErr(t, err)
			if got.Status == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("status still shown after it expired: %+v", got.Status)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	register("Users/Batch", func(t *testing.T, open Opener) {
		s := open(t, nil)
		a, b, c := MustUser(t, s, "ba"), MustUser(t, s, "bb"), MustUser(t, s, "bc")
		loner := MustUser(t, s, "bl")
		ws1 := MustWorkspace(t, s, a)
		MustJoinWorkspace(t, s, ws1, a, b)
		MustWorkspace(t, s, c) // c shares nothing with a

		got, err := s.UsersBatch(ctx(t), a.ID, []string{c.ID, b.ID, "Unknown", a.ID, b.ID, loner.ID})
		NoErr(t, err)
		if len(got) != 2 || got[0].ID != b.ID || got[1].ID != a.ID {
			t.Fatalf("batch = %v, want [%s %s]", handlesOf(got), b.Handle, a.Handle)
		}
		for _, u := range got {
			if u.Email != "" {
				t.Fatalf("batch shows the email of %s", u.Handle)
			}
		}
		// Someone in no workspace still sees themself.
		got, err = s.UsersBatch(ctx(t), loner.ID, []string{a.ID, loner.ID})
		NoErr(t, err)
		if len(got) != 1 || got[0].ID != loner.ID {
			t.Fatalf("loner's batch = %v", handlesOf(got))
		}
		got, err = s.UsersBatch(ctx(t), a.ID, nil)
		NoErr(t, err)
		if got == nil || len(got) != 0 {
			t.Fatalf("empty batch = %#v, want an empty list", got)
		}
		ids := make([]string, parley.MaxBatchUsers+1)
		for i := range ids {
			ids[i] = a.ID
		}
		_, err = s.UsersBatch(ctx(t), a.ID, ids)
		Code(t, err, parley.EINVALID)
		_, err = s.UsersBatch(ctx(t), a.ID, ids[:parley.MaxBatchUsers])
		NoErr(t, err)
	})

	register("Users/Directory", func(t *testing.T, open Opener) {
		s := open(t, nil)
		owner := signupAs(t, s, "owner", "Olivia Owner")
		ws := MustWorkspace(t, s, owner)
		for _, h := range []struct{ handle, name string }{
			{"alice", "Alice Smith"}, {"bob", "Robert Jones"}, {"carol", "Carol Alison"},
			{"dave", "Dave Brown"}, {"erin", "Erin Black"}, {"frank", "Frank Smithers"},
		} {
			MustJoinWorkspace(t, s, ws, owner, signupAs(t, s, h.handle, h.name))
		}
		signupAs(t, s, "alfred", "Alfred Outsider") // in no workspace
		all := []string{"alice", "bob", "carol", "dave", "erin", "frank", "owner"}

		var paged []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > len(all) {
				t.Fatalf("paging does not end")
			}
			p, err := s.ListWorkspaceUsers(ctx(t), owner.ID, ws.ID, parley.UserQuery{Cursor: cursor, Limit: 3})
			NoErr(t, err)
			if len(p.Users) > 3 {
				t.Fatalf("page of %d users, limit 3", len(p.Users))
			}
			for _, u := range p.Users {
				if u.Email != "" {
					t.Fatalf("directory shows the email of %s", u.Handle)
				}
			}
			paged = append(paged, handlesOf(p.Users)...)
			if p.NextCursor == "" {
				break
			}
			cursor = p.NextCursor
		}
		if strings.Join(paged, ",") != strings.Join(all, ",") {
			t.Fatalf("paged directory = %v, want %v", paged, all)
		}
		p, err := s.ListWorkspaceUsers(ctx(t), owner.ID, ws.ID, parley.UserQuery{})
		NoErr(t, err)
		if strings.Join(handlesOf(p.Users), ",") != strings.Join(all, ",") || p.NextCursor != "" {
			t.Fatalf("whole directory = %v (cursor %q)", handlesOf(p.Users), p.NextCursor)
		}

		for q, want := range map[string]string{
			"al":     "alice,carol", // handle prefix, and a word of Carol Alison's name
			"AL":     "alice,carol",
			"@bo":    "bob",
			"rob":    "bob", // name prefix
			"smith":  "alice,frank",
			"zzz":    "",
			"a%":     "",
			"o_ner":  "",
			"olivia": "owner",
		} {
			p, err := s.ListWorkspaceUsers(ctx(t), owner.ID, ws.ID, parley.UserQuery{Q: q})
			NoErr(t, err)
			if got := strings.Join(handlesOf(p.Users), ","); got != want {
				t.Errorf("q=%q: %s, want %s", q, got, want)
			}
		}
		p, err = s.ListWorkspaceUsers(ctx(t), owner.ID, ws.ID, parley.UserQuery{Q: "a", Limit: 1})
		NoErr(t, err)
		if handlesOf(p.Users)[0] != "alice" || p.NextCursor == "" {
			t.Fatalf("filtered first page = %v (cursor %q)", handlesOf(p.Users), p.NextCursor)
		}
		p, err = s.ListWorkspaceUsers(ctx(t), owner.ID, ws.ID, parley.UserQuery{Q: "a", Limit: 1, Cursor: p.NextCursor})
		NoErr(t, err)
		if handlesOf(p.Users)[0] != "carol" {
			t.Fatalf("filtered second page = %v", handlesOf(p.Users))
		}

		outsider := MustUser(t, s, "out")
		_, err = s.ListWorkspaceUsers(ctx(t), outsider.ID, ws.ID, parley.UserQuery{})
		Code(t, err, parley.ENOTFOUND)
		_, err = s.ListWorkspaceUsers(ctx(t), owner.ID, "Wnope", parley.UserQuery{})
		Code(t, err, parley.ENOTFOUND)
		_, err = s.ListWorkspaceUsers(ctx(t), owner.ID, ws.ID, parley.UserQuery{Cursor: "!!not base64!!"})
		Code(t, err, parley.EINVALID)
	})
}
