package storetest

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"parley"
)

// Contract tests of file metadata (parley.FileService): who may see and
// attach a file, across workspaces and private channels; attachments on
// messages, their events and history; quotas; deletion with the message
// and the sweep; resumable upload bookkeeping; workspace deletion.

func init() {
	register("Files/Visibility", testFileVisibility)
	register("Files/Attach", testFileAttach)
	register("Files/AttachRefused", testFileAttachRefused)
	register("Files/Quota", testFileQuota)
	register("Files/DeleteWithMessage", testFileDeleteWithMessage)
	register("Files/ListChannel", testFileListChannel)
	register("Files/Uploads", testFileUploads)
	register("Files/DeleteWorkspace", testFileDeleteWorkspace)
	register("Files/SigningKey", testFileSigningKey)
	register("Files/QuotaRace", testFileQuotaRace)
}

func fileService(tb testing.TB, s parley.Store) parley.FileService {
	tb.Helper()
	fs, ok := s.(parley.FileService)
	if !ok {
		tb.Fatalf("%T does not implement parley.FileService", s)
	}
	return fs
}

// mustFile records a file of size bytes uploaded by u to ws.
func mustFile(tb testing.TB, fs parley.FileService, u *parley.User, ws *parley.Workspace, size int64) *parley.File {
	tb.Helper()
	id := parley.NewID(parley.PrefixFile)
	f, err := fs.CreateFile(ctx(tb), u.ID, ws.ID, parley.File{ID: id, Name: "report.pdf", Size: size,
		ContentType: "application/pdf", StorageKey: "w/" + ws.ID + "/" + id}, parley.FileQuota{})
	if err != nil {
		tb.Fatalf("create file: %v", err)
	}
	return f
}

func wantCode(tb testing.TB, what string, err error, code string) {
	tb.Helper()
	if got := parley.ErrorCode(err); got != code {
		tb.Fatalf("%s: got %v (code %q), want code %q", what, err, got, code)
	}
}

type fileWorld struct {
	s             parley.Store
	fs            parley.FileService
	rec           *Recorder
	alice, bob    *parley.User // both in ws
	carol         *parley.User // in ws2 only
	ws, ws2       *parley.Workspace
	general, priv *parley.Channel // public and private (alice only) in ws
	other         *parley.Channel // public in ws2
}

func newFileWorld(t *testing.T, open Opener) *fileWorld {
	w := &fileWorld{rec: &Recorder{}}
	w.s = open(t, w.rec)
	w.fs = fileService(t, w.s)
	w.alice, w.bob, w.carol = MustUser(t, w.s, "alice"), MustUser(t, w.s, "bob"), MustUser(t, w.s, "carol")
	w.ws, w.ws2 = MustWorkspace(t, w.s, w.alice), MustWorkspace(t, w.s, w.carol)
	MustJoinWorkspace(t, w.s, w.ws, w.alice, w.bob)
	w.general = MustChannel(t, w.s, w.ws, w.alice, "files", parley.KindPublic)
	if _, err := w.s.JoinChannel(ctx(t), w.bob.ID, w.general.ID); err != nil {
		t.Fatal(err)
	}
	w.priv = MustChannel(t, w.s, w.ws, w.alice, "secret", parley.KindPrivate)
	w.other = MustChannel(t, w.s, w.ws2, w.carol, "elsewhere", parley.KindPublic)
	return w
}

func (w *fileWorld) post(t *testing.T, u *parley.User, ch *parley.Channel, text string, ids ...string) (*parley.Message, error) {
	m, _, err := w.s.PostMessage(ctx(t), u.ID, ch.ID, parley.NewMessage{Text: text, FileIDs: ids})
	return m, err
}

func testFileVisibility(t *testing.T, open Opener) {
	w := newFileWorld(t, open)
	f := mustFile(t, w.fs, w.alice, w.ws, 10)
	if got, err := w.fs.GetFile(ctx(t), w.alice.ID, f.ID); err != nil || got.ID != f.ID || got.UserID != w.alice.ID {
		t.Fatalf("uploader reads unattached file: %+v, %v", got, err)
	}
	_, err := w.fs.GetFile(ctx(t), w.bob.ID, f.ID)
	wantCode(t, "another member reads an unattached file", err, parley.ENOTFOUND)
	_, err = w.fs.GetFile(ctx(t), w.carol.ID, f.ID)
	wantCode(t, "another workspace reads it", err, parley.ENOTFOUND)

	if _, err := w.post(t, w.alice, w.general, "attached", f.ID); err != nil {
		t.Fatal(err)
	}
	got, err := w.fs.GetFile(ctx(t), w.bob.ID, f.ID)
	if err != nil || got.ChannelID != w.general.ID || got.MessageID == "" {
		t.Fatalf("member reads attached file: %+v, %v", got, err)
	}
	_, err = w.fs.GetFile(ctx(t), w.carol.ID, f.ID)
	wantCode(t, "another workspace reads the attached file", err, parley.ENOTFOUND)

	p := mustFile(t, w.fs, w.alice, w.ws, 10)
	if _, err := w.post(t, w.alice, w.priv, "private", p.ID); err != nil {
		t.Fatal(err)
	}
	_, err = w.fs.GetFile(ctx(t), w.bob.ID, p.ID)
	wantCode(t, "non-member reads a private channel's file", err, parley.ENOTFOUND)
	_, err = w.fs.ListChannelFiles(ctx(t), w.bob.ID, w.priv.ID, "", 0)
	wantCode(t, "non-member lists a private channel's files", err, parley.ENOTFOUND)
	_, err = w.fs.GetFile(ctx(t), w.alice.ID, "Fnope")
	wantCode(t, "unknown file", err, parley.ENOTFOUND)
}

func testFileAttach(t *testing.T, open Opener) {
	w := newFileWorld(t, open)
	a, b := mustFile(t, w.fs, w.alice, w.ws, 100), mustFile(t, w.fs, w.alice, w.ws, 200)
	m, err := w.post(t, w.alice, w.general, "", b.ID, a.ID) // files alone need no text
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Files) != 2 || m.Files[0].ID != b.ID || m.Files[1].ID != a.ID || m.Files[0].Size != 200 {
		t.Fatalf("posted message files: %+v", m.Files)
	}
	if m.Files[0].StorageKey != "" || m.Files[0].URL != "" {
		t.Fatalf("a message's file carries internals: %+v", m.Files[0])
	}
	got, err := w.s.GetMessage(ctx(t), w.bob.ID, m.ID)
	if err != nil || len(got.Files) != 2 || got.Files[1].ID != a.ID || got.Files[1].Name != "report.pdf" {
		t.Fatalf("read back: %+v, %v", got, err)
	}
	page, err := w.s.ListMessages(ctx(t), w.bob.ID, w.general.ID, parley.HistoryQuery{})
	if err != nil || len(page.Messages) == 0 || len(page.Messages[len(page.Messages)-1].Files) != 2 {
		t.Fatalf("history: %+v, %v", page, err)
	}
	// The message.created event carries them.
	var found bool
	for _, ev := range w.rec.OfType(parley.EventMessageCreated) {
		var d struct {
			Message parley.Message `json:"message"`
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Message.ID == m.ID {
			found = len(d.Message.Files) == 2 && d.Message.Files[0].ID == b.ID
		}
	}
	if !found {
		t.Fatal("message.created does not carry the files")
	}
	// An edit keeps them, and so does its event.
	ed, err := w.s.EditMessage(ctx(t), w.alice.ID, m.ID, "now with text")
	if err != nil || len(ed.Files) != 2 {
		t.Fatalf("edit: %+v, %v", ed, err)
	}
	// A retried post (same client_msg_id) returns the first message, files
	// and all, although the files are attached now.
	c := mustFile(t, w.fs, w.alice, w.ws, 1)
	nm := parley.NewMessage{Text: "once", ClientMsgID: "retry-1", FileIDs: []string{c.ID}}
	first, created, err := w.s.PostMessage(ctx(t), w.alice.ID, w.general.ID, nm)
	if err != nil || !created {
		t.Fatal(err)
	}
	again, created, err := w.s.PostMessage(ctx(t), w.alice.ID, w.general.ID, nm)
	if err != nil || created || again.ID != first.ID || len(again.Files) != 1 {
		t.Fatalf("retry: %+v created=%v %v", again, created, err)
	}
}

func testFileAttachRefused(t *testing.T, open Opener) {
	w := newFileWorld(t, open)
	mine := mustFile(t, w.fs, w.alice, w.ws, 1)
	theirs := mustFile(t, w.fs, w.bob, w.ws, 1)
	foreign := mustFile(t, w.fs, w.carol, w.ws2, 1)
	_, err := w.post(t, w.alice, w.general, "x", theirs.ID)
	wantCode(t, "attach another member's file", err, parley.ENOTFOUND)
	_, err = w.post(t, w.carol, w.other, "x", mine.ID)
	wantCode(t, "attach a file of another workspace", err, parley.ENOTFOUND)
	if _, err := w.s.CreateChannel(ctx(t), w.carol.ID, w.ws2.ID, parley.NewChannel{Name: "x2", Kind: parley.KindPublic}); err != nil {
		t.Fatal(err)
	}
	_, err = w.post(t, w.alice, w.general, "x", foreign.ID) // carol's file of ws2
	wantCode(t, "attach ws2's file in ws", err, parley.ENOTFOUND)
	_, err = w.post(t, w.alice, w.general, "x", mine.ID, mine.ID)
	wantCode(t, "the same file twice", err, parley.EINVALID)
	ids := make([]string, parley.MaxFilesPerMessage+1)
	for i := range ids {
		ids[i] = mustFile(t, w.fs, w.alice, w.ws, 1).ID
	}
	_, err = w.post(t, w.alice, w.general, "x", ids...)
	wantCode(t, "too many files", err, parley.EINVALID)
	// Nothing was attached by the refused posts.
	if _, err := w.post(t, w.alice, w.general, "x", mine.ID); err != nil {
		t.Fatalf("a refused post left its file attached: %v", err)
	}
	_, err = w.post(t, w.alice, w.general, "again", mine.ID)
	wantCode(t, "attach a file twice", err, parley.ENOTFOUND)
	_, err = w.post(t, w.alice, w.general, "  ")
	wantCode(t, "blank text without files", err, parley.EINVALID)
}

func testFileQuota(t *testing.T, open Opener) {
	w := newFileWorld(t, open)
	q := parley.FileQuota{MaxFileBytes: 1000, WorkspaceMaxBytes: 2500}
	newFile := func(size int64) (*parley.File, error) {
		id := parley.NewID(parley.PrefixFile)
		return w.fs.CreateFile(ctx(t), w.alice.ID, w.ws.ID, parley.File{ID: id, Name: "f.bin", Size: size,
			ContentType: "application/octet-stream", StorageKey: "w/" + w.ws.ID + "/" + id}, q)
	}
	_, err := newFile(1001)
	wantCode(t, "over the per-file limit", err, parley.ETOOLARGE)
	a, err := newFile(1000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newFile(1000); err != nil {
		t.Fatal(err)
	}
	_, err = newFile(600)
	wantCode(t, "over the workspace quota", err, parley.ETOOLARGE)
	_, err = w.fs.CreateUpload(ctx(t), w.alice.ID, w.ws.ID, parley.NewUpload{ID: "Uq", FileID: "Fq", Name: "big",
		Size: 600, ChunkSize: 100, StorageKey: "k", BackendID: "b", ExpiresAt: time.Now().Add(time.Hour)}, q)
	wantCode(t, "an upload over the quota", err, parley.ETOOLARGE)
	// Another workspace has its own quota.
	id := parley.NewID(parley.PrefixFile)
	if _, err := w.fs.CreateFile(ctx(t), w.carol.ID, w.ws2.ID, parley.File{ID: id, Name: "f", Size: 1000,
		ContentType: "x", StorageKey: "k"}, q); err != nil {
		t.Fatalf("ws2 upload: %v", err)
	}
	// Deleting frees the bytes: an unattached file by its uploader, an
	// attached one with its message.
	if err := w.fs.DeleteFile(ctx(t), w.alice.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	b, err := newFile(900)
	if err != nil {
		t.Fatalf("after freeing: %v", err)
	}
	m, err := w.post(t, w.alice, w.general, "x", b.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = newFile(700)
	wantCode(t, "full again", err, parley.ETOOLARGE)
	if err := w.s.DeleteMessage(ctx(t), w.alice.ID, m.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := newFile(700); err != nil {
		t.Fatalf("after deleting the message: %v", err)
	}
	// Members only.
	_, err = w.fs.CreateFile(ctx(t), w.carol.ID, w.ws.ID, parley.File{ID: parley.NewID(parley.PrefixFile), Name: "f",
		Size: 1, ContentType: "x", StorageKey: "k"}, parley.FileQuota{})
	wantCode(t, "a non-member uploads", err, parley.ENOTFOUND)
	_, err = w.fs.CreateFile(ctx(t), w.alice.ID, w.ws.ID, parley.File{ID: parley.NewID(parley.PrefixFile), Name: "a/b",
		Size: 1, ContentType: "x", StorageKey: "k"}, parley.FileQuota{})
	wantCode(t, "a name with a slash", err, parley.EINVALID)
}

func testFileDeleteWithMessage(t *testing.T, open Opener) {
	w := newFileWorld(t, open)
	f := mustFile(t, w.fs, w.alice, w.ws, 5)
	m, err := w.post(t, w.alice, w.general, "bye", f.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sw, err := w.fs.SweepFiles(ctx(t), 100); err != nil || len(sw) != 0 {
		t.Fatalf("sweep before delete: %v, %v", sw, err)
	}
	err = w.fs.DeleteFile(ctx(t), w.alice.ID, f.ID)
	wantCode(t, "delete an attached file", err, parley.ECONFLICT)
	if err := w.s.DeleteMessage(ctx(t), w.alice.ID, m.ID); err != nil {
		t.Fatal(err)
	}
	_, err = w.fs.GetFile(ctx(t), w.alice.ID, f.ID)
	wantCode(t, "a deleted message's file", err, parley.ENOTFOUND)
	page, err := w.fs.ListChannelFiles(ctx(t), w.alice.ID, w.general.ID, "", 0)
	if err != nil || len(page.Files) != 0 {
		t.Fatalf("channel files after delete: %+v, %v", page, err)
	}
	sw, err := w.fs.SweepFiles(ctx(t), 100)
	if err != nil || len(sw) != 1 || sw[0].ID != f.ID || sw[0].StorageKey != f.StorageKey {
		t.Fatalf("sweep: %+v, %v", sw, err)
	}
	if err := w.fs.PurgeFiles(ctx(t), []string{f.ID}); err != nil {
		t.Fatal(err)
	}
	if sw, err := w.fs.SweepFiles(ctx(t), 100); err != nil || len(sw) != 0 {
		t.Fatalf("sweep after purge: %v, %v", sw, err)
	}
}

func testFileListChannel(t *testing.T, open Opener) {
	w := newFileWorld(t, open)
	var want []string
	for i := 0; i < 5; i++ {
		f := mustFile(t, w.fs, w.alice, w.ws, 1)
		if _, err := w.post(t, w.alice, w.general, "f", f.ID); err != nil {
			t.Fatal(err)
		}
		want = append([]string{f.ID}, want...) // newest first
	}
	mustFile(t, w.fs, w.alice, w.ws, 1) // unattached: not listed
	var got []string
	cursor := ""
	for {
		page, err := w.fs.ListChannelFiles(ctx(t), w.bob.ID, w.general.ID, cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range page.Files {
			got = append(got, f.ID)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if len(got) != len(want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("listed %v, want %v", got, want)
		}
	}
	_, err := w.fs.ListChannelFiles(ctx(t), w.carol.ID, w.general.ID, "", 0)
	wantCode(t, "another workspace lists the channel's files", err, parley.ENOTFOUND)
}

func testFileUploads(t *testing.T, open Opener) {
	w := newFileWorld(t, open)
	exp := time.Now().Add(time.Hour)
	u, err := w.fs.CreateUpload(ctx(t), w.alice.ID, w.ws.ID, parley.NewUpload{ID: parley.NewID("U"), FileID: parley.NewID(parley.PrefixFile),
		Name: "movie.mp4", Size: 250, ChunkSize: 100, StorageKey: "w/k", BackendID: "b1", ExpiresAt: exp}, parley.FileQuota{})
	if err != nil {
		t.Fatal(err)
	}
	if u.Offset != 0 || u.Size != 250 || u.ChunkSize != 100 {
		t.Fatalf("created: %+v", u)
	}
	_, err = w.fs.GetUpload(ctx(t), w.bob.ID, u.ID)
	wantCode(t, "another user's upload", err, parley.ENOTFOUND)
	_, err = w.fs.AdvanceUpload(ctx(t), w.bob.ID, u.ID, 0, 100)
	wantCode(t, "another user advances it", err, parley.ENOTFOUND)
	if u, err = w.fs.AdvanceUpload(ctx(t), w.alice.ID, u.ID, 0, 100); err != nil || u.Offset != 100 {
		t.Fatalf("advance: %+v, %v", u, err)
	}
	_, err = w.fs.AdvanceUpload(ctx(t), w.alice.ID, u.ID, 0, 100)
	wantCode(t, "advance from a stale offset", err, parley.ECONFLICT)
	got, err := w.fs.GetUpload(ctx(t), w.alice.ID, u.ID)
	if err != nil || got.Offset != 100 || got.BackendID != "b1" || got.StorageKey != "w/k" {
		t.Fatalf("get: %+v, %v", got, err)
	}
	if exp, err := w.fs.ExpiredUploads(ctx(t), time.Now(), 10); err != nil || len(exp) != 0 {
		t.Fatalf("expired now: %v, %v", exp, err)
	}
	if exp, err := w.fs.ExpiredUploads(ctx(t), time.Now().Add(2*time.Hour), 10); err != nil || len(exp) != 1 || exp[0].ID != u.ID {
		t.Fatalf("expired later: %v, %v", exp, err)
	}
	if err := w.fs.DeleteUpload(ctx(t), w.alice.ID, u.ID); err != nil {
		t.Fatal(err)
	}
	_, err = w.fs.GetUpload(ctx(t), w.alice.ID, u.ID)
	wantCode(t, "a deleted upload", err, parley.ENOTFOUND)
	_, err = w.fs.CreateUpload(ctx(t), w.carol.ID, w.ws.ID, parley.NewUpload{ID: parley.NewID("U"), FileID: "F", Name: "x",
		Size: 1, ChunkSize: 1, StorageKey: "k", BackendID: "b", ExpiresAt: exp}, parley.FileQuota{})
	wantCode(t, "an upload to another workspace", err, parley.ENOTFOUND)
}

func testFileDeleteWorkspace(t *testing.T, open Opener) {
	w := newFileWorld(t, open)
	f := mustFile(t, w.fs, w.alice, w.ws, 5)
	keep := mustFile(t, w.fs, w.carol, w.ws2, 5)
	if err := w.fs.DeleteWorkspaceFiles(ctx(t), w.ws.ID); err != nil {
		t.Fatal(err)
	}
	_, err := w.fs.GetFile(ctx(t), w.alice.ID, f.ID)
	wantCode(t, "a file of the deleted workspace", err, parley.ENOTFOUND)
	if _, err := w.fs.GetFile(ctx(t), w.carol.ID, keep.ID); err != nil {
		t.Fatalf("another workspace's file went: %v", err)
	}
	// Its usage went too: a quota of 5 takes a new file of 5.
	id := parley.NewID(parley.PrefixFile)
	if _, err := w.fs.CreateFile(ctx(t), w.alice.ID, w.ws.ID, parley.File{ID: id, Name: "f", Size: 5, ContentType: "x",
		StorageKey: "k"}, parley.FileQuota{WorkspaceMaxBytes: 5}); err != nil {
		t.Fatalf("usage was not reset: %v", err)
	}
}

func testFileSigningKey(t *testing.T, open Opener) {
	s := open(t, &Recorder{})
	fs := fileService(t, s)
	k1, err := fs.FileSigningKey(ctx(t))
	if err != nil || len(k1) != 32 {
		t.Fatalf("key: %x, %v", k1, err)
	}
	k2, err := fs.FileSigningKey(ctx(t))
	if err != nil || string(k1) != string(k2) {
		t.Fatal("the key changed between calls")
	}
}

// Concurrent uploads cannot pass the workspace quota together: the check
// and the count are one transaction.
func testFileQuotaRace(t *testing.T, open Opener) {
	w := newFileWorld(t, open)
	q := parley.FileQuota{WorkspaceMaxBytes: 500}
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 12; i++ {
		wg.Go(func() {
			id := parley.NewID(parley.PrefixFile)
			_, err := w.fs.CreateFile(ctx(t), w.alice.ID, w.ws.ID, parley.File{ID: id, Name: "f", Size: 100,
				ContentType: "x", StorageKey: "k"}, q)
			switch parley.ErrorCode(err) {
			case "":
				ok.Add(1)
			case parley.ETOOLARGE:
				refused.Add(1)
			default:
				t.Errorf("upload: %v", err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 5 || refused.Load() != 7 {
		t.Fatalf("%d stored and %d refused, want 5 and 7", ok.Load(), refused.Load())
	}
}
