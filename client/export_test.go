package client

import (
	"bytes"
	"testing"

	"parley"
	"parley/transfer"
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
