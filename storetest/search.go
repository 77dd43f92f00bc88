package storetest

import (
	"fmt"
	"strings"
	"testing"

	"parley"
)

func init() {
	register("Search/Match", testSearchMatch)
	register("Search/Paging", testSearchPaging)
	register("Search/Visibility", testSearchVisibility)
	register("Search/EditAndDelete", testSearchEditAndDelete)
	register("Search/Hostile", testSearchHostile)
	register("Search/Errors", testSearchErrors)
}

// searchAll pages through every result of q for actor and returns the
// messages' texts, newest first.
func searchAll(t *testing.T, s parley.Store, actor *parley.User, ws *parley.Workspace, q string, limit int) []parley.SearchResult {
	t.Helper()
	var out []parley.SearchResult
	sq := parley.SearchQuery{Q: q, Limit: limit}
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("search %q: paging does not end", q)
		}
		page, err := s.Search(ctx(t), actor.ID, ws.ID, sq)
		if err != nil {
			t.Fatalf("search %q as %s: %v", q, actor.Handle, err)
		}
		if limit > 0 && len(page.Results) > limit {
			t.Fatalf("search %q: %d results on a page of %d", q, len(page.Results), limit)
		}
		out = append(out, page.Results...)
		if page.NextCursor == "" {
			return out
		}
		if len(page.Results) == 0 {
			t.Fatalf("search %q: empty page with a next cursor", q)
		}
		sq.Cursor = page.NextCursor
	}
}

func searchTexts(t *testing.T, s parley.Store, actor *parley.User, ws *parley.Workspace, q string) []string {
	t.Helper()
	var out []string
	for _, r := range searchAll(t, s, actor, ws, q, 0) {
		out = append(out, r.Message.Text)
	}
	return out
}

func wantTexts(t *testing.T, q string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("search %q:\n got  %q\n want %q", q, got, want)
	}
}

// hl writes a highlighted span as the markers would.
func hl(s string) string { return parley.HighlightStart + s + parley.HighlightEnd }

// testSearchMatch: words are AND-ed, quotes make phrases, the last word is a
// prefix unless the query ends with a space, case does not matter, replies
// are found, and highlights wrap exactly the matched words in the stored
// text, punctuation untouched.
func testSearchMatch(t *testing.T, open Opener) {
	s := open(t, nil)
	owner := MustUser(t, s, "owner")
	ws := MustWorkspace(t, s, owner)
	ch := MustChannel(t, s, ws, owner, "ops", parley.KindPublic)
	texts := []string{
		"The deploy failed on node 3",          // 0
		"deployment finished, all green",       // 1
		"Failed to reach the database",         // 2
		"node failed deploy",                   // 3
		"mail alice@example.com about v2.1",    // 4
		"Straße ÉCOLE 東京 café",                 // 5
		"nothing to see here",                  // 6
		"release-notes are at docs/release.md", // 7
	}
	msgs := make([]*parley.Message, len(texts))
	for i, tx := range texts {
		msgs[i] = MustPost(t, s, owner, ch, tx)
	}
	reply, _, err := s.PostMessage(ctx(t), owner.ID, ch.ID, parley.NewMessage{Text: "a reply about the rollback", ThreadRootID: msgs[0].ID})
	NoErr(t, err)

	wantTexts(t, "failed", searchTexts(t, s, owner, ws, "failed "), texts[3], texts[2], texts[0])
	wantTexts(t, "deploy failed ", searchTexts(t, s, owner, ws, "deploy failed "), texts[3], texts[0])
	wantTexts(t, `"deploy failed"`, searchTexts(t, s, owner, ws, `"deploy failed"`), texts[0])
	wantTexts(t, `"failed deploy"`, searchTexts(t, s, owner, ws, `"failed deploy"`), texts[3])
	// The last word is a prefix while typing, not after a space.
	wantTexts(t, "deplo", searchTexts(t, s, owner, ws, "deplo"), texts[3], texts[1], texts[0])
	wantTexts(t, "deploy", searchTexts(t, s, owner, ws, "deploy"), texts[3], texts[1], texts[0])
	wantTexts(t, "deploy ", searchTexts(t, s, owner, ws, "deploy "), texts[3], texts[0])
	wantTexts(t, "DEPLOYMENT", searchTexts(t, s, owner, ws, "DEPLOYMENT"), texts[1])
	// Punctuation separates words in text and query alike.
	wantTexts(t, "example", searchTexts(t, s, owner, ws, "example "), texts[4])
	wantTexts(t, "alice@example.com", searchTexts(t, s, owner, ws, "alice@example.com"), texts[4])
	wantTexts(t, "v2", searchTexts(t, s, owner, ws, "v2 "), texts[4])
	wantTexts(t, "release.md", searchTexts(t, s, owner, ws, "release.md"), texts[7])
	wantTexts(t, "release", searchTexts(t, s, owner, ws, "release "), texts[7])
	// Letters of any script, case folded.
	wantTexts(t, "straße", searchTexts(t, s, owner, ws, "straße "), texts[5])
	wantTexts(t, "école", searchTexts(t, s, owner, ws, "école "), texts[5])
	wantTexts(t, "東京", searchTexts(t, s, owner, ws, "東京"), texts[5])
	// Replies are searchable.
	wantTexts(t, "rollback", searchTexts(t, s, owner, ws, "rollback"), reply.Text)
	wantTexts(t, "no match", searchTexts(t, s, owner, ws, "kubernetes"))

	one := func(q string) parley.SearchResult {
		t.Helper()
		rs := searchAll(t, s, owner, ws, q, 0)
		if len(rs) != 1 {
			t.Fatalf("search %q: %d results, want 1", q, len(rs))
		}
		return rs[0]
	}
	// A phrase is marked as one span or word by word, as the engine does.
	joined := strings.ReplaceAll(one(`"deploy failed"`).Highlight, parley.HighlightEnd+" "+parley.HighlightStart, " ")
	if got, want := joined, "The "+hl("deploy failed")+" on node 3"; got != want {
		t.Fatalf("phrase highlight = %q, want %q", got, want)
	}
	if got, want := one("DEPLOYM").Highlight, hl("deployment")+" finished, all green"; got != want {
		t.Fatalf("prefix highlight = %q, want %q", got, want)
	}
	if got, want := one("example").Highlight, "mail alice@"+hl("example")+".com about v2.1"; got != want {
		t.Fatalf("highlight inside an address = %q, want %q", got, want)
	}
	r := one("rollback")
	if r.Message.ID != reply.ID || r.Message.ThreadRootID != msgs[0].ID || r.Message.ChannelID != ch.ID || r.Message.Seq != reply.Seq {
		t.Fatalf("result message = %+v, want the reply %+v", r.Message, reply)
	}
}

// testSearchPaging: a common term pages newest first with no duplicates and
// no gaps, whatever the page size, and the last page has no cursor.
func testSearchPaging(t *testing.T, open Opener) {
	s := open(t, nil)
	owner := MustUser(t, s, "owner")
	ws := MustWorkspace(t, s, owner)
	a := MustChannel(t, s, ws, owner, "a", parley.KindPublic)
	b := MustChannel(t, s, ws, owner, "b", parley.KindPrivate)
	const n = 45
	var want []string
	for i := 0; i < n; i++ {
		ch := a
		if i%3 == 0 {
			ch = b
		}
		text := fmt.Sprintf("status update %02d", i)
		MustPost(t, s, owner, ch, text)
		if i%5 == 4 {
			MustPost(t, s, owner, ch, "unrelated chatter")
		}
		want = append([]string{text}, want...)
	}
	for _, limit := range []int{1, 7, 15, 20, 45, 100} {
		var got []string
		seen := map[string]bool{}
		for _, r := range searchAll(t, s, owner, ws, "status", limit) {
			if seen[r.Message.ID] {
				t.Fatalf("limit %d: %s twice", limit, r.Message.ID)
			}
			seen[r.Message.ID] = true
			got = append(got, r.Message.Text)
		}
		wantTexts(t, fmt.Sprintf("status, limit %d", limit), got, want...)
	}
	// The default page is DefaultLimit long.
	page, err := s.Search(ctx(t), owner.ID, ws.ID, parley.SearchQuery{Q: "update"})
	NoErr(t, err)
	if len(page.Results) != parley.DefaultSearchLimit || page.NextCursor == "" {
		t.Fatalf("default page: %d results, cursor %q", len(page.Results), page.NextCursor)
	}
	// A page that ends exactly at the last match has no cursor.
	page, err = s.Search(ctx(t), owner.ID, ws.ID, parley.SearchQuery{Q: "update", Limit: n})
	NoErr(t, err)
	if len(page.Results) != n || page.NextCursor != "" {
		t.Fatalf("exact page: %d results, cursor %q", len(page.Results), page.NextCursor)
	}
}

// testSearchVisibility: the visibility matrix. Members find public channels
// (joined or not, archived too), their private channels and DMs; never
// private channels or DMs they are not in, channels they left, or other
// workspaces. Guests find only their own channels. Outsiders get
// ENOTFOUND.
func testSearchVisibility(t *testing.T, open Opener) {
	s := open(t, nil)
	c := ctx(t)
	owner, member, guest, outsider := MustUser(t, s, "owner"), MustUser(t, s, "member"), MustUser(t, s, "guest"), MustUser(t, s, "outsider")
	ws := MustWorkspace(t, s, owner)
	MustJoinWorkspace(t, s, ws, owner, member)
	MustJoinWorkspace(t, s, ws, owner, guest)
	NoErr(t, s.SetMemberRole(c, owner.ID, ws.ID, guest.ID, parley.RoleGuest))
	other := MustWorkspace(t, s, outsider)

	general, err := s.ListChannels(c, owner.ID, ws.ID, parley.ChannelQuery{Q: "general"})
	NoErr(t, err)
	if len(general.Channels) != 1 {
		t.Fatalf("no #general: %+v", general.Channels)
	}
	pub := &general.Channels[0] // everyone's, the guest's included
	open1 := MustChannel(t, s, ws, owner, "open", parley.KindPublic)
	archived := MustChannel(t, s, ws, owner, "old", parley.KindPublic)
	secret := MustChannel(t, s, ws, owner, "secret", parley.KindPrivate)
	shared := MustChannel(t, s, ws, owner, "shared", parley.KindPrivate)
	left := MustChannel(t, s, ws, owner, "left", parley.KindPrivate)
	_, err = s.AddMembers(c, owner.ID, shared.ID, []string{member.ID, guest.ID})
	NoErr(t, err)
	_, err = s.AddMembers(c, owner.ID, left.ID, []string{member.ID})
	NoErr(t, err)
	dmOwnerMember, _, err := s.OpenDM(c, owner.ID, ws.ID, []string{member.ID})
	NoErr(t, err)
	dmOwnerGuest, _, err := s.OpenDM(c, owner.ID, ws.ID, []string{guest.ID})
	NoErr(t, err)
	elsewhere := MustChannel(t, s, other, outsider, "elsewhere", parley.KindPublic)

	post := func(ch *parley.Channel, where string) {
		MustPost(t, s, owner, ch, "needle in "+where)
	}
	post(pub, "general")
	post(open1, "open")
	post(archived, "old")
	post(secret, "secret")
	post(shared, "shared")
	post(left, "left")
	post(dmOwnerMember, "dm-member")
	post(dmOwnerGuest, "dm-guest")
	MustPost(t, s, outsider, elsewhere, "needle in elsewhere")
	_, err = s.ArchiveChannel(c, owner.ID, archived.ID)
	NoErr(t, err)
	NoErr(t, s.LeaveChannel(c, member.ID, left.ID))

	where := func(u *parley.User, w *parley.Workspace) []string {
		t.Helper()
		var out []string
		for _, txt := range searchTexts(t, s, u, w, "needle") {
			out = append(out, strings.TrimPrefix(txt, "needle in "))
		}
		return out
	}
	wantTexts(t, "needle as owner", where(owner, ws),
		"dm-guest", "dm-member", "left", "shared", "secret", "old", "open", "general")
	wantTexts(t, "needle as member", where(member, ws),
		"dm-member", "shared", "old", "open", "general")
	wantTexts(t, "needle as guest", where(guest, ws),
		"dm-guest", "shared", "general")
	wantTexts(t, "needle as outsider in their workspace", where(outsider, other), "elsewhere")
	_, err = s.Search(c, outsider.ID, ws.ID, parley.SearchQuery{Q: "needle"})
	Code(t, err, parley.ENOTFOUND)
	_, err = s.Search(c, member.ID, other.ID, parley.SearchQuery{Q: "needle"})
	Code(t, err, parley.ENOTFOUND)
}

// testSearchEditAndDelete: an edit re-indexes the text (the old words stop
// matching, the message keeps its place), a delete removes the message.
func testSearchEditAndDelete(t *testing.T, open Opener) {
	s := open(t, nil)
	c := ctx(t)
	owner := MustUser(t, s, "owner")
	ws := MustWorkspace(t, s, owner)
	ch := MustChannel(t, s, ws, owner, "ops", parley.KindPublic)
	first := MustPost(t, s, owner, ch, "typo in teh message")
	MustPost(t, s, owner, ch, "the second message")
	gone := MustPost(t, s, owner, ch, "this message will be deleted")

	wantTexts(t, "teh", searchTexts(t, s, owner, ws, "teh"), first.Text)
	_, err := s.EditMessage(c, owner.ID, first.ID, "fixed the message")
	NoErr(t, err)
	wantTexts(t, "teh after edit", searchTexts(t, s, owner, ws, "teh"))
	wantTexts(t, "fixed after edit", searchTexts(t, s, owner, ws, "fixed"), "fixed the message")
	wantTexts(t, "message after edit", searchTexts(t, s, owner, ws, "message "),
		gone.Text, "the second message", "fixed the message")

	NoErr(t, s.DeleteMessage(c, owner.ID, gone.ID))
	wantTexts(t, "deleted", searchTexts(t, s, owner, ws, "deleted"))
	wantTexts(t, "message after delete", searchTexts(t, s, owner, ws, "message "),
		"the second message", "fixed the message")
}

// testSearchHostile: nothing a user types is engine syntax. Quotes,
// parentheses, operators, column filters, wildcards and odd unicode either
// match literally or match nothing, never fail.
func testSearchHostile(t *testing.T, open Opener) {
	s := open(t, nil)
	owner := MustUser(t, s, "owner")
	ws := MustWorkspace(t, s, owner)
	ch := MustChannel(t, s, ws, owner, "ops", parley.KindPublic)
	target := `NEAR(foo bar) AND text:"x" OR -y * 'z' \ <-> !w & q:* ^ $1; DROP TABLE messages; --`
	MustPost(t, s, owner, ch, target)
	MustPost(t, s, owner, ch, "plain words only")

	for _, q := range []string{
		`"`, `""`, `"""`, `" "`, `(`, `)`, `()`, `*`, `-`, `--`, `:`, `:*`, `'`, `''`, `\`, `&`, `|`, `!`, `<->`,
		`NEAR`, `NEAR(`, `NEAR(foo bar`, `foo NEAR/2 bar`, `AND`, `OR`, `NOT`, `foo AND`, `OR bar`, `NOT foo`,
		`text:foo`, `text : foo`, `{text}: foo`, `message_search:foo`, `-foo`, `foo -bar`, `foo*`, `*foo`, `f*o`,
		`^foo`, `foo^`, `+foo`, `"foo" "bar`, `"unclosed phrase`, `a"b"c`, `'; DROP TABLE messages; --`,
		`$1`, `?`, `%`, `_`, `foo & bar | !baz`, `foo:*`, `foo:A`, `(foo | bar) <-> baz`,
		"\u0000", "\u200b", "\ue000", "e\u0301", "🙂", "日本語の検索", "ـــ", "𝔣𝔬𝔬", "a\tb\nc",
		strings.Repeat("x", 512), strings.Repeat("ab ", 16),
	} {
		if _, err := s.Search(ctx(t), owner.ID, ws.ID, parley.SearchQuery{Q: q}); err != nil {
			t.Fatalf("search %q: %v", q, err)
		}
	}
	// The operators in the text are words like any other.
	for _, q := range []string{`NEAR(foo bar)`, `near`, `"foo bar"`, `text:"x"`, `DROP TABLE messages`, `-y`, `q:*`, `and or`} {
		wantTexts(t, q, searchTexts(t, s, owner, ws, q), target)
	}
	wantTexts(t, "only punctuation", searchTexts(t, s, owner, ws, `"()*:-`))
}

// testSearchErrors: blank and oversized queries and bad cursors are
// EINVALID.
func testSearchErrors(t *testing.T, open Opener) {
	s := open(t, nil)
	owner := MustUser(t, s, "owner")
	ws := MustWorkspace(t, s, owner)
	for _, q := range []string{"", " ", "\t\n", strings.Repeat("x", 513), strings.Repeat("ab ", 17), "\xff"} {
		_, err := s.Search(ctx(t), owner.ID, ws.ID, parley.SearchQuery{Q: q})
		Code(t, err, parley.EINVALID)
	}
	for _, cur := range []string{"!!!", "bm9wZQ", "ZDA6"} {
		_, err := s.Search(ctx(t), owner.ID, ws.ID, parley.SearchQuery{Q: "x", Cursor: cur})
		Code(t, err, parley.EINVALID)
	}
}
