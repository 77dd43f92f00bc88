package httpapi

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"parley"
	"parley/files"
)

// Files (docs/files.md): uploads in one request or resumably in chunks,
// metadata with short-lived signed download URLs, the downloads themselves
// with the headers that keep an upload from ever running in Parley's
// origin, and a channel's files. Who may see or attach a file is the
// store's decision (parley.FileService), asked on every request, signed
// URL or not.

// File transfers outlive the server's 30 s read and 60 s write timeouts:
// each request that moves file bytes extends its own deadlines to these.
const (
	uploadTimeout   = 30 * time.Minute
	downloadTimeout = 30 * time.Minute
	// multipartSlack is what a multipart body may hold beyond its file
	// (boundaries, part headers, other fields) before the early size check.
	multipartSlack = 64 << 10
	// chunkBodyBytes bounds a resumable upload's chunk request.
	chunkBodyBytes = files.PartSize + 1
)

// fileCSP is the Content-Security-Policy of every file response: nothing
// may load, and a document is sandboxed (no script, a unique origin),
// should a browser render one despite the other headers.
const fileCSP = "default-src 'none'; style-src 'unsafe-inline'; sandbox"

func (s *Server) filesOn() error {
	if s.files == nil {
		return parley.Errorf(parley.EUNAVAILABLE, "file storage is not configured on this server")
	}
	return nil
}

// extend gives a request that moves file bytes time to do so.
func extend(w http.ResponseWriter, read, write time.Duration) {
	rc := http.NewResponseController(w)
	now := time.Now()
	if read > 0 {
		rc.SetReadDeadline(now.Add(read)) // not every writer supports it (tests' recorders)
	}
	if write > 0 {
		rc.SetWriteDeadline(now.Add(write))
	}
}

// uploadFile takes a file as the "file" part of a multipart/form-data body
// (its filename is the name), or as the raw body with ?name=.
func (s *Server) uploadFile(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.filesOn(); err != nil {
		return err
	}
	ws := r.PathValue("ws")
	if err := s.feature(r.Context(), ws, parley.FeatureFileUploads); err != nil {
		return err
	}
	extend(w, uploadTimeout, uploadTimeout)
	var (
		f   *parley.File
		err error
	)
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "multipart/form-data" {
		f, err = s.uploadMultipart(r, c, ws)
	} else {
		name := r.URL.Query().Get("name")
		if name == "" {
			return parley.Errorf(parley.EINVALID, "send multipart/form-data with a \"file\" part, or the bytes with ?name=")
		}
		f, err = s.files.Upload(r.Context(), c.UserID, ws, name, r.Body, r.ContentLength)
	}
	if err != nil {
		return err
	}
	if err := s.signFile(r.Context(), c.UserID, f); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, f)
	return nil
}

func (s *Server) uploadMultipart(r *http.Request, c *caller, ws string) (*parley.File, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, parley.Errorf(parley.EINVALID, "invalid multipart body: %v", err)
	}
	size := int64(-1)
	if r.ContentLength > multipartSlack {
		size = r.ContentLength - multipartSlack
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return nil, parley.Errorf(parley.EINVALID, "the multipart body has no \"file\" part")
		}
		if err != nil {
			return nil, parley.Errorf(parley.EINVALID, "invalid multipart body: %v", err)
		}
		if part.FormName() != "file" {
			part.Close()
			continue
		}
		name := part.FileName()
		if name == "" {
			name = "file"
		}
		f, err := s.files.Upload(r.Context(), c.UserID, ws, name, part, size)
		part.Close()
		return f, err
	}
}

// signFile fills a file's signed URLs for userID.
func (s *Server) signFile(ctx context.Context, userID string, f *parley.File) error {
	exp, sig, err := s.files.Signature(ctx, f.ID, files.VariantContent, userID)
	if err != nil {
		return err
	}
	q := url.Values{"u": {userID}, "exp": {strconv.FormatInt(exp, 10)}, "sig": {sig}}
	f.URL = Prefix + "/files/" + url.PathEscape(f.ID) + "/content?" + q.Encode()
	if f.Thumbnail {
		exp, sig, err := s.files.Signature(ctx, f.ID, files.VariantThumbnail, userID)
		if err != nil {
			return err
		}
		q := url.Values{"u": {userID}, "exp": {strconv.FormatInt(exp, 10)}, "sig": {sig}}
		f.ThumbnailURL = Prefix + "/files/" + url.PathEscape(f.ID) + "/thumbnail?" + q.Encode()
	}
	t := time.Unix(exp, 0).UTC()
	f.URLExpiresAt = &t
	return nil
}

func (s *Server) getFile(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.filesOn(); err != nil {
		return err
	}
	f, err := s.files.Store().GetFile(r.Context(), c.UserID, r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := s.signFile(r.Context(), c.UserID, f); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, f)
	return nil
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.filesOn(); err != nil {
		return err
	}
	if err := s.files.DeleteFile(r.Context(), c.UserID, r.PathValue("id")); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) listChannelFiles(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.filesOn(); err != nil {
		return err
	}
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	page, err := s.files.Store().ListChannelFiles(r.Context(), c.UserID, r.PathValue("id"), r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	for i := range page.Files {
		if err := s.signFile(r.Context(), c.UserID, &page.Files[i]); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) downloadContent(w http.ResponseWriter, r *http.Request, _ *caller) error {
	return s.download(w, r, false)
}

func (s *Server) downloadThumbnail(w http.ResponseWriter, r *http.Request, _ *caller) error {
	return s.download(w, r, true)
}

// download serves a file's bytes (or its thumbnail's) to the holder of a
// signed URL, or of a bearer token when the URL is not signed. The
// signature says who the URL was issued to; the store then says whether
// that user may read the file now. Range requests are answered from the
// storage without reading what they skip.
func (s *Server) download(w http.ResponseWriter, r *http.Request, thumb bool) error {
	if err := s.filesOn(); err != nil {
		return err
	}
	id := r.PathValue("id")
	variant := files.VariantContent
	if thumb {
		variant = files.VariantThumbnail
	}
	q := r.URL.Query()
	var user string
	if q.Get("sig") != "" || q.Get("u") != "" {
		if err := s.files.Verify(r.Context(), id, variant, q.Get("u"), q.Get("exp"), q.Get("sig")); err != nil {
			return err
		}
		user = q.Get("u")
	} else {
		c, err := s.authenticate(r)
		if err != nil {
			return err
		}
		user = c.UserID
	}
	f, obj, err := s.files.Open(r.Context(), user, id, thumb)
	if err != nil {
		return err
	}
	defer obj.Close()
	extend(w, 0, downloadTimeout)
	ctype := f.ContentType
	if thumb {
		ctype = files.ThumbnailType(f.ThumbnailKey)
	}
	disposition := "attachment"
	if files.Inline(ctype) && q.Get("download") == "" {
		disposition = "inline"
	} else if !files.Inline(ctype) {
		// Only the allowlisted image types keep their type: a browser
		// has nothing to render in the rest.
		ctype = "application/octet-stream"
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Content-Disposition", contentDisposition(disposition, f.Name))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", fileCSP)
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "private, max-age=300")
	http.ServeContent(w, r, "", f.CreatedAt, obj)
	return nil
}

// contentDisposition renders the header with the file's name (RFC 6266;
// mime encodes a name that is not plain ASCII as filename*=utf-8”…).
func contentDisposition(disposition, name string) string {
	if v := mime.FormatMediaType(disposition, map[string]string{"filename": name}); v != "" {
		return v
	}
	return disposition
}

// Resumable uploads (docs/files.md): POST /workspaces/{ws}/uploads
// {name, size} → upload; PUT /uploads/{id}?offset=N with the chunk (all
// chunks chunk_size bytes but the last) → upload with the new offset;
// after a failure GET /uploads/{id} says the offset to go on from; POST
// /uploads/{id}/complete → file; DELETE /uploads/{id} aborts.

func (s *Server) createUpload(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.filesOn(); err != nil {
		return err
	}
	var in struct {
		Name string `json:"name"`
		Size int64  `json:"size"`
	}
	if err := decode(r, &in, false); err != nil {
		return err
	}
	if err := s.feature(r.Context(), r.PathValue("ws"), parley.FeatureFileUploads); err != nil {
		return err
	}
	u, err := s.files.CreateUpload(r.Context(), c.UserID, r.PathValue("ws"), in.Name, in.Size)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, u)
	return nil
}

func (s *Server) getUpload(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.filesOn(); err != nil {
		return err
	}
	u, err := s.files.GetUpload(r.Context(), c.UserID, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, u)
	return nil
}

func (s *Server) putChunk(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.filesOn(); err != nil {
		return err
	}
	extend(w, uploadTimeout, uploadTimeout)
	raw := r.URL.Query().Get("offset")
	offset, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || offset < 0 {
		return parley.Errorf(parley.EINVALID, "offset must be the upload's offset in bytes")
	}
	u, err := s.files.PutChunk(r.Context(), c.UserID, r.PathValue("id"), offset, r.Body, r.ContentLength)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, u)
	return nil
}

func (s *Server) completeUpload(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.filesOn(); err != nil {
		return err
	}
	extend(w, 0, uploadTimeout) // joining parts and thumbnailing take a while for big files
	f, err := s.files.CompleteUpload(r.Context(), c.UserID, r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := s.signFile(r.Context(), c.UserID, f); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, f)
	return nil
}

func (s *Server) abortUpload(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.filesOn(); err != nil {
		return err
	}
	if err := s.files.AbortUpload(r.Context(), c.UserID, r.PathValue("id")); err != nil {
		return err
	}
	return noContent(w)
}
