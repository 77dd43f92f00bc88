package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"testing"

	"parley"
	"parley/files"
	"parley/internal/s3test"
)

// The client's file calls end to end, on the local storage and on a real
// S3 server (versitygw).

func TestFilesLocal(t *testing.T) { testFiles(t, newEnv(t, false)) }

func TestFilesS3(t *testing.T) {
	srv := s3test.Start(t)
	storage, err := files.NewS3(context.Background(), files.S3Config{Endpoint: srv.Endpoint, Bucket: "parley-client",
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, PathStyle: true, CreateBucket: true})
	if err != nil {
		t.Fatal(err)
	}
	testFiles(t, newEnvWithFiles(t, false, storage))
}

func testFiles(t *testing.T, e *env) {
	ctx := context.Background()
	alice, bob := e.mustAccount("alice"), e.mustAccount("bob")
	ws := e.mustWorkspace(alice, bob)
	ch := e.mustChannel(ws, alice, parley.KindPublic)
	if _, err := bob.Client.JoinChannel(ctx, ch.ID); err != nil {
		t.Fatal(err)
	}
	small := []byte("hello, files")
	f, err := alice.Client.UploadFile(ctx, ws.ID, "hello.txt", bytes.NewReader(small), int64(len(small)))
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, files.PartSize*2+1234)
	rand.Read(big)
	var progress []int64
	g, err := alice.Client.UploadFileResumable(ctx, ws.ID, "big.bin", bytes.NewReader(big), int64(len(big)),
		func(n int64) { progress = append(progress, n) })
	if err != nil {
		t.Fatal(err)
	}
	if g.Size != int64(len(big)) || len(progress) != 3 || progress[2] != int64(len(big)) {
		t.Fatalf("resumable: %+v, progress %v", g, progress)
	}
	m, err := alice.Client.PostMessage(ctx, ch.ID, parley.NewMessage{Text: "two files", FileIDs: []string{f.ID, g.ID}})
	if err != nil || len(m.Files) != 2 {
		t.Fatalf("post: %+v, %v", m, err)
	}
	// Bob reads both: by token, and by his signed URL.
	rc, err := bob.Client.DownloadFile(ctx, g.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("download big: %d bytes, %v", len(got), err)
	}
	meta, err := bob.Client.GetFile(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Get(bob.Client.ResolveURL(meta.URL))
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !bytes.Equal(got, small) || res.Header.Get("Content-Disposition") == "" {
		t.Fatalf("signed download: %d %q", res.StatusCode, got)
	}
	page, err := bob.Client.ListChannelFiles(ctx, ch.ID, "", 0)
	if err != nil || len(page.Files) != 2 {
		t.Fatalf("list: %+v, %v", page, err)
	}
	// A file of another workspace is not found.
	carol := e.mustAccount("carol")
	e.mustWorkspace(carol)
	if _, err := carol.Client.GetFile(ctx, f.ID); !isStatus(err, http.StatusNotFound) {
		t.Fatalf("another workspace: %v", err)
	}
	// Deleting the message and sweeping removes the bytes from storage.
	if err := alice.Client.DeleteMessage(ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := e.files.Sweep(ctx); err != nil || n != 2 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	if _, err := e.files.Storage().Open(ctx, files.Key(ws.ID, g.ID)); err == nil {
		t.Fatal("the big file's bytes survived the sweep")
	}
	// Deleting the workspace's files leaves nothing under its prefix.
	loose, err := alice.Client.UploadFile(ctx, ws.ID, "loose.txt", bytes.NewReader(small), -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.files.DeleteWorkspaceFiles(ctx, ws.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.files.Storage().Open(ctx, files.Key(ws.ID, loose.ID)); err == nil {
		t.Fatal("a file survived DeleteWorkspaceFiles")
	}
	if _, err := alice.Client.GetFile(ctx, loose.ID); !isStatus(err, http.StatusNotFound) {
		t.Fatalf("after DeleteWorkspaceFiles: %v", err)
	}
}

func isStatus(err error, status int) bool {
	ae, ok := err.(*APIError)
	return ok && ae.Status == status
}
