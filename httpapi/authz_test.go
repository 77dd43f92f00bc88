package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"parley"
	"parley/auth"
	"parley/notify"
	"parley/sqlstore"
)

// The authorization matrix: every route × five principals, against fresh
// fixtures in workspace A for every row (see cellOrder for why that is fresh
// enough for each cell), on SQLite and on PostgreSQL.

type principal int

const (
	anonymous  principal = iota // no token
	outsider                    // a user in no workspace
	member                      // a member of workspace A
	admin                       // the owner of workspace A
	otherAdmin                  // the owner of workspace B
	numPrincipals
)

// authzNotifySecret signs the matrix's unsubscribe links.
var authzNotifySecret = []byte("authz-notify-secret")

var principalNames = [numPrincipals]string{"anonymous", "outsider", "member", "admin", "other_admin"}

// authzFixture is workspace A with its objects, and workspace B.
type authzFixture struct {
	users         [numPrincipals]*account // users[anonymous] is nil
	extra, extra2 *account                // more members of A, not principals
	wsA, wsB      *parley.Workspace
	// pub: public, made by admin, only admin in it. priv: private, made by
	// admin, with member and extra. secret: private, admin only. dm: admin
	// and member.
	pub, priv, secret, dm *parley.Channel
	// msgPub, msgPriv and msgSecret are admin's; msgPriv is pinned, has
	// admin's "tada" reaction and a reply by extra (so admin follows its
	// thread with one unread reply).
	msgPub, msgPriv, msgSecret *parley.Message
	invite                     string

	// Integration objects of workspace A, made on first use (integ).
	t     *testing.T
	st    parley.Store
	integ *integFixture

	// Files, all admin's: filePriv (a PNG, so with a thumbnail) attached
	// in priv, fileSecret in secret, fileLoose attached nowhere; upload is
	// a resumable upload at offset 0 of 10 bytes, uploadFull one with its
	// 10 bytes in. signedPriv is a download path of filePriv signed for
	// admin; signedSecret one of fileSecret signed for member.
	filePriv, fileSecret, fileLoose *parley.File
	upload, uploadFull              *parley.Upload
	signedPriv, signedSecret        string
}

// integFixture is a bot with a token, an incoming webhook on priv, a
// slash command and a response_url grant for member in priv.
type integFixture struct {
	bot                 *parley.Bot
	token               *parley.BotToken
	hook                *parley.Webhook
	hookSecret          string
	command             *parley.Integration
	responseToken       string
	hookPath, respPath  string
	botPath, tokensPath string
}

func (f *authzFixture) integrations() *integFixture {
	if f.integ != nil {
		return f.integ
	}
	t, ctx := f.t, context.Background()
	is := f.st.(parley.IntegrationStore)
	adm := f.users[admin]
	in := &integFixture{}
	var err error
	if in.bot, err = is.CreateBot(ctx, adm.ID, f.wsA.ID, parley.NewBot{Name: "Robot", Handle: "robot-" + uniq()}); err != nil {
		t.Fatalf("create bot: %v", err)
	}
	if in.token, err = is.CreateBotToken(ctx, adm.ID, f.wsA.ID, in.bot.User.ID, parley.NewBotToken{
		Scopes: []string{parley.ScopeChatWrite}, TokenHash: auth.HashToken("tok-" + uniq())}); err != nil {
		t.Fatalf("create bot token: %v", err)
	}
	in.hookSecret = "secret-" + uniq()
	if in.hook, err = is.CreateWebhook(ctx, adm.ID, f.priv.ID, "CI", auth.HashToken(in.hookSecret)); err != nil {
		t.Fatalf("create webhook: %v", err)
	}
	if in.command, err = is.CreateIntegration(ctx, adm.ID, f.wsA.ID, parley.NewIntegration{Kind: parley.IntegrationCommand,
		Name: "deploy" + uniq(), URL: "http://127.0.0.1:1/cmd", SigningSecret: "s"}); err != nil {
		t.Fatalf("create command: %v", err)
	}
	in.responseToken = "resp-" + uniq()
	if err := is.GrantResponse(ctx, auth.HashToken(in.responseToken), parley.CommandResponse{WorkspaceID: f.wsA.ID,
		IntegrationID: in.command.ID, ChannelID: f.priv.ID, UserID: f.users[member].ID}, time.Now().Add(time.Hour), 5); err != nil {
		t.Fatalf("grant response: %v", err)
	}
	f.integ = in
	return in
}

// addFiles uploads the fixture's files through the env's file service.
func (f *authzFixture) addFiles(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	svc, adm := e.api.files, f.users[admin]
	up := func(name string, data []byte) *parley.File {
		file, err := svc.Upload(ctx, adm.ID, f.wsA.ID, name, bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("upload %s: %v", name, err)
		}
		return file
	}
	attach := func(file *parley.File, ch *parley.Channel) {
		if _, _, err := e.store.PostMessage(ctx, adm.ID, ch.ID, parley.NewMessage{Text: "file", FileIDs: []string{file.ID}}); err != nil {
			t.Fatalf("attach: %v", err)
		}
	}
	f.filePriv, f.fileSecret, f.fileLoose = up("pic.png", tinyPNG(t, 40, 30)), up("secret.txt", []byte("secret")), up("loose.txt", []byte("loose"))
	attach(f.filePriv, f.priv)
	attach(f.fileSecret, f.secret)
	var err error
	if f.upload, err = svc.CreateUpload(ctx, adm.ID, f.wsA.ID, "up.bin", 10); err != nil {
		t.Fatal(err)
	}
	if f.uploadFull, err = svc.CreateUpload(ctx, adm.ID, f.wsA.ID, "full.bin", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.PutChunk(ctx, adm.ID, f.uploadFull.ID, 0, bytes.NewReader(make([]byte, 10)), 10); err != nil {
		t.Fatal(err)
	}
	signed := func(file *parley.File, p principal) string {
		c := *file
		if err := e.api.signFile(ctx, f.users[p].ID, &c); err != nil {
			t.Fatal(err)
		}
		return strings.TrimPrefix(c.URL, Prefix)
	}
	f.signedPriv, f.signedSecret = signed(f.filePriv, admin), signed(f.fileSecret, member)
}

func newAuthzFixture(t *testing.T, st parley.Store) *authzFixture {
	t.Helper()
	ctx := context.Background()
	f := &authzFixture{t: t, st: st}
	for p := outsider; p < numPrincipals; p++ {
		f.users[p] = mustAccount(t, st, principalNames[p])
	}
	f.extra = mustAccount(t, st, "extra")
	f.extra2 = mustAccount(t, st, "extra2")
	adm := f.users[admin]
	f.wsA = mustWorkspace(t, st, adm)
	f.wsB = mustWorkspace(t, st, f.users[otherAdmin])
	mustJoin(t, st, f.wsA, adm, f.users[member], f.extra, f.extra2)
	f.pub = mustChannel(t, st, f.wsA, adm, parley.KindPublic)
	f.priv = mustChannel(t, st, f.wsA, adm, parley.KindPrivate)
	f.secret = mustChannel(t, st, f.wsA, adm, parley.KindPrivate)
	if _, err := st.AddMembers(ctx, adm.ID, f.priv.ID, []string{f.users[member].ID, f.extra.ID}); err != nil {
		t.Fatalf("add members: %v", err)
	}
	f.msgPub = mustPost(t, st, adm, f.pub, "hello public")
	f.msgPriv = mustPost(t, st, adm, f.priv, "hello private")
	if _, err := st.Pin(ctx, adm.ID, f.msgPriv.ID); err != nil {
		t.Fatalf("pin: %v", err)
	}
	if _, err := st.AddReaction(ctx, adm.ID, f.msgPriv.ID, "tada"); err != nil {
		t.Fatalf("react: %v", err)
	}
	if _, _, err := st.PostMessage(ctx, f.extra.ID, f.priv.ID, parley.NewMessage{Text: "a reply", ThreadRootID: f.msgPriv.ID}); err != nil {
		t.Fatalf("reply: %v", err)
	}
	f.msgSecret = mustPost(t, st, adm, f.secret, "hello secret")
	dm, _, err := st.OpenDM(ctx, adm.ID, f.wsA.ID, []string{f.users[member].ID})
	if err != nil {
		t.Fatalf("open dm: %v", err)
	}
	f.dm = dm
	inv, err := st.CreateInvite(ctx, adm.ID, f.wsA.ID, parley.InviteParams{})
	if err != nil {
		t.Fatalf("create invite: %v", err)
	}
	f.invite = inv.Code
	return f
}

// authzRow is one request, with the expected status for each principal.
type authzRow struct {
	method, pattern string // as in the route table, without the prefix
	variant         string // tells rows of the same route apart
	path            func(f *authzFixture) string
	body            func(f *authzFixture) any
	want            [numPrincipals]int
	// check, if set, looks further at a response with the expected status.
	check func(t *testing.T, f *authzFixture, p principal, r *response)
}

const (
	s200 = http.StatusOK
	s201 = http.StatusCreated
	s204 = http.StatusNoContent
	s401 = http.StatusUnauthorized
	s403 = http.StatusForbidden
	s404 = http.StatusNotFound
)

// Commonly expected rows of statuses.
var (
	allowAll   = [numPrincipals]int{s200, s200, s200, s200, s200}
	anyUser    = [numPrincipals]int{s401, s200, s200, s200, s200}
	inA        = [numPrincipals]int{s401, s404, s200, s200, s404} // members of A
	adminOfA   = [numPrincipals]int{s401, s404, s403, s200, s404} // visible to member, admin only
	adminOnly  = [numPrincipals]int{s401, s404, s404, s200, s404} // hidden from member too
	createInA  = [numPrincipals]int{s401, s404, s201, s201, s404}
	deleteInA  = [numPrincipals]int{s401, s404, s204, s204, s404}
	joinedOnly = [numPrincipals]int{s401, s404, s403, s201, s404} // posting needs membership
	// adminCreates and adminDeletes: visible to member, done by admin only.
	adminCreates = [numPrincipals]int{s401, s404, s403, s201, s404}
	adminDeletes = [numPrincipals]int{s401, s404, s403, s204, s404}
)

func authzRows() []authzRow {
	lit := func(s string) func(*authzFixture) string { return func(*authzFixture) string { return s } }
	ch := func(pick func(f *authzFixture) *parley.Channel, suffix string) func(*authzFixture) string {
		return func(f *authzFixture) string { return "/channels/" + pick(f).ID + suffix }
	}
	msg := func(pick func(f *authzFixture) *parley.Message, suffix string) func(*authzFixture) string {
		return func(f *authzFixture) string { return "/messages/" + pick(f).ID + suffix }
	}
	pub := func(f *authzFixture) *parley.Channel { return f.pub }
	priv := func(f *authzFixture) *parley.Channel { return f.priv }
	secret := func(f *authzFixture) *parley.Channel { return f.secret }
	dm := func(f *authzFixture) *parley.Channel { return f.dm }
	msgPub := func(f *authzFixture) *parley.Message { return f.msgPub }
	msgPriv := func(f *authzFixture) *parley.Message { return f.msgPriv }
	thread := func(pick func(f *authzFixture) *parley.Message, suffix string) func(*authzFixture) string {
		return func(f *authzFixture) string { return "/threads/" + pick(f).ID + suffix }
	}
	msgSecret := func(f *authzFixture) *parley.Message { return f.msgSecret }
	wsA := func(suffix string) func(*authzFixture) string {
		return func(f *authzFixture) string { return "/workspaces/" + f.wsA.ID + suffix }
	}
	body := func(v any) func(*authzFixture) any { return func(*authzFixture) any { return v } }
	file := func(pick func(f *authzFixture) *parley.File, suffix string) func(*authzFixture) string {
		return func(f *authzFixture) string { return "/files/" + pick(f).ID + suffix }
	}
	filePriv := func(f *authzFixture) *parley.File { return f.filePriv }
	fileSecret := func(f *authzFixture) *parley.File { return f.fileSecret }
	fileLoose := func(f *authzFixture) *parley.File { return f.fileLoose }
	upload := func(full bool, suffix string) func(*authzFixture) string {
		return func(f *authzFixture) string {
			if full {
				return "/uploads/" + f.uploadFull.ID + suffix
			}
			return "/uploads/" + f.upload.ID + suffix
		}
	}
	post := func(f *authzFixture) any { return map[string]string{"text": "hi", "client_msg_id": uniq()} }
	unsub := func(f *authzFixture) string {
		return "/unsubscribe/" + notify.UnsubscribeToken(authzNotifySecret, f.users[member].ID)
	}

	return []authzRow{
		{method: "POST", pattern: "/auth/signup", path: lit("/auth/signup"),
			body: func(*authzFixture) any {
				h := "new-" + uniq()
				return map[string]string{"email": h + "@example.com", "password": testPassword, "name": "New", "handle": h}
			},
			want: [numPrincipals]int{s201, s201, s201, s201, s201}},
		{method: "POST", pattern: "/auth/login", path: lit("/auth/login"),
			body: func(f *authzFixture) any {
				return map[string]string{"email": f.users[member].Email, "password": testPassword}
			},
			want: allowAll},
		{method: "POST", pattern: "/auth/logout", path: lit("/auth/logout"),
			want: [numPrincipals]int{s401, s204, s204, s204, s204}},
		{method: "GET", pattern: "/me", path: lit("/me"), want: anyUser},
		{method: "PATCH", pattern: "/me", path: lit("/me"), body: body(map[string]string{"title": "Boss"}), want: anyUser},
		{method: "PUT", pattern: "/me/status", path: lit("/me/status"),
			body: body(map[string]string{"emoji": "palm_tree", "text": "away"}), want: anyUser},
		{method: "GET", pattern: "/me/notifications", path: lit("/me/notifications"), want: anyUser},
		{method: "PUT", pattern: "/me/notifications", path: lit("/me/notifications"),
			body: body(map[string]any{"mode": "on", "interval_seconds": 3600}), want: anyUser},
		{method: "GET", pattern: "/unsubscribe/{token}", path: unsub, want: allowAll},
		{method: "GET", pattern: "/unsubscribe/{token}", variant: "forged", path: lit("/unsubscribe/bm9ib2R5.AAAA"),
			want: [numPrincipals]int{s404, s404, s404, s404, s404}},
		{method: "POST", pattern: "/unsubscribe/{token}", path: unsub, want: allowAll},
		{method: "POST", pattern: "/unsubscribe/{token}", variant: "forged", path: lit("/unsubscribe/bm9ib2R5.AAAA"),
			want: [numPrincipals]int{s404, s404, s404, s404, s404}},
		{method: "POST", pattern: "/users/batch", path: lit("/users/batch"),
			body: func(f *authzFixture) any { return map[string][]string{"ids": {f.users[member].ID}} },
			want: anyUser,
			check: func(t *testing.T, f *authzFixture, p principal, r *response) {
				var out struct{ Users []parley.User }
				r.decode(t, &out)
				if visible := p == member || p == admin; visible != (len(out.Users) == 1) {
					t.Errorf("users/batch as %s: got %d users", principalNames[p], len(out.Users))
				}
			}},

		{method: "POST", pattern: "/workspaces", path: lit("/workspaces"),
			body: func(*authzFixture) any { n := uniq(); return map[string]string{"name": "W " + n, "slug": "w-" + n} },
			want: [numPrincipals]int{s401, s201, s201, s201, s201}},
		{method: "GET", pattern: "/workspaces", path: lit("/workspaces"), want: anyUser},
		{method: "GET", pattern: "/workspaces/{ws}", path: wsA(""), want: inA},
		{method: "POST", pattern: "/workspaces/{ws}/invites", path: wsA("/invites"), want: createInA},
		{method: "GET", pattern: "/invites/{code}",
			path: func(f *authzFixture) string { return "/invites/" + f.invite },
			want: allowAll},
		{method: "GET", pattern: "/invites/{code}", variant: "unknown code",
			path: lit("/invites/nosuchcode"),
			want: [numPrincipals]int{s404, s404, s404, s404, s404}},
		{method: "POST", pattern: "/invites/{code}/accept",
			path: func(f *authzFixture) string { return "/invites/" + f.invite + "/accept" },
			want: anyUser},
		{method: "POST", pattern: "/invites/{code}/accept", variant: "unknown code",
			path: lit("/invites/nosuchcode/accept"),
			want: [numPrincipals]int{s401, s404, s404, s404, s404}},
		{method: "PUT", pattern: "/workspaces/{ws}/members/{user_id}/role",
			path: func(f *authzFixture) string { return "/workspaces/" + f.wsA.ID + "/members/" + f.extra.ID + "/role" },
			body: body(map[string]string{"role": "admin"}),
			want: [numPrincipals]int{s401, s404, s403, s204, s404}},
		// Lifecycle (docs/lifecycle.md): admins of A act on members of A
		// only; the owner alone transfers and deletes.
		{method: "DELETE", pattern: "/workspaces/{ws}",
			path: func(f *authzFixture) string { return "/workspaces/" + f.wsA.ID + "?confirm=" + f.wsA.Slug },
			want: [numPrincipals]int{s401, s404, s403, http.StatusAccepted, s404}},
		{method: "DELETE", pattern: "/workspaces/{ws}", variant: "wrong confirm",
			path: wsA("?confirm=nope"),
			want: [numPrincipals]int{s401, s404, s403, http.StatusBadRequest, s404}},
		{method: "DELETE", pattern: "/workspaces/{ws}", variant: "other workspace's slug",
			path: func(f *authzFixture) string { return "/workspaces/" + f.wsA.ID + "?confirm=" + f.wsB.Slug },
			want: [numPrincipals]int{s401, s404, s403, http.StatusBadRequest, s404}},
		{method: "DELETE", pattern: "/workspaces/{ws}/members/{user_id}",
			path: func(f *authzFixture) string { return "/workspaces/" + f.wsA.ID + "/members/" + f.extra.ID },
			want: [numPrincipals]int{s401, s404, s403, s204, s404}},
		{method: "DELETE", pattern: "/workspaces/{ws}/members/{user_id}", variant: "user of another workspace",
			path: func(f *authzFixture) string {
				return "/workspaces/" + f.wsA.ID + "/members/" + f.users[otherAdmin].ID
			},
			want: [numPrincipals]int{s401, s404, s403, s404, s404}},
		{method: "POST", pattern: "/workspaces/{ws}/members/{user_id}/deactivate",
			path: func(f *authzFixture) string {
				return "/workspaces/" + f.wsA.ID + "/members/" + f.extra.ID + "/deactivate"
			},
			want: [numPrincipals]int{s401, s404, s403, s200, s404},
			check: func(t *testing.T, f *authzFixture, p principal, r *response) {
				var u parley.User
				r.decode(t, &u)
				if !u.Deactivated || u.ID != f.extra.ID {
					t.Errorf("deactivate answered %+v", u)
				}
			}},
		{method: "POST", pattern: "/workspaces/{ws}/members/{user_id}/deactivate", variant: "user of another workspace",
			path: func(f *authzFixture) string {
				return "/workspaces/" + f.wsA.ID + "/members/" + f.users[otherAdmin].ID + "/deactivate"
			},
			want: [numPrincipals]int{s401, s404, s403, s404, s404}},
		{method: "POST", pattern: "/workspaces/{ws}/members/{user_id}/deactivate", variant: "the owner",
			path: func(f *authzFixture) string {
				return "/workspaces/" + f.wsA.ID + "/members/" + f.users[admin].ID + "/deactivate"
			},
			want: [numPrincipals]int{s401, s404, s403, http.StatusBadRequest, s404}},
		{method: "POST", pattern: "/workspaces/{ws}/members/{user_id}/reactivate",
			path: func(f *authzFixture) string {
				return "/workspaces/" + f.wsA.ID + "/members/" + f.extra.ID + "/reactivate"
			},
			want: [numPrincipals]int{s401, s404, s403, s200, s404}},
		{method: "POST", pattern: "/workspaces/{ws}/owner", path: wsA("/owner"),
			body: func(f *authzFixture) any { return map[string]string{"user_id": f.extra.ID} },
			want: [numPrincipals]int{s401, s404, s403, s204, s404}},
		{method: "POST", pattern: "/workspaces/{ws}/owner", variant: "user of another workspace", path: wsA("/owner"),
			body: func(f *authzFixture) any { return map[string]string{"user_id": f.users[otherAdmin].ID} },
			want: [numPrincipals]int{s401, s404, s403, s404, s404}},
		{method: "GET", pattern: "/workspaces/{ws}/users", path: wsA("/users"), want: inA},
		{method: "GET", pattern: "/workspaces/{ws}/switcher", path: wsA("/switcher?q="), want: inA,
			check: func(t *testing.T, f *authzFixture, p principal, r *response) {
				var res parley.SwitcherResult
				r.decode(t, &res)
				seen := map[string]bool{}
				for _, c := range res.Channels {
					seen[c.ID] = true
				}
				// Private channels only for their members; DMs through their people.
				if !seen[f.pub.ID] || !seen[f.priv.ID] || seen[f.secret.ID] != (p == admin) || seen[f.dm.ID] {
					t.Errorf("switcher as %s lists channels %v", principalNames[p], seen)
				}
			}},
		{method: "GET", pattern: "/workspaces/{ws}/export", path: wsA("/export?private=true"), want: adminOfA,
			check: func(t *testing.T, f *authzFixture, p principal, r *response) {
				if r.Header.Get("Content-Type") != "application/zip" || !bytes.HasPrefix(r.Body, []byte("PK")) {
					t.Errorf("export as %s: %s, %.40q", principalNames[p], r.Header.Get("Content-Type"), r.Body)
				}
			}},
		{method: "GET", pattern: "/workspaces/{ws}/export", variant: "bad private", path: wsA("/export?private=maybe"),
			want: [numPrincipals]int{s401, http.StatusBadRequest, http.StatusBadRequest, http.StatusBadRequest, http.StatusBadRequest}},
		{method: "GET", pattern: "/workspaces/{ws}/search", path: wsA("/search?q=hello"), want: inA,
			check: func(t *testing.T, f *authzFixture, p principal, r *response) {
				var page parley.SearchPage
				r.decode(t, &page)
				var got []string
				for _, res := range page.Results {
					got = append(got, res.Message.ID)
				}
				// member and admin: the public channel (joined or not) and
				// the private one they are both in, newest first; the
				// admin also the private channel only they are in.
				want := []string{f.msgPriv.ID, f.msgPub.ID}
				if p == admin {
					want = append([]string{f.msgSecret.ID}, want...)
				}
				if strings.Join(got, ",") != strings.Join(want, ",") {
					t.Errorf("search as %s found %v, want %v", principalNames[p], got, want)
				}
			}},
		{method: "POST", pattern: "/boot", path: lit("/boot"),
			body: func(f *authzFixture) any { return map[string]string{"workspace_id": f.wsA.ID} },
			want: inA,
			check: func(t *testing.T, f *authzFixture, p principal, r *response) {
				var b parley.Boot
				r.decode(t, &b)
				seen := map[string]bool{}
				for _, c := range append(b.Channels, b.DMs...) {
					seen[c.ID] = true
				}
				// Only the caller's own channels: the secret one only for admin.
				if !seen[f.priv.ID] || !seen[f.dm.ID] || seen[f.secret.ID] != (p == admin) || seen[f.pub.ID] != (p == admin) {
					t.Errorf("boot as %s lists %v", principalNames[p], seen)
				}
			}},
		{method: "POST", pattern: "/boot", variant: "channel first, private", path: lit("/boot"),
			body: func(f *authzFixture) any {
				return map[string]string{"workspace_id": f.wsA.ID, "channel_id": f.priv.ID}
			},
			want: inA},
		{method: "POST", pattern: "/boot", variant: "channel first, secret", path: lit("/boot"),
			body: func(f *authzFixture) any {
				return map[string]string{"workspace_id": f.wsA.ID, "channel_id": f.secret.ID}
			},
			want: adminOnly},
		{method: "GET", pattern: "/workspaces/{ws}/channels", path: wsA("/channels"), want: inA,
			check: func(t *testing.T, f *authzFixture, p principal, r *response) {
				var page parley.ChannelPage
				r.decode(t, &page)
				seen := map[string]bool{}
				for _, c := range page.Channels {
					seen[c.ID] = true
				}
				// Everyone in A sees the public channel; the secret one only its member.
				if !seen[f.pub.ID] || seen[f.secret.ID] != (p == admin) || seen[f.dm.ID] {
					t.Errorf("%s sees %v: want pub, secret only for admin, never the DM", principalNames[p], seen)
				}
			}},

		{method: "POST", pattern: "/workspaces/{ws}/channels", path: wsA("/channels"),
			body: func(*authzFixture) any { return map[string]string{"name": "c-" + uniq(), "kind": "public"} },
			want: createInA},
		{method: "POST", pattern: "/dms", path: lit("/dms"),
			body: func(f *authzFixture) any {
				return map[string]any{"workspace_id": f.wsA.ID, "user_ids": []string{f.users[admin].ID, f.users[member].ID}}
			},
			want: inA,
			check: func(t *testing.T, f *authzFixture, p principal, r *response) {
				var c parley.Channel
				r.decode(t, &c)
				if c.ID != f.dm.ID {
					t.Errorf("dms as %s: got channel %s, want the existing %s", principalNames[p], c.ID, f.dm.ID)
				}
			}},
		{method: "GET", pattern: "/channels/{id}", variant: "public", path: ch(pub, ""), want: inA},
		{method: "GET", pattern: "/channels/{id}", variant: "private", path: ch(priv, ""), want: inA},
		{method: "GET", pattern: "/channels/{id}", variant: "secret", path: ch(secret, ""), want: adminOnly},
		{method: "GET", pattern: "/channels/{id}", variant: "dm", path: ch(dm, ""), want: inA},
		{method: "PATCH", pattern: "/channels/{id}", variant: "rename", path: ch(priv, ""),
			body: func(*authzFixture) any { return map[string]string{"name": "renamed-" + uniq()} },
			want: adminOfA},
		{method: "PATCH", pattern: "/channels/{id}", variant: "secret", path: ch(secret, ""),
			body: body(map[string]string{"topic": "t"}), want: adminOnly},
		{method: "POST", pattern: "/channels/{id}/archive", path: ch(pub, "/archive"), want: adminOfA},
		{method: "POST", pattern: "/channels/{id}/archive", variant: "secret", path: ch(secret, "/archive"), want: adminOnly},
		{method: "POST", pattern: "/channels/{id}/join", path: ch(pub, "/join"), want: inA},
		{method: "POST", pattern: "/channels/{id}/join", variant: "secret", path: ch(secret, "/join"), want: adminOnly},
		{method: "POST", pattern: "/channels/{id}/leave", path: ch(priv, "/leave"), want: deleteInA},
		{method: "POST", pattern: "/channels/{id}/members", path: ch(priv, "/members"),
			body: func(f *authzFixture) any { return map[string][]string{"user_ids": {f.extra2.ID}} },
			want: inA},
		{method: "POST", pattern: "/channels/{id}/members", variant: "not joined", path: ch(pub, "/members"),
			body: func(f *authzFixture) any { return map[string][]string{"user_ids": {f.extra2.ID}} },
			want: adminOfA},
		{method: "DELETE", pattern: "/channels/{id}/members/{user_id}",
			path: func(f *authzFixture) string { return "/channels/" + f.priv.ID + "/members/" + f.extra.ID },
			want: [numPrincipals]int{s401, s404, s403, s204, s404}},
		{method: "GET", pattern: "/channels/{id}/members", variant: "public", path: ch(pub, "/members"), want: inA},
		{method: "GET", pattern: "/channels/{id}/members", variant: "secret", path: ch(secret, "/members"), want: adminOnly},
		{method: "GET", pattern: "/channels/{id}/mention-suggestions", variant: "public", path: ch(pub, "/mention-suggestions?q=ext"), want: inA,
			check: func(t *testing.T, f *authzFixture, p principal, r *response) {
				var out struct{ Users []parley.MentionSuggestion }
				r.decode(t, &out)
				if len(out.Users) != 2 || out.Users[0].InChannel || out.Users[1].InChannel {
					t.Errorf("mention suggestions as %s: %+v, want extra and extra2, neither in the channel", principalNames[p], out.Users)
				}
			}},
		{method: "GET", pattern: "/channels/{id}/mention-suggestions", variant: "secret", path: ch(secret, "/mention-suggestions"), want: adminOnly},
		{method: "GET", pattern: "/channels/{id}/header", variant: "private", path: ch(priv, "/header"), want: inA,
			check: func(t *testing.T, f *authzFixture, p principal, r *response) {
				var h parley.ChannelHeader
				r.decode(t, &h)
				if h.Channel.ID != f.priv.ID || h.MemberCount != 3 || len(h.MembersPreview) != 3 {
					t.Errorf("header as %s: %+v", principalNames[p], h)
				}
			}},
		{method: "GET", pattern: "/channels/{id}/header", variant: "secret", path: ch(secret, "/header"), want: adminOnly},
		{method: "POST", pattern: "/channels/{id}/read", path: ch(priv, "/read"), body: body(map[string]int{"seq": 1}), want: inA},

		{method: "POST", pattern: "/channels/{id}/messages", variant: "private", path: ch(priv, "/messages"), body: post, want: createInA},
		{method: "POST", pattern: "/channels/{id}/messages", variant: "public, not joined", path: ch(pub, "/messages"), body: post, want: joinedOnly},
		{method: "POST", pattern: "/channels/{id}/messages", variant: "dm", path: ch(dm, "/messages"), body: post, want: createInA},
		{method: "POST", pattern: "/channels/{id}/messages", variant: "secret", path: ch(secret, "/messages"), body: post,
			want: [numPrincipals]int{s401, s404, s404, s201, s404}},
		{method: "GET", pattern: "/channels/{id}/messages", variant: "public", path: ch(pub, "/messages"), want: inA},
		{method: "GET", pattern: "/channels/{id}/messages", variant: "secret", path: ch(secret, "/messages"), want: adminOnly},
		{method: "GET", pattern: "/channels/{id}/pins", path: ch(priv, "/pins"), want: inA},
		{method: "GET", pattern: "/messages/{id}", variant: "private", path: msg(msgPriv, ""), want: inA},
		{method: "GET", pattern: "/messages/{id}", variant: "public", path: msg(msgPub, ""), want: inA},
		{method: "PATCH", pattern: "/messages/{id}", path: msg(msgPriv, ""), body: body(map[string]string{"text": "edited"}), want: adminOfA},
		{method: "DELETE", pattern: "/messages/{id}", path: msg(msgPriv, ""),
			want: [numPrincipals]int{s401, s404, s403, s204, s404}},
		{method: "GET", pattern: "/messages/{root}/replies", path: msg(msgPriv, "/replies"), want: inA},
		{method: "PUT", pattern: "/messages/{id}/reactions/{emoji}", path: msg(msgPriv, "/reactions/thumbsup"), want: inA},
		{method: "PUT", pattern: "/messages/{id}/reactions/{emoji}", variant: "public, not joined",
			path: msg(msgPub, "/reactions/"+url.PathEscape("+1")), want: adminOfA},
		{method: "DELETE", pattern: "/messages/{id}/reactions/{emoji}", path: msg(msgPriv, "/reactions/tada"), want: inA},
		{method: "PUT", pattern: "/messages/{id}/pin", path: msg(msgPriv, "/pin"), want: inA},
		{method: "DELETE", pattern: "/messages/{id}/pin", path: msg(msgPriv, "/pin"), want: inA},

		{method: "GET", pattern: "/workspaces/{ws}/threads", path: wsA("/threads?unread=true"), want: inA,
			check: func(t *testing.T, f *authzFixture, p principal, r *response) {
				var page parley.ThreadPage
				r.decode(t, &page)
				// admin follows the private thread (its root's author); member does not.
				if p == admin && (len(page.Threads) != 1 || page.Threads[0].RootID != f.msgPriv.ID || page.Threads[0].UnreadReplies != 1) ||
					p == member && len(page.Threads) != 0 {
					t.Errorf("threads as %s: %+v", principalNames[p], page.Threads)
				}
			}},
		{method: "PUT", pattern: "/threads/{root}/follow", variant: "private", path: thread(msgPriv, "/follow"), want: inA},
		{method: "PUT", pattern: "/threads/{root}/follow", variant: "public, not joined", path: thread(msgPub, "/follow"), want: inA},
		{method: "PUT", pattern: "/threads/{root}/follow", variant: "secret", path: thread(msgSecret, "/follow"), want: adminOnly},
		{method: "DELETE", pattern: "/threads/{root}/follow", path: thread(msgPriv, "/follow"), want: inA},
		{method: "DELETE", pattern: "/threads/{root}/follow", variant: "secret", path: thread(msgSecret, "/follow"), want: adminOnly},
		{method: "POST", pattern: "/threads/{root}/read", path: thread(msgPriv, "/read"), want: inA},
		{method: "POST", pattern: "/threads/{root}/read", variant: "secret", path: thread(msgSecret, "/read"), want: adminOnly},

		{method: "GET", pattern: "/channels/{id}/events", variant: "private", path: ch(priv, "/events"), want: inA},
		{method: "GET", pattern: "/channels/{id}/events", variant: "public", path: ch(pub, "/events"), want: inA},
		{method: "GET", pattern: "/channels/{id}/events", variant: "secret", path: ch(secret, "/events"), want: adminOnly},
		{method: "POST", pattern: "/sync", path: lit("/sync"),
			body: func(f *authzFixture) any { return map[string]any{"channels": map[string]int{f.priv.ID: 0}} },
			want: anyUser,
			check: func(t *testing.T, f *authzFixture, p principal, r *response) {
				var out struct {
					Channels map[string]map[string]any
				}
				r.decode(t, &out)
				res := out.Channels[f.priv.ID]
				if p == member || p == admin {
					if _, ok := res["events"]; !ok {
						t.Errorf("sync as %s: got %v, want events", principalNames[p], res)
					}
				} else if res["error"] != parley.ENOTFOUND {
					t.Errorf("sync as %s: got %v, want error not_found", principalNames[p], res)
				}
			}},
		{method: "GET", pattern: "/openapi.json", path: lit("/openapi.json"), want: allowAll},

		// Integrations.
		{method: "POST", pattern: "/workspaces/{ws}/bots", path: wsA("/bots"),
			body: func(*authzFixture) any { return map[string]string{"name": "Bot", "handle": "bot-" + uniq()} },
			want: adminCreates},
		{method: "GET", pattern: "/workspaces/{ws}/bots", path: wsA("/bots"), want: adminOfA},
		{method: "DELETE", pattern: "/workspaces/{ws}/bots/{bot_id}",
			path: func(f *authzFixture) string {
				return "/workspaces/" + f.wsA.ID + "/bots/" + f.integrations().bot.User.ID
			},
			want: adminDeletes},
		{method: "POST", pattern: "/workspaces/{ws}/bots/{bot_id}/tokens",
			path: func(f *authzFixture) string {
				return "/workspaces/" + f.wsA.ID + "/bots/" + f.integrations().bot.User.ID + "/tokens"
			},
			body: body(map[string]any{"scopes": []string{"chat:write"}}), want: adminCreates},
		{method: "GET", pattern: "/workspaces/{ws}/bots/{bot_id}/tokens",
			path: func(f *authzFixture) string {
				return "/workspaces/" + f.wsA.ID + "/bots/" + f.integrations().bot.User.ID + "/tokens"
			},
			want: adminOfA},
		{method: "DELETE", pattern: "/workspaces/{ws}/bot-tokens/{token_id}",
			path: func(f *authzFixture) string {
				return "/workspaces/" + f.wsA.ID + "/bot-tokens/" + f.integrations().token.ID
			},
			want: adminDeletes},
		{method: "GET", pattern: "/workspaces/{ws}/bot-audit", path: wsA("/bot-audit"), want: adminOfA},
		{method: "POST", pattern: "/channels/{id}/webhooks", variant: "private", path: ch(priv, "/webhooks"),
			body: body(map[string]string{"name": "CI"}), want: adminCreates},
		{method: "POST", pattern: "/channels/{id}/webhooks", variant: "secret", path: ch(secret, "/webhooks"),
			body: body(map[string]string{"name": "CI"}), want: [numPrincipals]int{s401, s404, s404, s201, s404}},
		{method: "GET", pattern: "/workspaces/{ws}/webhooks", path: wsA("/webhooks"), want: adminOfA},
		{method: "DELETE", pattern: "/workspaces/{ws}/webhooks/{hook_id}",
			path: func(f *authzFixture) string {
				return "/workspaces/" + f.wsA.ID + "/webhooks/" + f.integrations().hook.ID
			},
			want: adminDeletes},
		{method: "POST", pattern: "/hooks/{hook_id}/{secret}",
			path: func(f *authzFixture) string {
				in := f.integrations()
				return "/hooks/" + in.hook.ID + "/" + in.hookSecret
			},
			body: body(map[string]string{"text": "build passed"}), want: allowAll},
		{method: "POST", pattern: "/hooks/{hook_id}/{secret}", variant: "wrong secret",
			path: func(f *authzFixture) string { return "/hooks/" + f.integrations().hook.ID + "/nope" },
			body: body(map[string]string{"text": "build passed"}), want: [numPrincipals]int{s404, s404, s404, s404, s404}},
		{method: "POST", pattern: "/workspaces/{ws}/integrations", path: wsA("/integrations"),
			body: func(*authzFixture) any {
				return map[string]string{"kind": "command", "name": "c" + uniq(), "url": "https://example.com/cmd"}
			},
			want: adminCreates},
		{method: "GET", pattern: "/workspaces/{ws}/integrations", path: wsA("/integrations"), want: adminOfA},
		{method: "DELETE", pattern: "/workspaces/{ws}/integrations/{integration_id}",
			path: func(f *authzFixture) string {
				return "/workspaces/" + f.wsA.ID + "/integrations/" + f.integrations().command.ID
			},
			want: adminDeletes},
		{method: "GET", pattern: "/workspaces/{ws}/commands", path: wsA("/commands"), want: inA},
		{method: "POST", pattern: "/channels/{id}/commands", variant: "private", path: ch(priv, "/commands"),
			body: body(map[string]string{"command": "/shrug", "text": "ok"}), want: inA},
		{method: "POST", pattern: "/channels/{id}/commands", variant: "public, not joined", path: ch(pub, "/commands"),
			body: body(map[string]string{"command": "/shrug"}), want: adminOfA},
		{method: "POST", pattern: "/channels/{id}/commands", variant: "secret", path: ch(secret, "/commands"),
			body: body(map[string]string{"command": "/shrug"}), want: adminOnly},
		{method: "POST", pattern: "/command-responses/{token}",
			path: func(f *authzFixture) string { return "/command-responses/" + f.integrations().responseToken },
			body: body(map[string]string{"text": "done"}), want: allowAll},
		{method: "POST", pattern: "/command-responses/{token}", variant: "unknown token",
			path: lit("/command-responses/nope"),
			body: body(map[string]string{"text": "done"}), want: [numPrincipals]int{s404, s404, s404, s404, s404}},
		{method: "POST", pattern: "/workspaces/{ws}/files", path: wsA("/files?name=notes.txt"), body: body("some notes"), want: createInA},
		{method: "GET", pattern: "/files/{id}", variant: "private", path: file(filePriv, ""), want: inA},
		{method: "GET", pattern: "/files/{id}", variant: "secret", path: file(fileSecret, ""), want: adminOnly},
		{method: "GET", pattern: "/files/{id}", variant: "unattached", path: file(fileLoose, ""), want: adminOnly},
		{method: "DELETE", pattern: "/files/{id}", path: file(fileLoose, ""), want: [numPrincipals]int{s401, s404, s404, s204, s404}},
		{method: "GET", pattern: "/files/{id}/content", variant: "bearer, private", path: file(filePriv, "/content"), want: inA},
		{method: "GET", pattern: "/files/{id}/content", variant: "bearer, secret", path: file(fileSecret, "/content"), want: adminOnly},
		{method: "GET", pattern: "/files/{id}/content", variant: "bearer, unattached", path: file(fileLoose, "/content"), want: adminOnly},
		// A signed URL is the credential, whoever holds it; the store
		// still decides for the user it names.
		{method: "GET", pattern: "/files/{id}/content", variant: "signed for admin",
			path: func(f *authzFixture) string { return f.signedPriv }, want: allowAll},
		{method: "GET", pattern: "/files/{id}/content", variant: "signed for member, secret",
			path: func(f *authzFixture) string { return f.signedSecret }, want: [numPrincipals]int{s404, s404, s404, s404, s404}},
		{method: "GET", pattern: "/files/{id}/content", variant: "signature of another file",
			path: func(f *authzFixture) string {
				return "/files/" + f.fileSecret.ID + "/content?" + strings.SplitN(f.signedPriv, "?", 2)[1]
			}, want: [numPrincipals]int{s403, s403, s403, s403, s403}},
		{method: "GET", pattern: "/files/{id}/thumbnail", path: file(filePriv, "/thumbnail"), want: inA},
		{method: "GET", pattern: "/channels/{id}/files", variant: "private", path: ch(priv, "/files"), want: inA,
			check: func(t *testing.T, f *authzFixture, p principal, r *response) {
				var page parley.FilePage
				r.decode(t, &page)
				if len(page.Files) != 1 || page.Files[0].ID != f.filePriv.ID || page.Files[0].URL == "" {
					t.Errorf("channel files as %s: %+v", principalNames[p], page.Files)
				}
			}},
		{method: "GET", pattern: "/channels/{id}/files", variant: "secret", path: ch(secret, "/files"), want: adminOnly},
		{method: "POST", pattern: "/workspaces/{ws}/uploads", path: wsA("/uploads"),
			body: body(map[string]any{"name": "big.bin", "size": 100}), want: createInA},
		{method: "GET", pattern: "/uploads/{id}", path: upload(false, ""), want: adminOnly},
		{method: "PUT", pattern: "/uploads/{id}", path: upload(false, "?offset=0"), body: body(make([]byte, 10)), want: adminOnly},
		{method: "POST", pattern: "/uploads/{id}/complete", path: upload(true, "/complete"), want: [numPrincipals]int{s401, s404, s404, s201, s404}},
		{method: "DELETE", pattern: "/uploads/{id}", path: upload(false, ""), want: [numPrincipals]int{s401, s404, s404, s204, s404}},
	}
}

// TestAuthzRowsCoverRoutes fails when a route has no row in the matrix, or
// a row names a route that does not exist.
func TestAuthzRowsCoverRoutes(t *testing.T) {
	routes := map[string]bool{}
	for _, rt := range (&Server{}).routes() {
		routes[rt.Method+" "+strings.TrimPrefix(rt.Pattern, Prefix)] = false
	}
	for _, row := range authzRows() {
		key := row.method + " " + row.pattern
		if _, ok := routes[key]; !ok {
			t.Errorf("matrix row %q names no route", key)
		}
		routes[key] = true
	}
	for key, covered := range routes {
		if !covered {
			t.Errorf("route %s has no row in the authorization matrix", key)
		}
	}
}

func TestAuthzMatrix(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			clk := newClock()
			st := openStore(t, d, clk.Now)
			e := newEnvWithStore(t, st, clk, func(c *Config) {
				c.Rates = parley.LiveRatesOff()
				c.NotifySecret = authzNotifySecret
			})
			runMatrix(t, e, d)
		})
	}
}

// cellOrder runs the principals who can change nothing first and the admin
// last, so that one fixture per row is fresh enough for every cell: a
// destructive call (archive, delete, leave, logout) only ever succeeds at
// the end of its row, or changes nothing the later cells of the row look at.
var cellOrder = []principal{anonymous, outsider, otherAdmin, member, admin}

func runMatrix(t *testing.T, e *env, d sqlstore.Dialect) {
	for _, row := range authzRows() {
		name := row.method + " " + row.pattern
		if row.variant != "" {
			name += " (" + row.variant + ")"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newAuthzFixture(t, e.store)
			f.addFiles(t, e)
			for _, p := range cellOrder {
				t.Run(principalNames[p], func(t *testing.T) {
					ce := *e
					ce.t = t
					token := ""
					if p != anonymous {
						token = f.users[p].Token
					}
					var b any
					if row.body != nil {
						b = row.body(f)
					}
					r := ce.call(row.method, row.path(f), token, b)
					want := row.want[p]
					if r.Status != want {
						t.Fatalf("%s %s as %s on %s: status %d, want %d; body %s",
							row.method, row.pattern, principalNames[p], d, r.Status, want, r.Body)
					}
					// Webhook answers are Slack's plain words, not JSON errors.
					if want >= 400 && !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
						if code := r.errCode(); StatusOf(code) != want {
							t.Errorf("error code %q does not match status %d", code, want)
						}
					}
					if row.check != nil && want < 300 {
						row.check(t, f, p, r)
					}
				})
			}
		})
	}
}
