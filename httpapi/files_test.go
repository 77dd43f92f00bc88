package httpapi

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"parley"
	"parley/files"
)

// tinyPNG is a w×h opaque PNG.
func tinyPNG(tb testing.TB, w, h int) []byte {
	tb.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), 200, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// fileEnv is an API with a workspace, its owner and a member in a public
// channel, and another workspace's owner.
type fileEnv struct {
	*env
	owner, member, stranger *account
	ws                      *parley.Workspace
	ch                      *parley.Channel
}

func newFileEnv(t *testing.T, adjust ...func(*Config)) *fileEnv {
	adjust = append(adjust, func(c *Config) { c.Rates = parley.LiveRatesOff() })
	e := &fileEnv{env: newEnv(t, adjust...)}
	e.owner, e.member, e.stranger = mustAccount(t, e.store, "owner"), mustAccount(t, e.store, "member"), mustAccount(t, e.store, "stranger")
	e.ws = mustWorkspace(t, e.store, e.owner)
	mustWorkspace(t, e.store, e.stranger)
	mustJoin(t, e.store, e.ws, e.owner, e.member)
	e.ch = mustChannel(t, e.store, e.ws, e.owner, parley.KindPublic)
	if _, err := e.store.JoinChannel(context.Background(), e.member.ID, e.ch.ID); err != nil {
		t.Fatal(err)
	}
	return e
}

// uploadMultipart sends data as the "file" part named name, with the
// content type the client claims.
func (e *fileEnv) uploadMultipart(token, name, claimed string, data []byte) *response {
	e.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("comment", "ignored")
	h := make(map[string][]string)
	h["Content-Disposition"] = []string{`form-data; name="file"; filename="` + name + `"`}
	h["Content-Type"] = []string{claimed}
	pw, err := mw.CreatePart(h)
	if err != nil {
		e.t.Fatal(err)
	}
	pw.Write(data)
	mw.Close()
	return e.raw(http.MethodPost, Prefix+"/workspaces/"+e.ws.ID+"/files", token, mw.FormDataContentType(), &body)
}

// raw sends a request with any body and content type; path is absolute.
func (e *fileEnv) raw(method, path, token, ctype string, body io.Reader) *response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return &response{Status: res.StatusCode, Header: res.Header, Body: b}
}

func (e *fileEnv) upload(token, name string, data []byte) *parley.File {
	e.t.Helper()
	r := e.uploadMultipart(token, name, "application/octet-stream", data)
	if r.Status != http.StatusCreated {
		e.t.Fatalf("upload %s: %d %s", name, r.Status, r.Body)
	}
	var f parley.File
	r.decode(e.t, &f)
	return &f
}

func TestFileUploadAttachDownload(t *testing.T) {
	e := newFileEnv(t)
	pic := tinyPNG(t, 800, 400)
	f := e.upload(e.owner.Token, "photo.png", pic)
	if f.ContentType != "image/png" || f.Width != 800 || f.Height != 400 || !f.Thumbnail || f.Size != int64(len(pic)) {
		t.Fatalf("uploaded: %+v", f)
	}
	if f.URL == "" || f.ThumbnailURL == "" || f.URLExpiresAt == nil {
		t.Fatalf("no signed URLs: %+v", f)
	}
	// Attach it; the message and its event carry it, without URLs.
	var m parley.Message
	e.must(http.StatusCreated, "POST", "/channels/"+e.ch.ID+"/messages", e.owner.Token,
		map[string]any{"text": "look", "file_ids": []string{f.ID}}, &m)
	if len(m.Files) != 1 || m.Files[0].ID != f.ID || m.Files[0].URL != "" || m.Files[0].Width != 800 {
		t.Fatalf("message files: %+v", m.Files)
	}
	var page parley.MessagePage
	e.must(http.StatusOK, "GET", "/channels/"+e.ch.ID+"/messages", e.member.Token, nil, &page)
	if n := len(page.Messages); n == 0 || len(page.Messages[n-1].Files) != 1 {
		t.Fatalf("history: %+v", page.Messages)
	}
	// The member gets their own signed URLs and downloads.
	var mine parley.File
	e.must(http.StatusOK, "GET", "/files/"+f.ID, e.member.Token, nil, &mine)
	r := e.raw("GET", mine.URL, "", "", nil)
	if r.Status != http.StatusOK || !bytes.Equal(r.Body, pic) {
		t.Fatalf("download: %d, %d bytes", r.Status, len(r.Body))
	}
	wantHeaders(t, r, "image/png", "inline")
	th := e.raw("GET", mine.ThumbnailURL, "", "", nil)
	if th.Status != http.StatusOK {
		t.Fatalf("thumbnail: %d %s", th.Status, th.Body)
	}
	img, format, err := image.Decode(bytes.NewReader(th.Body))
	if err != nil || format != "jpeg" || img.Bounds().Dx() != files.ThumbnailSize || img.Bounds().Dy() != files.ThumbnailSize/2 {
		t.Fatalf("thumbnail: %v %s %v", err, format, img.Bounds())
	}
	wantHeaders(t, th, "image/jpeg", "inline")
	// ?download=1 makes even an image an attachment; a range is served.
	dl := e.raw("GET", mine.URL+"&download=1", "", "", nil)
	if cd := dl.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment") {
		t.Fatalf("download=1: %q", cd)
	}
	req, _ := http.NewRequest("GET", e.srv.URL+mine.URL, nil)
	req.Header.Set("Range", "bytes=10-19")
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	part, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusPartialContent || !bytes.Equal(part, pic[10:20]) {
		t.Fatalf("range: %d %q", res.StatusCode, part)
	}
	// The channel's files list it.
	var fp parley.FilePage
	e.must(http.StatusOK, "GET", "/channels/"+e.ch.ID+"/files", e.member.Token, nil, &fp)
	if len(fp.Files) != 1 || fp.Files[0].ID != f.ID {
		t.Fatalf("channel files: %+v", fp)
	}
}

// wantHeaders checks the headers every file response has.
func wantHeaders(t *testing.T, r *response, ctype, disposition string) {
	t.Helper()
	h := r.Header
	if got := h.Get("Content-Type"); got != ctype {
		t.Errorf("Content-Type %q, want %q", got, ctype)
	}
	if got := h.Get("Content-Disposition"); !strings.HasPrefix(got, disposition) {
		t.Errorf("Content-Disposition %q, want %s", got, disposition)
	}
	if h.Get("X-Content-Type-Options") != "nosniff" {
		t.Error("no X-Content-Type-Options: nosniff")
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "sandbox") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
}

// An upload can never run script in Parley's origin: HTML, SVG and
// JavaScript, whatever the client claims, download as opaque attachments.
func TestFileActiveContentNeverInline(t *testing.T) {
	e := newFileEnv(t)
	for _, tc := range []struct {
		name, claimed, body, sniffed string
	}{
		{"page.html", "image/png", "<!DOCTYPE html><html><script>alert(document.cookie)</script></html>", "text/html; charset=utf-8"},
		{"logo.svg", "image/svg+xml", `<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`, "text/plain; charset=utf-8"},
		{"app.js", "image/gif", "alert(document.domain); fetch('/api/v1/me')", "text/plain; charset=utf-8"},
		{"fake.png", "image/png", "GIF89a but really <script>alert(1)</script>", "image/gif"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.uploadMultipart(e.owner.Token, tc.name, tc.claimed, []byte(tc.body))
			if r.Status != http.StatusCreated {
				t.Fatalf("upload: %d %s", r.Status, r.Body)
			}
			var f parley.File
			r.decode(t, &f)
			if f.ContentType != tc.sniffed {
				t.Errorf("content type %q, want sniffed %q (client said %q)", f.ContentType, tc.sniffed, tc.claimed)
			}
			d := e.raw("GET", f.URL, "", "", nil)
			if d.Status != http.StatusOK || string(d.Body) != tc.body {
				t.Fatalf("download: %d %q", d.Status, d.Body)
			}
			if f.ContentType == "image/gif" { // a real GIF header: inline, but as an image only
				wantHeaders(t, d, "image/gif", "inline")
				return
			}
			wantHeaders(t, d, "application/octet-stream", "attachment")
			if !strings.Contains(d.Header.Get("Content-Disposition"), tc.name) {
				t.Errorf("Content-Disposition %q lacks the name", d.Header.Get("Content-Disposition"))
			}
		})
	}
}

func TestFileSignedURLs(t *testing.T) {
	e := newFileEnv(t)
	f := e.upload(e.owner.Token, "a.txt", []byte("hello"))
	if r := e.raw("GET", f.URL, "", "", nil); r.Status != http.StatusOK {
		t.Fatalf("fresh URL: %d", r.Status)
	}
	// Tampering with any part breaks the signature.
	for _, bad := range []string{
		strings.Replace(f.URL, "u="+e.owner.ID, "u="+e.member.ID, 1),
		strings.Replace(f.URL, "exp=", "exp=9", 1),
		f.URL[:len(f.URL)-2],
		strings.Replace(f.URL, "/content", "/thumbnail", 1),
	} {
		if r := e.raw("GET", bad, "", "", nil); r.Status != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", bad, r.Status)
		}
	}
	// It expires.
	e.clock.Advance(16 * time.Minute)
	if r := e.raw("GET", f.URL, "", "", nil); r.Status != http.StatusForbidden || !strings.Contains(string(r.Body), "expired") {
		t.Fatalf("expired URL: %d %s", r.Status, r.Body)
	}
	// Unsigned: a bearer token does, nothing else.
	path := Prefix + "/files/" + f.ID + "/content"
	if r := e.raw("GET", path, e.owner.Token, "", nil); r.Status != http.StatusOK {
		t.Fatalf("bearer: %d", r.Status)
	}
	if r := e.raw("GET", path, "", "", nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("neither: %d", r.Status)
	}
}

// Authorization is checked on every download, signed URL or not: a URL
// signed for a member stops working when they can no longer see the file.
func TestFileAccessRevoked(t *testing.T) {
	e := newFileEnv(t)
	priv := mustChannel(t, e.store, e.ws, e.owner, parley.KindPrivate)
	if _, err := e.store.AddMembers(context.Background(), e.owner.ID, priv.ID, []string{e.member.ID}); err != nil {
		t.Fatal(err)
	}
	f := e.upload(e.owner.Token, "plan.txt", []byte("the plan"))
	e.must(http.StatusCreated, "POST", "/channels/"+priv.ID+"/messages", e.owner.Token,
		map[string]any{"text": "plan", "file_ids": []string{f.ID}}, nil)
	var mine parley.File
	e.must(http.StatusOK, "GET", "/files/"+f.ID, e.member.Token, nil, &mine)
	if r := e.raw("GET", mine.URL, "", "", nil); r.Status != http.StatusOK {
		t.Fatalf("member download: %d", r.Status)
	}
	if err := e.store.RemoveMember(context.Background(), e.owner.ID, priv.ID, e.member.ID); err != nil {
		t.Fatal(err)
	}
	if r := e.raw("GET", mine.URL, "", "", nil); r.Status != http.StatusNotFound {
		t.Fatalf("after removal, the signed URL: %d, want 404", r.Status)
	}
	// Another workspace's user can neither read nor attach it.
	e.must(http.StatusNotFound, "GET", "/files/"+f.ID, e.stranger.Token, nil, nil)
	loose := e.upload(e.owner.Token, "loose.txt", []byte("x"))
	var theirs []parley.Workspace
	e.must(http.StatusOK, "GET", "/workspaces", e.stranger.Token, nil, &struct {
		Workspaces *[]parley.Workspace `json:"workspaces"`
	}{&theirs})
	chB := mustChannel(t, e.store, &theirs[0], e.stranger, parley.KindPublic)
	e.must(http.StatusNotFound, "POST", "/channels/"+chB.ID+"/messages", e.stranger.Token,
		map[string]any{"text": "mine now", "file_ids": []string{loose.ID}}, nil)
}

func TestFileQuotas(t *testing.T) {
	live := parley.DefaultLiveConfig()
	live.FileMaxMB, live.FileWorkspaceQuotaMB = 1, 2
	e := newFileEnv(t)
	e.api.files = files.New(files.Config{Storage: e.api.files.Storage(), Store: sqlStore(t, e.store),
		Live: parley.StaticConfig(live), Now: e.clock.Now, Logger: quietLogger()})
	over := make([]byte, 1<<20+1)
	r := e.uploadMultipart(e.owner.Token, "big.bin", "", over)
	if r.Status != http.StatusRequestEntityTooLarge || r.errCode() != parley.ETOOLARGE || !strings.Contains(string(r.Body), "limit") {
		t.Fatalf("over the file limit: %d %s", r.Status, r.Body)
	}
	raw := e.raw("POST", Prefix+"/workspaces/"+e.ws.ID+"/files?name=big.bin", e.owner.Token, "application/octet-stream", bytes.NewReader(over))
	if raw.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("raw body over the file limit: %d %s", raw.Status, raw.Body)
	}
	e.upload(e.owner.Token, "a.bin", make([]byte, 1<<20))
	e.upload(e.member.Token, "b.bin", make([]byte, 1<<20-10))
	r = e.uploadMultipart(e.owner.Token, "c.bin", "", make([]byte, 11))
	if r.Status != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.Body), "full") {
		t.Fatalf("over the workspace quota: %d %s", r.Status, r.Body)
	}
	up := e.raw("POST", Prefix+"/workspaces/"+e.ws.ID+"/uploads", e.owner.Token, "application/json",
		strings.NewReader(`{"name":"x","size":2000000}`))
	if up.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("resumable over the limit: %d %s", up.Status, up.Body)
	}
}

// A resumable upload survives a dropped chunk: the server keeps nothing of
// it, GET says where to go on from, and the file completes whole.
func TestFileResumableUpload(t *testing.T) {
	e := newFileEnv(t)
	data := make([]byte, files.PartSize+5000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	var u parley.Upload
	e.must(http.StatusCreated, "POST", "/workspaces/"+e.ws.ID+"/uploads", e.owner.Token,
		map[string]any{"name": "dump.bin", "size": len(data)}, &u)
	if u.ChunkSize != files.PartSize || u.Offset != 0 {
		t.Fatalf("created: %+v", u)
	}
	chunk := func(off int64, b []byte) *response {
		return e.raw("PUT", Prefix+"/uploads/"+u.ID+"?offset="+strconv.FormatInt(off, 10), e.owner.Token, "application/octet-stream", bytes.NewReader(b))
	}
	// A chunk cut short (the connection dropped) stores nothing.
	pr, pw := io.Pipe()
	go func() {
		pw.Write(data[:1000])
		pw.CloseWithError(io.ErrUnexpectedEOF)
	}()
	req, _ := http.NewRequest("PUT", e.srv.URL+Prefix+"/uploads/"+u.ID+"?offset=0", pr)
	req.Header.Set("Authorization", "Bearer "+e.owner.Token)
	req.ContentLength = files.PartSize
	if res, err := e.srv.Client().Do(req); err == nil {
		res.Body.Close()
	}
	var st parley.Upload
	e.must(http.StatusOK, "GET", "/uploads/"+u.ID, e.owner.Token, nil, &st)
	if st.Offset != 0 {
		t.Fatalf("after a dropped chunk the offset is %d", st.Offset)
	}
	if r := chunk(0, data[:100]); r.Status != http.StatusBadRequest {
		t.Fatalf("a short chunk: %d %s", r.Status, r.Body)
	}
	if r := chunk(0, data[:files.PartSize]); r.Status != http.StatusOK {
		t.Fatalf("chunk 1: %d %s", r.Status, r.Body)
	}
	if r := chunk(0, data[:files.PartSize]); r.Status != http.StatusConflict || !strings.Contains(string(r.Body), strconv.Itoa(files.PartSize)) {
		t.Fatalf("chunk 1 again: %d %s", r.Status, r.Body)
	}
	e.must(http.StatusConflict, "POST", "/uploads/"+u.ID+"/complete", e.owner.Token, nil, nil)
	if r := chunk(files.PartSize, data[files.PartSize:]); r.Status != http.StatusOK {
		t.Fatalf("chunk 2: %d %s", r.Status, r.Body)
	}
	var f parley.File
	e.must(http.StatusCreated, "POST", "/uploads/"+u.ID+"/complete", e.owner.Token, nil, &f)
	if f.Size != int64(len(data)) || f.Name != "dump.bin" {
		t.Fatalf("completed: %+v", f)
	}
	if r := e.raw("GET", f.URL, "", "", nil); r.Status != http.StatusOK || !bytes.Equal(r.Body, data) {
		t.Fatalf("download: %d, %d bytes", r.Status, len(r.Body))
	}
	e.must(http.StatusNotFound, "GET", "/uploads/"+u.ID, e.owner.Token, nil, nil)
}

// Deleting a message deletes its files: at once for readers, and their
// bytes with the sweeper's next pass.
func TestFileDeletedWithMessage(t *testing.T) {
	e := newFileEnv(t)
	f := e.upload(e.owner.Token, "photo.png", tinyPNG(t, 50, 50))
	var m parley.Message
	e.must(http.StatusCreated, "POST", "/channels/"+e.ch.ID+"/messages", e.owner.Token,
		map[string]any{"text": "x", "file_ids": []string{f.ID}}, &m)
	e.must(http.StatusNoContent, "DELETE", "/messages/"+m.ID, e.owner.Token, nil, nil)
	e.must(http.StatusNotFound, "GET", "/files/"+f.ID, e.owner.Token, nil, nil)
	if r := e.raw("GET", f.URL, "", "", nil); r.Status != http.StatusNotFound {
		t.Fatalf("download after delete: %d", r.Status)
	}
	storage := e.api.files.Storage()
	key := files.Key(e.ws.ID, f.ID)
	if _, err := storage.Open(context.Background(), key); err != nil {
		t.Fatalf("bytes gone before the sweep: %v", err)
	}
	n, err := e.api.files.Sweep(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	for _, k := range []string{key, key + ".thumb.jpg"} {
		if _, err := storage.Open(context.Background(), k); err == nil {
			t.Errorf("%s still stored after the sweep", k)
		}
	}
}

func TestFileUploadRefusals(t *testing.T) {
	e := newFileEnv(t)
	path := Prefix + "/workspaces/" + e.ws.ID + "/files"
	if r := e.raw("POST", path, e.owner.Token, "application/octet-stream", strings.NewReader("x")); r.Status != http.StatusBadRequest {
		t.Errorf("raw without a name: %d", r.Status)
	}
	if r := e.raw("POST", path+"?name=a%2Fb", e.owner.Token, "application/octet-stream", strings.NewReader("x")); r.Status != http.StatusBadRequest {
		t.Errorf("a name with a slash: %d", r.Status)
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("other", "x")
	mw.Close()
	if r := e.raw("POST", path, e.owner.Token, mw.FormDataContentType(), &body); r.Status != http.StatusBadRequest {
		t.Errorf("multipart without a file: %d", r.Status)
	}
	if r := e.raw("POST", path+"?name=x", e.stranger.Token, "application/octet-stream", strings.NewReader("x")); r.Status != http.StatusNotFound {
		t.Errorf("a non-member uploads: %d", r.Status)
	}
}
