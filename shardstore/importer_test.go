package shardstore_test

import (
	"bytes"
	"testing"

	"parley"
	"parley/storetest"
	"parley/transfer"
	"parley/transfer/transfertest"
)

// TestImportOntoItsShard: a Slack export imported through the router
// lands on the shard the catalogue placed its workspace on, not in the
// default database; its accounts are the control database's (matched by
// email there, or created there and claimed there by a signup); a second
// run imports nothing twice; a slug taken on another shard is found there.
func TestImportOntoItsShard(t *testing.T) {
	c := newClusterN(t, &storetest.Recorder{}, 2)
	r := c.r
	owner := storetest.MustUser(t, r, "owner")
	ada, err := r.CreateUser(bg(), parley.NewUser{Email: "ADA@example.com", Handle: "ada", Name: "Ada", PasswordHash: "x"})
	storetest.NoErr(t, err)
	// Fresh shards, equal loads: the first placement takes the default
	// shard (ties go by id), the import's the other one.
	first := storetest.MustWorkspace(t, r, owner)
	if got := c.shardOf(t, first.ID); got != c.shards[0] {
		t.Fatalf("first workspace placed on %s, want the default %s", got, c.shards[0])
	}

	ex := transfertest.Generate(transfertest.Config{Seed: 4, Messages: 300, NoEdge: true})
	read := func() *transfer.Source {
		src, err := transfer.ReadSlack(bytes.NewReader(ex.Zip), int64(len(ex.Zip)))
		storetest.NoErr(t, err)
		return src
	}
	opts := transfer.Options{OwnerID: owner.ID, Slug: "imported", Batch: 100}
	sum, err := transfer.Import(bg(), r, read(), opts)
	storetest.NoErr(t, err)
	want := 0
	for _, ms := range ex.Messages {
		want += len(ms)
	}
	if !sum.WorkspaceCreated || sum.Messages != want || sum.Messages == 0 || sum.UsersMatched != 1 || sum.UsersCreated == 0 {
		t.Fatalf("summary %+v; want a new workspace, %d messages, ada matched", sum, want)
	}
	ws := sum.WorkspaceID
	target := c.shards[1]
	if got := c.shardOf(t, ws); got != target {
		t.Fatalf("imported workspace placed on %s, want %s", got, target)
	}
	def, err := r.Shard(bg(), c.shards[0])
	storetest.NoErr(t, err)
	on, err := r.Shard(bg(), target)
	storetest.NoErr(t, err)
	if _, _, err := def.WorkspaceOwner(bg(), "imported"); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("the default database has the imported workspace (err %v)", err)
	}
	if id, o, err := on.WorkspaceOwner(bg(), "imported"); err != nil || id != ws || o != owner.ID {
		t.Fatalf("shard %s: workspace %q owned by %q (%v), want %s owned by %s", target, id, o, err, ws, owner.ID)
	}
	b, err := r.Boot(bg(), owner.ID, parley.BootQuery{WorkspaceID: ws})
	storetest.NoErr(t, err)
	withHistory := 0
	for _, ch := range b.Channels {
		if ch.LastSeq == 0 {
			continue
		}
		withHistory++
		if _, err := def.ChannelWorkspace(bg(), ch.ID); parley.ErrorCode(err) != parley.ENOTFOUND {
			t.Fatalf("channel %s is in the default database (err %v)", ch.Name, err)
		}
		if got, err := on.ChannelWorkspace(bg(), ch.ID); err != nil || got != ws {
			t.Fatalf("channel %s on shard %s: %q, %v", ch.Name, target, got, err)
		}
	}
	if withHistory == 0 {
		t.Fatalf("no imported channel has history: %+v", b.Channels)
	}
	members, err := r.WorkspaceUsers(bg(), ws, []string{ada.ID})
	storetest.NoErr(t, err)
	if len(members) != 1 {
		t.Fatalf("ada (matched by email on the control database) is not a member: %+v", members)
	}
	if sum.Files > 0 {
		pending, err := r.PendingImportFiles(bg(), ws, "", 0, 1000)
		storetest.NoErr(t, err)
		if len(pending) != sum.Files {
			t.Fatalf("pending files = %d, want %d", len(pending), sum.Files)
		}
		if left, err := def.PendingImportFiles(bg(), ws, "", 0, 1000); err != nil || len(left) != 0 {
			t.Fatalf("the default database has %d of its pending files (%v)", len(left), err)
		}
	}

	// A created account is the control database's: a signup with its
	// email claims it there.
	var created string
	for _, u := range ex.Users {
		if u.Email != "" && !u.Bot && u.Email != "ada@example.com" {
			created = u.Email
			break
		}
	}
	if created == "" {
		t.Fatal("the export has no user to create")
	}
	claimed, err := r.CreateUser(bg(), parley.NewUser{Email: created, Handle: "claimer", Name: "Claimer", PasswordHash: "x"})
	storetest.NoErr(t, err)
	members, err = r.WorkspaceUsers(bg(), ws, []string{claimed.ID})
	storetest.NoErr(t, err)
	if len(members) != 1 {
		t.Fatalf("the signup of %s did not claim its imported account (user %s is not a member)", created, claimed.ID)
	}
	if m := members[0]; m.Deactivated || m.Handle != "claimer" {
		t.Fatalf("the claimed account on shard %s = %+v; want it active as claimer", target, m)
	}

	// Again: nothing twice.
	again, err := transfer.Import(bg(), r, read(), opts)
	storetest.NoErr(t, err)
	if again.WorkspaceCreated || again.WorkspaceID != ws || again.Messages != 0 || again.AlreadyImported != sum.Messages ||
		again.UsersCreated+again.UsersMatched != 0 || again.ChannelsCreated != 0 {
		t.Fatalf("second run: %+v", again)
	}

	// The slug of a workspace on the other shard is found there: another
	// owner is refused, not given a second workspace of that slug.
	other := storetest.MustUser(t, r, "other")
	_, err = transfer.Import(bg(), r, read(), transfer.Options{OwnerID: other.ID, Slug: first.Slug, Batch: 100})
	storetest.Code(t, err, parley.EFORBIDDEN)
	_, _, err = r.ImportWorkspace(bg(), other.ID, "x", "Not A Slug")
	storetest.Code(t, err, parley.EINVALID)

	// A shard that does not answer may hold the slug: nothing is created.
	setConnections(t, c.dsns[1], false)
	t.Cleanup(func() { setConnections(t, c.dsns[1], true) })
	_, _, err = r.ImportWorkspace(bg(), owner.ID, "Fresh", "fresh")
	storetest.Code(t, err, parley.EUNAVAILABLE)
	if _, _, err := def.WorkspaceOwner(bg(), "fresh"); parley.ErrorCode(err) != parley.ENOTFOUND {
		t.Fatalf("a workspace was created while a shard was down (err %v)", err)
	}
}
