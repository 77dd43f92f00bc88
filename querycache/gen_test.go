package querycache

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"parley"
)

// A generated workspace for the benchmarks: users with realistic names and
// handles, channels of realistic sizes, DMs. It is deterministic (seeded),
// produced row by row from small tables so that it holds next to no memory
// of its own (the memory benchmark measures the cache, not the generator),
// and it feeds the cache through the same load path as the store does: a
// parley.DirectoryService whose ReadDirectory calls the visitor.

var firstNames = strings.Fields(`james mary john patricia robert jennifer michael linda william elizabeth
david barbara richard susan joseph jessica thomas sarah charles karen christopher lisa daniel nancy
matthew betty anthony margaret mark sandra donald ashley steven kimberly paul emily andrew donna joshua
michelle kenneth carol kevin amanda brian melissa george deborah timothy stephanie ronald rebecca edward
sharon jason laura jeffrey cynthia ryan kathleen jacob amy gary angela nicholas shirley eric anna
jonathan brenda stephen pamela larry emma justin nicole scott helen brandon samantha benjamin katherine
samuel christine gregory debra alexander rachel frank carolyn patrick janet raymond catherine jack maria
dennis heather jerry diane tyler ruth aaron julie jose olivia adam joyce nathan virginia henry victoria
douglas kelly zachary lauren peter christina kyle joan ethan evelyn walter judith noah megan jeremy
andrea christian cheryl keith hannah roger jacqueline terry martha gerald gloria harold teresa sean ann
austin sara carl madison arthur frances lawrence kathryn dylan janice jesse jean jordan abigail bryan
alice billy julia joe judy bruce sophia gabriel grace logan denise albert amber willie doris alan
marilyn juan danielle wayne beverly elijah isabella randy theresa roy diana vincent natalie ralph brittany
eugene charlotte russell marie bobby kayla mason alexis philip lori louis aiko chen dmitri fatima
hiroshi ingrid jamal kwame lars mei nadia omar priya quentin rosa siddharth tomas ursula xavier yusuf zoe`)

var lastNames = strings.Fields(`smith johnson williams brown jones garcia miller davis rodriguez martinez
hernandez lopez gonzalez wilson anderson thomas taylor moore jackson martin lee perez thompson white
harris sanchez clark ramirez lewis robinson walker young allen king wright scott torres nguyen hill
flores green adams nelson baker hall rivera campbell mitchell carter roberts gomez phillips evans turner
diaz parker cruz edwards collins reyes stewart morris morales murphy cook rogers gutierrez ortiz morgan
cooper peterson bailey reed kelly howard ramos kim cox ward richardson watson brooks chavez wood james
bennett gray mendoza ruiz hughes price alvarez castillo sanders patel myers long ross foster jimenez
powell jenkins perry russell sullivan bell coleman butler henderson barnes gonzales fisher vasquez
simmons romero jordan patterson alexander hamilton graham reynolds griffin wallace moreno west cole
hayes bryant herrera gibson ellis tran medina aguilar stevens murray ford castro marshall owens harrison
fernandez mcdonald woods washington kennedy wells vargas henry chen freeman webb tucker guzman burns
crawford olson simpson porter hunter gordon mendez silva shaw snyder mason dixon munoz hunt hicks holmes
palmer wagner black robertson boyd rose stone salazar fox warren mills meyer rice schmidt garza daniels
ferguson nichols stephens soto weaver ryan gardner payne grant dunn kelley spencer hawkins arnold pierce
yamamoto okafor novak kowalski andersson haddad ivanova nakamura oconnor fischer`)

var channelWords = strings.Fields(`eng design product sales marketing support ops infra data ml security
legal finance hr recruiting platform mobile web ios android api growth billing search payments docs
release oncall incidents random social announcements help feedback research qa devops analytics team
project launch roadmap planning standup retro offsite books music pets running coffee`)

// genConfig sizes a generated workspace.
type genConfig struct {
	users     int
	channels  int // public and private, besides #general
	dms       int
	groupDMs  int
	seed      uint64
	workspace string
	// userOffset shifts user numbers, so that two workspaces can share
	// some users (the same numbers give the same users).
	userOffset int
}

// genDir is a generated workspace as a directory source.
type genDir struct {
	cfg   genConfig
	chans []genChannel
	now   time.Time
}

type genChannel struct {
	id, name string
	kind     parley.ChannelKind
	members  []uint32 // user numbers (before userOffset)
}

func newGenDir(cfg genConfig) *genDir {
	g := &genDir{cfg: cfg, now: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	r := rand.New(rand.NewPCG(cfg.seed, 7))
	all := make([]uint32, cfg.users)
	for i := range all {
		all[i] = uint32(i)
	}
	g.chans = append(g.chans, genChannel{id: g.channelID(0), name: "general", kind: parley.KindPublic, members: all})
	pick := func(n int) []uint32 {
		seen := make(map[uint32]bool, n)
		out := make([]uint32, 0, n)
		for len(out) < n {
			u := uint32(r.IntN(cfg.users))
			if !seen[u] {
				seen[u] = true
				out = append(out, u)
			}
		}
		return out
	}
	names := map[string]bool{"general": true}
	for i := 1; i <= cfg.channels; i++ {
		// Most channels are small, some medium, a few large.
		var size int
		switch x := r.Float64(); {
		case x < 0.70:
			size = 3 + r.IntN(28)
		case x < 0.95:
			size = 30 + r.IntN(470)
		default:
			size = 500 + r.IntN(9500)
		}
		size = min(size, cfg.users)
		name := ""
		for name == "" || names[name] {
			name = channelWords[r.IntN(len(channelWords))] + "-" + channelWords[r.IntN(len(channelWords))]
			if r.IntN(3) == 0 {
				name += fmt.Sprintf("-%d", r.IntN(100))
			}
		}
		names[name] = true
		kind := parley.KindPublic
		if r.IntN(4) == 0 {
			kind = parley.KindPrivate
		}
		g.chans = append(g.chans, genChannel{id: g.channelID(i), name: name, kind: kind, members: pick(size)})
	}
	for i := range cfg.dms + cfg.groupDMs {
		kind, n := parley.KindDM, 2
		if i >= cfg.dms {
			kind, n = parley.KindGroupDM, 3+r.IntN(4)
		}
		g.chans = append(g.chans, genChannel{id: g.channelID(cfg.channels + 1 + i), kind: kind, members: pick(n)})
	}
	return g
}

func (g *genDir) channelID(i int) string { return fmt.Sprintf("C%s%020d", g.cfg.workspace, i) }

// userID, handle and name of user number i.
func (g *genDir) userID(i uint32) string { return fmt.Sprintf("U%026d", int(i)+g.cfg.userOffset) }

func genName(n int) (first, last string) {
	return firstNames[n%len(firstNames)], lastNames[(n/len(firstNames))%len(lastNames)]
}

func genHandle(n int) string {
	first, last := genName(n)
	h := first + "." + last
	if k := n / (len(firstNames) * len(lastNames)); k > 0 {
		h += fmt.Sprint(k + 1)
	}
	return h
}

func (g *genDir) user(i uint32) *parley.User {
	n := int(i) + g.cfg.userOffset
	first, last := genName(n)
	name := strings.ToUpper(first[:1]) + first[1:] + " " + strings.ToUpper(last[:1]) + last[1:]
	t := g.now.Add(-time.Duration(n) * time.Minute)
	return &parley.User{ID: g.userID(i), Handle: genHandle(n), Name: name, Title: "Engineer", CreatedAt: t, UpdatedAt: t}
}

func (g *genDir) channel(c *genChannel, i int) *parley.Channel {
	t := g.now.Add(-time.Duration(i) * time.Second)
	ch := &parley.Channel{ID: c.id, WorkspaceID: g.cfg.workspace, Name: c.name, Kind: c.kind,
		CreatedBy: g.userID(c.members[0]), MemberCount: int64(len(c.members)), LastSeq: int64(len(c.members)),
		CreatedAt: t, UpdatedAt: t}
	if c.kind.IsDM() {
		for _, u := range c.members {
			ch.DMUserIDs = append(ch.DMUserIDs, g.userID(u))
		}
	}
	return ch
}

func (g *genDir) memberships() int {
	n := 0
	for _, c := range g.chans {
		n += len(c.members)
	}
	return n
}

// ReadDirectory feeds the visitor as the store would.
func (g *genDir) ReadDirectory(_ context.Context, ws string, v parley.DirectoryVisitor) error {
	if ws != g.cfg.workspace {
		return parley.Errorf(parley.ENOTFOUND, "workspace not found")
	}
	for i := range g.cfg.users {
		role := parley.RoleMember
		if i == 0 {
			role = parley.RoleOwner
		}
		v.User(g.user(uint32(i)), role)
	}
	for i := range g.chans {
		v.Channel(g.channel(&g.chans[i], i))
	}
	for i := range g.chans {
		c := &g.chans[i]
		for _, u := range c.members {
			v.Member(c.id, g.userID(u))
		}
	}
	return nil
}

func (g *genDir) ChannelWorkspace(_ context.Context, id string) (string, error) {
	if strings.HasPrefix(id, "C"+g.cfg.workspace) {
		return g.cfg.workspace, nil
	}
	return "", parley.Errorf(parley.ENOTFOUND, "channel not found")
}

func (g *genDir) UsersBatch(context.Context, string, []string) ([]parley.User, error) {
	return nil, nil
}

// multiDir serves several generated workspaces.
type multiDir []*genDir

func (m multiDir) of(ws string) *genDir {
	for _, g := range m {
		if g.cfg.workspace == ws {
			return g
		}
	}
	return nil
}

func (m multiDir) ReadDirectory(ctx context.Context, ws string, v parley.DirectoryVisitor) error {
	if g := m.of(ws); g != nil {
		return g.ReadDirectory(ctx, ws, v)
	}
	return parley.Errorf(parley.ENOTFOUND, "workspace not found")
}

func (m multiDir) ChannelWorkspace(ctx context.Context, id string) (string, error) {
	for _, g := range m {
		if ws, err := g.ChannelWorkspace(ctx, id); err == nil {
			return ws, nil
		}
	}
	return "", parley.Errorf(parley.ENOTFOUND, "channel not found")
}

func (m multiDir) UsersBatch(context.Context, string, []string) ([]parley.User, error) {
	return nil, nil
}

// bulkInsert writes the generated workspace straight into a migrated
// database with multi-row INSERTs, much faster than signing 200,000 people
// up through the API. numbered says whether placeholders are $n
// (PostgreSQL) or ? (SQLite, which looks each $n up by name: quadratic in
// a statement of thousands).
func (g *genDir) bulkInsert(ctx context.Context, db *sql.DB, numbered bool) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	now := g.now.UnixMicro()
	ws := g.cfg.workspace
	if _, err := tx.ExecContext(ctx, `INSERT INTO orgs (id, name, created_at) VALUES ($1, $2, $3)`, "O"+ws, "Big", now); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO workspaces (id, org_id, name, slug, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $5)`, ws, "O"+ws, "Big", strings.ToLower(ws), now); err != nil {
		return err
	}
	rows := func(table, cols string, n int, row func(i int) []any) error {
		ncol := len(strings.Split(cols, ","))
		const chunk = 500
		for start := 0; start < n; start += chunk {
			end := min(start+chunk, n)
			var b strings.Builder
			args := make([]any, 0, (end-start)*ncol)
			for i := start; i < end; i++ {
				if i > start {
					b.WriteByte(',')
				}
				b.WriteByte('(')
				for c := range ncol {
					if c > 0 {
						b.WriteByte(',')
					}
					if numbered {
						fmt.Fprintf(&b, "$%d", len(args)+c+1)
					} else {
						b.WriteByte('?')
					}
				}
				b.WriteByte(')')
				args = append(args, row(i)...)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO `+table+` (`+cols+`) VALUES `+b.String(), args...); err != nil {
				return fmt.Errorf("insert %s: %w", table, err)
			}
		}
		return nil
	}
	if err := rows("users", "id, email, handle, name, title, password_hash, created_at, updated_at", g.cfg.users, func(i int) []any {
		u := g.user(uint32(i))
		return []any{u.ID, u.Handle + "@example.com", u.Handle, u.Name, u.Title, "x", u.CreatedAt.UnixMicro(), u.UpdatedAt.UnixMicro()}
	}); err != nil {
		return err
	}
	if err := rows("workspace_members", "workspace_id, user_id, role, joined_at", g.cfg.users, func(i int) []any {
		role := "member"
		if i == 0 {
			role = "owner"
		}
		return []any{ws, g.userID(uint32(i)), role, now}
	}); err != nil {
		return err
	}
	if err := rows("channels", "workspace_id, id, name, kind, created_by, dm_key, last_seq, created_at, updated_at", len(g.chans), func(i int) []any {
		c := g.channel(&g.chans[i], i)
		var dmKey any
		name := c.Name
		if c.Kind.IsDM() {
			ids := append([]string(nil), c.DMUserIDs...)
			dmKey = strings.Join(sortStrings(ids), ",")
		}
		return []any{ws, c.ID, name, string(c.Kind), c.CreatedBy, dmKey, c.LastSeq, c.CreatedAt.UnixMicro(), c.UpdatedAt.UnixMicro()}
	}); err != nil {
		return err
	}
	if err := rows("channel_stats", "workspace_id, channel_id, member_count", len(g.chans), func(i int) []any {
		return []any{ws, g.chans[i].id, len(g.chans[i].members)}
	}); err != nil {
		return err
	}
	type pair struct{ c, u int }
	var pairs []pair
	for ci, c := range g.chans {
		for _, u := range c.members {
			pairs = append(pairs, pair{ci, int(u)})
		}
	}
	if err := rows("channel_members", "workspace_id, channel_id, user_id, joined_at, last_read_seq", len(pairs), func(i int) []any {
		p := pairs[i]
		return []any{ws, g.chans[p.c].id, g.userID(uint32(p.u)), now, 0}
	}); err != nil {
		return err
	}
	return tx.Commit()
}

func sortStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}
