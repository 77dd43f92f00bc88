package querycache

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"parley"
	"parley/internal/testpg"
	"parley/natsbus"
	"parley/sqlstore"
)

// The contract of parley.DirectoryQueries, run against both of its
// implementations (the query cache and sqlstore.Directory) on both stores:
// each answer is compared with the one the contract gives, so the two
// agree on ranking, visibility, limits and cursors.

// contractWorld is a seeded store with the two implementations over it.
type contractWorld struct {
	st    *sqlstore.Store
	impls []contractImpl
	// The actors and places of the cases.
	olga, paul, patricia, pat, gwen, pdave, spq, xavier *parley.User
	ws, other                                           *parley.Workspace
	planning, launch, payroll, openPlan, secret         *parley.Channel
}

type contractImpl struct {
	name string
	dq   parley.DirectoryQueries
}

// openContractStore opens a store whose clock moves on a millisecond at
// every reading, so that activity orders are strict, and a second handle
// on its database for what the store has no operation for (deactivating
// a user).
func openContractStore(t *testing.T, d sqlstore.Dialect, bus *natsbus.Bus) (*sqlstore.Store, *sql.DB) {
	t.Helper()
	var ticks atomic.Int64
	base := time.Now().UTC().Truncate(time.Second)
	cfg := sqlstore.Config{Publisher: bus, Logger: quietLogger(),
		Now: func() time.Time { return base.Add(time.Duration(ticks.Add(1)) * time.Millisecond) }}
	driver, dsn := "sqlite", ""
	if d == sqlstore.Postgres {
		cfg.PostgresURL = testpg.New(t)
		driver, dsn = "pgx", cfg.PostgresURL
	} else {
		cfg.Path = filepath.Join(t.TempDir(), "parley.db")
		// The raw connection waits for the write lock as the store's own do:
		// the store's outbox acknowledges in the background, so a write here
		// without a busy timeout could meet SQLITE_BUSY.
		dsn = "file:" + cfg.Path + "?_pragma=busy_timeout(10000)"
	}
	st, err := sqlstore.Open(bg(t), cfg)
	if err != nil {
		t.Fatalf("open %s store: %v", d, err)
	}
	t.Cleanup(func() { st.Close() })
	raw, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatalf("open raw %s: %v", d, err)
	}
	t.Cleanup(func() { raw.Close() })
	return st, raw
}

func seedContract(t *testing.T, d sqlstore.Dialect) *contractWorld {
	t.Helper()
	bus := mustBus(t, natsbus.Config{})
	st, raw := openContractStore(t, d, bus)
	w := &contractWorld{st: st}
	w.olga = mustUser(t, st, "olga", "Olga Owner")
	w.paul = mustUser(t, st, "paul", "Paul Smith")
	w.patricia = mustUser(t, st, "patricia", "Patricia Jones")
	w.pat = mustUser(t, st, "pat", "Zed Pat")
	w.gwen = mustUser(t, st, "gwen", "Gwen Pike")
	w.pdave = mustUser(t, st, "pdave", "Dave Gone")
	w.spq = mustUser(t, st, "spq", "Sam Quill")
	w.xavier = mustUser(t, st, "xp", "Xavier Post")

	w.ws = mustWorkspace(t, st, w.olga)
	mustJoin(t, st, w.ws, w.olga, w.paul, w.patricia, w.pat, w.gwen, w.pdave, w.spq)
	noErr(t, st.SetMemberRole(bg(t), w.olga.ID, w.ws.ID, w.gwen.ID, parley.RoleGuest))
	w.other = mustWorkspace(t, st, w.xavier)

	w.planning = mustChannel(t, st, w.ws, w.olga, "planning", parley.KindPublic)
	w.launch = mustChannel(t, st, w.ws, w.olga, "product-launch", parley.KindPublic)
	w.payroll = mustChannel(t, st, w.ws, w.olga, "payroll", parley.KindPrivate)
	w.openPlan = mustChannel(t, st, w.ws, w.paul, "open-plan", parley.KindPublic)
	mustChannel(t, st, w.ws, w.paul, "spare", parley.KindPublic)
	w.secret = mustChannel(t, st, w.ws, w.paul, "secret-p", parley.KindPrivate)
	past := mustChannel(t, st, w.ws, w.olga, "past-stuff", parley.KindPublic)
	_, err := st.ArchiveChannel(bg(t), w.olga.ID, past.ID)
	noErr(t, err)
	_, err = st.AddMembers(bg(t), w.olga.ID, w.planning.ID, []string{w.paul.ID, w.gwen.ID, w.pdave.ID})
	noErr(t, err)
	_, err = st.AddMembers(bg(t), w.olga.ID, w.payroll.ID, []string{w.patricia.ID})
	noErr(t, err)
	_, _, err = st.OpenDM(bg(t), w.olga.ID, w.ws.ID, []string{w.pat.ID})
	noErr(t, err)
	// Activity, oldest first: product-launch, payroll, planning.
	for _, ch := range []*parley.Channel{w.launch, w.payroll, w.planning} {
		_, _, err := st.PostMessage(bg(t), w.olga.ID, ch.ID, parley.NewMessage{Text: "hello"})
		noErr(t, err)
	}
	if _, err := raw.ExecContext(bg(t), fmt.Sprintf(
		`UPDATE users SET deactivated_at = 1 WHERE id = '%s'`, w.pdave.ID)); err != nil {
		t.Fatalf("deactivate: %v", err)
	}

	cache := New(Config{Store: st, Bus: bus, Logger: quietLogger(), SweepEvery: time.Hour})
	t.Cleanup(cache.Close)
	w.impls = []contractImpl{{"cache", cache}, {"store", st.Directory()}}
	return w
}

// contractCase is one query and the answer the contract gives, rendered
// as text (renderings below) or as an error code.
type contractCase struct {
	name string
	run  func(dq parley.DirectoryQueries) (string, error)
	want string
}

func TestDirectoryContract(t *testing.T) {
	for _, d := range []sqlstore.Dialect{sqlstore.SQLite, sqlstore.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			w := seedContract(t, d)
			cases := w.cases()
			for _, impl := range w.impls {
				t.Run(impl.name, func(t *testing.T) {
					for _, c := range cases {
						got, err := c.run(impl.dq)
						if err != nil {
							got = "error " + parley.ErrorCode(err)
						}
						if got != c.want {
							t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
						}
					}
				})
			}
			// A change reaches the cache through the bus: once it has,
			// both answer alike again.
			_, err := w.st.AddMembers(bg(t), w.olga.ID, w.planning.ID, []string{w.patricia.ID})
			noErr(t, err)
			want := "patricia+ paul+ gwen+ pat spq"
			for _, impl := range w.impls {
				waitFor(t, impl.name+" sees the new member", 10*time.Second, func() bool {
					got, err := renderMentions(impl.dq.MentionSuggestions(bg(t), w.olga.ID, w.planning.ID, "p", 10))
					return err == nil && got == want
				})
			}
			// A newcomer by invite joins #general quietly (no member.joined):
			// the cache learns it from workspace.member_joined and answers
			// #general's header as the store does.
			chans, err := w.st.ListChannels(bg(t), w.olga.ID, w.ws.ID, parley.ChannelQuery{})
			noErr(t, err)
			var general *parley.Channel
			for i := range chans.Channels {
				if chans.Channels[i].Name == "general" {
					general = &chans.Channels[i]
				}
			}
			if general == nil {
				t.Fatal("no #general")
			}
			nina, err := w.st.CreateUser(bg(t), parley.NewUser{Email: "nina@example.com", Name: "Nina", Handle: "nina", PasswordHash: "x"})
			noErr(t, err)
			inv, err := w.st.CreateInvite(bg(t), w.olga.ID, w.ws.ID, parley.InviteParams{})
			noErr(t, err)
			_, err = w.st.AcceptInvite(bg(t), nina.ID, inv.Code)
			noErr(t, err)
			render := func(dq parley.DirectoryQueries) string {
				h, err := dq.ChannelHeader(bg(t), w.olga.ID, general.ID)
				if err != nil {
					return err.Error()
				}
				ms, err := renderMentions(dq.MentionSuggestions(bg(t), w.olga.ID, general.ID, "nin", 10))
				return fmt.Sprintf("count=%d mentions=%s %v", h.MemberCount, ms, err)
			}
			want = render(w.st.Directory())
			if !strings.Contains(want, "nina+") {
				t.Fatalf("the store: %s, want nina a member of #general", want)
			}
			for _, impl := range w.impls {
				waitFor(t, impl.name+" sees the newcomer in #general", 10*time.Second, func() bool {
					return render(impl.dq) == want
				})
			}
		})
	}
}

func (w *contractWorld) cases() []contractCase {
	switcher := func(actor *parley.User, ws *parley.Workspace, q string, limit int) func(parley.DirectoryQueries) (string, error) {
		return func(dq parley.DirectoryQueries) (string, error) {
			return renderSwitcher(dq.Switcher(bgCtx, actor.ID, ws.ID, q, limit))
		}
	}
	mentions := func(actor *parley.User, ch *parley.Channel, q string, limit int) func(parley.DirectoryQueries) (string, error) {
		return func(dq parley.DirectoryQueries) (string, error) {
			return renderMentions(dq.MentionSuggestions(bgCtx, actor.ID, ch.ID, q, limit))
		}
	}
	header := func(actor *parley.User, ch *parley.Channel) func(parley.DirectoryQueries) (string, error) {
		return func(dq parley.DirectoryQueries) (string, error) {
			h, err := dq.ChannelHeader(bgCtx, actor.ID, ch.ID)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%s member=%v count=%d preview=%s", h.Channel.Name, h.Channel.IsMember,
				h.MemberCount, renderUsers(h.MembersPreview)), nil
		}
	}
	directoryOf := func(actor *parley.User, ws *parley.Workspace, q string, limit int, all bool) func(parley.DirectoryQueries) (string, error) {
		// Every page, following the cursors.
		return func(dq parley.DirectoryQueries) (string, error) {
			var pages []string
			cursor := ""
			for range 10 {
				p, err := dq.Directory(bgCtx, actor.ID, ws.ID, parley.UserQuery{Q: q, Limit: limit, Cursor: cursor, IncludeDeactivated: all})
				if err != nil {
					return "", err
				}
				pages = append(pages, renderUsers(p.Users))
				if cursor = p.NextCursor; cursor == "" {
					break
				}
			}
			return strings.Join(pages, " | "), nil
		}
	}
	directory := func(actor *parley.User, ws *parley.Workspace, q string, limit int) func(parley.DirectoryQueries) (string, error) {
		return directoryOf(actor, ws, q, limit, true)
	}
	ids := func(us ...*parley.User) []string {
		out := make([]string, len(us))
		for i, u := range us {
			out[i] = u.ID
		}
		return out
	}
	list := func(us []parley.User, err error) (string, error) {
		if err != nil {
			return "", err
		}
		return renderUsers(us), nil
	}
	return []contractCase{
		// The switcher: members' channels by activity, then others by
		// tier; no DMs, archived or invisible channels. People: DM
		// partners first in a tier, handles before names, then fuzzy;
		// no deactivated people, nobody from another workspace.
		{"switcher p", switcher(w.olga, w.ws, "p", 10),
			"channels=planning+ payroll+ product-launch+ open-plan spare users=pat patricia paul gwen spq"},
		{"switcher p limit 2", switcher(w.olga, w.ws, "p", 2),
			"channels=planning+ payroll+ users=pat patricia"},
		{"switcher @p", switcher(w.olga, w.ws, "@p", 10), "channels= users=pat patricia paul gwen spq"},
		{"switcher #p", switcher(w.olga, w.ws, "#p", 10),
			"channels=planning+ payroll+ product-launch+ open-plan spare users="},
		{"switcher exact", switcher(w.olga, w.ws, "Paul Smith", 10), "channels= users=paul"},
		{"switcher guest", switcher(w.gwen, w.ws, "p", 10),
			"channels=planning+ users=pat patricia paul gwen spq"},
		{"switcher member of a private channel", switcher(w.paul, w.ws, "#secret", 10), "channels=secret-p+ users="},
		{"switcher other workspace", switcher(w.xavier, w.ws, "p", 10), "error " + parley.ENOTFOUND},
		{"switcher not a member", switcher(w.olga, w.other, "p", 10), "error " + parley.ENOTFOUND},

		// Mention suggestions: the channel's members first in a tier.
		{"mentions", mentions(w.olga, w.planning, "@p", 10), "paul+ gwen+ pat patricia spq"},
		{"mentions limit", mentions(w.olga, w.planning, "p", 3), "paul+ gwen+ pat"},
		{"mentions private", mentions(w.patricia, w.payroll, "o", 10), "olga+"},
		{"mentions guest elsewhere", mentions(w.gwen, w.launch, "p", 10), "error " + parley.ENOTFOUND},
		{"mentions private not member", mentions(w.olga, w.secret, "p", 10), "error " + parley.ENOTFOUND},
		{"mentions other workspace", mentions(w.xavier, w.planning, "p", 10), "error " + parley.ENOTFOUND},

		// Channel headers: active members by handle.
		{"header guest", header(w.gwen, w.planning), "planning member=true count=4 preview=gwen olga paul"},
		{"header not member", header(w.patricia, w.launch), "product-launch member=false count=1 preview=olga"},
		{"header private", header(w.paul, w.payroll), "error " + parley.ENOTFOUND},
		{"header guest public", header(w.gwen, w.openPlan), "error " + parley.ENOTFOUND},
		{"header other workspace", header(w.xavier, w.planning), "error " + parley.ENOTFOUND},

		// The directory: by handle, without deactivated people by default.
		{"directory active p", directoryOf(w.olga, w.ws, "p", 2, false), "gwen pat | patricia paul"},
		{"directory active all", directoryOf(w.gwen, w.ws, "", 3, false), "gwen olga pat | patricia paul spq"},
		// With include_deactivated, listed and marked.
		{"directory p", directory(w.olga, w.ws, "p", 2), "gwen pat | patricia paul | pdave(off)"},
		{"directory all", directory(w.gwen, w.ws, "", 3), "gwen olga pat | patricia paul pdave(off) | spq"},
		{"directory name word", directory(w.olga, w.ws, "@smi", 10), "paul"},
		{"directory other workspace", directory(w.xavier, w.ws, "", 10), "error " + parley.ENOTFOUND},
		{"directory bad cursor", func(dq parley.DirectoryQueries) (string, error) {
			_, err := dq.Directory(bgCtx, w.olga.ID, w.ws.ID, parley.UserQuery{Cursor: "!!"})
			return "", err
		}, "error " + parley.EINVALID},

		// Batches: those who share a workspace with the actor, in order.
		{"users batch", func(dq parley.DirectoryQueries) (string, error) {
			return list(dq.UsersBatch(bgCtx, w.olga.ID, append(ids(w.xavier, w.paul, w.paul, w.olga, w.pdave), "Unosuch")))
		}, "paul olga pdave(off)"},
		{"users batch too many", func(dq parley.DirectoryQueries) (string, error) {
			return list(dq.UsersBatch(bgCtx, w.olga.ID, make([]string, parley.MaxBatchUsers+1)))
		}, "error " + parley.EINVALID},
		{"users", func(dq parley.DirectoryQueries) (string, error) {
			return list(dq.Users(bgCtx, w.ws.ID, ids(w.pdave, w.xavier, w.paul, w.pdave)))
		}, "pdave(off) paul"},
		{"users by handle", func(dq parley.DirectoryQueries) (string, error) {
			return list(dq.UsersByHandle(bgCtx, w.ws.ID, []string{"paul", "xp", "pdave", "nosuch", "paul"}))
		}, "paul pdave(off)"},
	}
}

// bgCtx is the cases' context.
var bgCtx = context.Background()

func renderUsers(us []parley.User) string {
	parts := make([]string, len(us))
	for i, u := range us {
		parts[i] = u.Handle
		if u.Deactivated {
			parts[i] += "(off)"
		}
	}
	return strings.Join(parts, " ")
}

func renderSwitcher(r *parley.SwitcherResult, err error) (string, error) {
	if err != nil {
		return "", err
	}
	chs := make([]string, len(r.Channels))
	for i, c := range r.Channels {
		chs[i] = c.Name
		if c.IsMember {
			chs[i] += "+"
		}
	}
	return "channels=" + strings.Join(chs, " ") + " users=" + renderUsers(r.Users), nil
}

func renderMentions(ms []parley.MentionSuggestion, err error) (string, error) {
	if err != nil {
		return "", err
	}
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.Handle
		if m.InChannel {
			parts[i] += "+"
		}
	}
	return strings.Join(parts, " "), nil
}
