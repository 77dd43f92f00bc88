package transfer_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"parley"
	"parley/files"
	"parley/internal/s3test"
	"parley/storetest"
	"parley/transfer"
)

// slackFileServer is Slack's file host as the test has it: a real HTTP
// server that wants the bot token and serves files by path, some of them
// failing as Slack's do. hits counts the requests per path.
type slackFileServer struct {
	*httptest.Server
	token string
	files map[string][]byte // path → bytes
	mu    sync.Mutex
	hits  map[string]int
}

func newSlackFileServer(t *testing.T, token string, files map[string][]byte) *slackFileServer {
	s := &slackFileServer{token: token, files: files, hits: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+s.token {
			http.Error(w, "invalid_auth", http.StatusUnauthorized)
			return
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/forbidden.pdf"):
			http.Error(w, "not allowed", http.StatusForbidden)
			return
		case strings.HasSuffix(r.URL.Path, "/slow.bin"):
			<-r.Context().Done() // never answers in time
			return
		}
		b, ok := s.files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(b)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *slackFileServer) hitsOf(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

func pngBytes(t *testing.T, w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		for y := range h {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), 200, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

type slackFile struct {
	id, name, mime, path string
	size                 int
}

// fileExport is a small Slack export: one channel, one message per file,
// and inZip carried inside the zip under __uploads/<id>/<name>.
func fileExport(t *testing.T, base string, fs []slackFile, inZip map[string][]byte) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	put := func(name string, v any) {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if raw, ok := v.([]byte); ok {
			w.Write(raw)
			return
		}
		if err := json.NewEncoder(w).Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	put("users.json", []map[string]any{{"id": "U1", "name": "ann", "real_name": "Ann", "profile": map[string]any{"email": "ann@files.example"}}})
	put("channels.json", []map[string]any{{"id": "C1", "name": "design", "created": 1700000000, "creator": "U1", "members": []string{"U1"}}})
	var msgs []map[string]any
	at := 1700000100
	for _, f := range fs {
		at += 60
		file := map[string]any{"id": f.id, "name": f.name, "title": f.name, "mimetype": f.mime, "size": f.size}
		if f.path != "" {
			u := base + f.path
			if strings.HasPrefix(f.path, "http") {
				u = f.path
			}
			file["url_private"] = u
			file["url_private_download"] = u + "?download=1"
		}
		msgs = append(msgs, map[string]any{"type": "message", "subtype": "file_share", "user": "U1",
			"text": "here is " + f.name, "ts": strconv.Itoa(at) + ".000100", "files": []any{file}})
	}
	put("design/2023-11-14.json", msgs)
	for id, data := range inZip {
		for _, f := range fs {
			if f.id == id {
				put("__uploads/"+id+"/"+f.name, data)
			}
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestImportSlackFiles: on the local directory and on S3 (SQLite), and
// on the local directory with PostgreSQL, the files of an
// import are taken from the zip or downloaded with the token (bounded
// concurrency), stored, attached to their messages (an image with its
// dimensions and thumbnail); a 404, a 401, a 403, a file over the limit,
// one that never comes and one on a foreign host are counted and leave
// their messages as they were; a run cut off goes on where it stopped and
// a second run downloads nothing twice.
func TestImportSlackFiles(t *testing.T) {
	for _, kind := range []string{"local", "s3", "local-postgres"} {
		t.Run(kind, func(t *testing.T) {
			var storage files.Storage
			open := openSQLite
			if kind == "local-postgres" {
				open = openPostgres
			}
			if kind != "s3" {
				l, err := files.NewLocal(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				storage = l
			} else {
				srv := s3test.Start(t)
				s, err := files.NewS3(context.Background(), files.S3Config{Endpoint: srv.Endpoint, Bucket: "parley-import",
					AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, PathStyle: true, CreateBucket: true})
				if err != nil {
					t.Fatal(err)
				}
				storage = s
			}
			testImportSlackFiles(t, storage, open)
		})
	}
}

func testImportSlackFiles(t *testing.T, storage files.Storage, open opener) {
	ctx := context.Background()
	e := newEnv(t, open)
	live := parley.DefaultLiveConfig()
	live.FileConfig.FileMaxMB = 1 // 1 MiB per file
	svc := files.New(files.Config{Storage: storage, Store: e.s, Live: parley.StaticConfig(live)})

	photo := pngBytes(t, 640, 480)
	notes := []byte("release notes\nline two\n")
	carried := []byte("%PDF-1.4 carried in the export\n")
	big := bytes.Repeat([]byte("x"), 2<<20)
	const token = "xoxb-test-token"
	srv := newSlackFileServer(t, token, map[string][]byte{
		"/files-pri/T1-F1/photo.png": photo,
		"/files-pri/T1-F2/notes.txt": notes,
		"/files-pri/T1-F5/big.bin":   big,
		"/files-pri/T1-F9/late.txt":  []byte("the file after the cut\n"),
	})
	fs := []slackFile{
		{id: "F1", name: "photo.png", mime: "image/png", size: len(photo), path: "/files-pri/T1-F1/photo.png"},
		{id: "F2", name: "notes.txt", mime: "text/plain", size: len(notes), path: "/files-pri/T1-F2/notes.txt"},
		{id: "F3", name: "gone.txt", mime: "text/plain", size: 10, path: "/files-pri/T1-F3/gone.txt"},
		{id: "F4", name: "forbidden.pdf", mime: "application/pdf", size: 10, path: "/files-pri/T1-F4/forbidden.pdf"},
		{id: "F5", name: "big.bin", mime: "application/octet-stream", size: 100, path: "/files-pri/T1-F5/big.bin"}, // the export understates it
		{id: "F6", name: "slow.bin", mime: "application/octet-stream", size: 10, path: "/files-pri/T1-F6/slow.bin"},
		{id: "F7", name: "carried.pdf", mime: "application/pdf", size: len(carried)},
		{id: "F8", name: "elsewhere.txt", mime: "text/plain", size: 10, path: "http://attacker.example/steal"},
		{id: "F9", name: "late.txt", mime: "text/plain", size: 23, path: "/files-pri/T1-F9/late.txt"},
	}
	zipBytes := fileExport(t, srv.URL, fs, map[string][]byte{"F7": carried})
	src, err := transfer.ReadSlack(bytes.NewReader(zipBytes), int64(len(zipBytes)))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := transfer.Import(ctx, e.s, src, transfer.Options{OwnerID: e.owner.ID, Slug: "filesco", Batch: 100})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Files != len(fs) {
		t.Fatalf("files recorded %d, want %d", sum.Files, len(fs))
	}
	zr, err := zip.NewReader(bytes.NewReader(zipBytes), int64(len(zipBytes)))
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	opts := transfer.FileOptions{WorkspaceID: sum.WorkspaceID, Token: token, Hosts: []string{host}, Zip: zr,
		Concurrency: 1, Timeout: 300 * time.Millisecond}

	// Without a token only the zip's file is taken; the rest wait.
	noToken := opts
	noToken.Token = ""
	fsum, err := transfer.ImportFiles(ctx, e.s, svc, noToken)
	if err != nil {
		t.Fatal(err)
	}
	if fsum.Attached != 1 || fsum.FromZip != 1 || fsum.Waiting != len(fs)-1 {
		t.Fatalf("without a token: %+v", fsum)
	}

	// A run cut off after its first file, then the rest.
	cut, cancel := context.WithCancel(ctx)
	cutOpts := opts
	cutOpts.Progress = func(done, total int) {
		if done == 1 {
			cancel()
		}
	}
	if _, err := transfer.ImportFiles(cut, e.s, svc, cutOpts); err == nil {
		t.Fatal("a cancelled run reported success")
	}
	opts.Concurrency = 3
	fsum, err = transfer.ImportFiles(ctx, e.s, svc, opts)
	if err != nil {
		t.Fatal(err)
	}
	attachedBefore := 1 + 1 // the zip's, and the cut-off run's first
	if fsum.Attached+attachedBefore != 4 {
		t.Fatalf("after the cut: %+v, want the 4 good files attached in all", fsum)
	}
	wantFailed := map[string]int{transfer.FailNotFound: 1, transfer.FailUnauthorized: 1, transfer.FailTooLarge: 1,
		transfer.FailTimeout: 1, transfer.FailHost: 1}
	for k, n := range wantFailed {
		if fsum.Failed[k] != n {
			t.Errorf("failed %q: %d, want %d (all %v)", k, fsum.Failed[k], n, fsum.Failed)
		}
	}
	if srv.hitsOf("/files-pri/T1-F4/forbidden.pdf") == 0 || srv.hitsOf("/steal") != 0 {
		t.Fatalf("requests: %v", srv.hits)
	}

	// Again: nothing downloaded twice, the failures tried again.
	before := map[string]int{}
	for _, p := range []string{"/files-pri/T1-F1/photo.png", "/files-pri/T1-F2/notes.txt", "/files-pri/T1-F9/late.txt"} {
		before[p] = srv.hitsOf(p)
		if before[p] != 1 {
			t.Fatalf("%s fetched %d times, want 1", p, before[p])
		}
	}
	again, err := transfer.ImportFiles(ctx, e.s, svc, opts)
	if err != nil {
		t.Fatal(err)
	}
	if again.Attached != 0 || again.Failed[transfer.FailNotFound] != 1 {
		t.Fatalf("second run: %+v", again)
	}
	for p, n := range before {
		if srv.hitsOf(p) != n {
			t.Fatalf("%s fetched again by the second run", p)
		}
	}

	// The messages: files attached with their bytes, the others as they were.
	want := map[string][]byte{"photo.png": photo, "notes.txt": notes, "carried.pdf": carried, "late.txt": []byte("the file after the cut\n")}
	read := storetest.CheckWorkspace(t, e.s, e.owner.ID, sum.WorkspaceID)
	var msgs []parley.Message
	for _, ms := range read {
		msgs = append(msgs, ms...)
	}
	if len(msgs) != len(fs) {
		t.Fatalf("%d messages, want %d", len(msgs), len(fs))
	}
	seen := 0
	for _, m := range msgs {
		name := strings.TrimPrefix(m.Text, "here is ")
		data, ok := want[name]
		if !ok {
			if len(m.Files) != 0 {
				t.Fatalf("message %q has files %+v, want none (its file failed)", m.Text, m.Files)
			}
			continue
		}
		if len(m.Files) != 1 || m.Files[0].Name != name || m.Files[0].Size != int64(len(data)) || m.Files[0].UserID != m.UserID {
			t.Fatalf("message %q: files %+v", m.Text, m.Files)
		}
		f, obj, err := svc.Open(ctx, e.owner.ID, m.Files[0].ID, false)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(obj)
		obj.Close()
		if !bytes.Equal(got, data) || f.MessageID != m.ID || f.ChannelID != m.ChannelID {
			t.Fatalf("%s: %d bytes, attached to %s/%s", name, len(got), f.ChannelID, f.MessageID)
		}
		if name == "photo.png" {
			if f.ContentType != "image/png" || f.Width != 640 || f.Height != 480 || !f.Thumbnail {
				t.Fatalf("the image: %+v, want image/png 640×480 with a thumbnail", f)
			}
			_, th, err := svc.Open(ctx, e.owner.ID, f.ID, true)
			if err != nil {
				t.Fatalf("thumbnail: %v", err)
			}
			th.Close()
		}
		seen++
	}
	if seen != len(want) {
		t.Fatalf("%d messages with their file, want %d", seen, len(want))
	}
}
