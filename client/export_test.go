package client

import (
	"bytes"
	"testing"

	"parley"
	"parley/sqlstore"
	"parley/transfer"
	"parley/transfer/transfertest"
)

// TestExportWorkspace downloads an export over HTTP and reads it back; a
// member who is not the owner is refused.
func TestExportWorkspace(t *testing.T) {
	e := newEnv(t, false)
	ctx := t.Context()
	alice, bob := e.mustAccount("alice"), e.mustAccount("bob")
	ws, err := alice.Client.CreateWorkspace(ctx, "Acme", "acme-"+uniq())
	if err != nil {
		t.Fatal(err)
	}
	inv, err := alice.Client.CreateInvite(ctx, ws.ID, parley.InviteParams{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Client.AcceptInvite(ctx, inv.Code); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := bob.Client.ExportWorkspace(ctx, ws.ID, false, &buf); ErrorCode(err) != parley.EFORBIDDEN || buf.Len() != 0 {
		t.Fatalf("export by a member: %v (%d bytes)", err, buf.Len())
	}
	n, err := alice.Client.ExportWorkspace(ctx, ws.ID, true, &buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("export: %d bytes, %v", n, err)
	}
	src, err := transfer.ReadParley(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if len(src.Users) != 2 || len(src.Channels) != 1 || src.Channels[0].Name != "general" || src.WorkspaceName != "Acme" {
		t.Fatalf("export read back: %d users, channels %+v", len(src.Users), src.Channels)
	}
}

// TestClaimBySignup: over HTTP, signing up with the email of an account a
// Slack import created logs in as that account, with its history.
func TestClaimBySignup(t *testing.T) {
	e := newEnv(t, false)
	ctx := t.Context()
	owner := e.mustAccount("owner")
	st := e.store.(*sqlstore.Store)
	ex := transfertest.Generate(transfertest.Config{Seed: 21, Messages: 200, NoEdge: true})
	src, err := transfer.ReadSlack(bytes.NewReader(ex.Zip), int64(len(ex.Zip)))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := transfer.Import(ctx, st, src, transfer.Options{OwnerID: owner.ID, Slug: "acme-" + uniq()})
	if err != nil {
		t.Fatal(err)
	}
	imported, err := st.ImportUsers(ctx, sum.WorkspaceID, parley.ImportSlack, []parley.ImportUser{{ExtID: "U0002"}})
	if err != nil || !imported[0].Mapped {
		t.Fatalf("imported user: %+v %v", imported, err)
	}
	c := New(e.srv.URL)
	if _, err := c.Login(ctx, "user01@corp.example", testPassword); ErrorCode(err) != parley.EUNAUTHORIZED {
		t.Fatalf("login before the claim: %v", err)
	}
	a, err := c.Signup(ctx, "user01@corp.example", testPassword, "User One", "one-"+uniq())
	if err != nil {
		t.Fatal(err)
	}
	if a.User.ID != imported[0].UserID {
		t.Fatalf("signup made %s, not the imported account %s", a.User.ID, imported[0].UserID)
	}
	ws, err := c.ListWorkspaces(ctx)
	if err != nil || len(ws) != 1 || ws[0].ID != sum.WorkspaceID {
		t.Fatalf("the claimed account's workspaces: %+v %v", ws, err)
	}
}
