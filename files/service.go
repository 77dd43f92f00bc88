// Package files is Parley's file handling: a Storage for the bytes (a local
// directory by default, any S3-compatible store in production), and a
// Service that uploads (in one request, or resumably in chunks), sniffs the
// content type, measures images and makes their thumbnails, checks quotas,
// signs short-lived download URLs, and sweeps the bytes of deleted files.
//
// The Service streams: no upload or download is ever held in memory whole
// (docs/files.md; the 200 MB figure is in docs/benchmarks.md). Who may see
// or attach a file is decided by the store (parley.FileService), inside its
// transactions; this package only asks. It must not know about HTTP.
package files

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
	"parley/internal/promutil"
)

// Config is what a Service needs. Storage and Store are required; the zero
// value of every other field is a documented default.
type Config struct {
	Storage Storage
	Store   parley.FileService
	// Live gives the quotas (file_max_mb, file_workspace_quota_mb) on
	// every upload. Nil: parley.DefaultFileConfig.
	Live parley.LiveConfigSource
	// URLTTL is how long a signed download URL works (default 15 min).
	URLTTL time.Duration
	// UploadTTL is how long a resumable upload may take (default 24 h).
	UploadTTL time.Duration
	// SweepInterval is how often Run sweeps (default 1 min).
	SweepInterval time.Duration
	Logger        *slog.Logger
	Registerer    prometheus.Registerer
	Now           func() time.Time
}

// Service uploads, serves and sweeps files. It is safe for concurrent use.
type Service struct {
	storage Storage
	store   parley.FileService
	live    parley.LiveConfigSource
	urlTTL  time.Duration
	upTTL   time.Duration
	every   time.Duration
	log     *slog.Logger
	now     func() time.Time
	// key is the URL signing key, loaded from the store on first use.
	key   atomic.Pointer[[]byte]
	keyMu sync.Mutex // serialises the first load
	// thumbs bounds the image decodes in flight (each holds a decoded
	// image: up to MaxThumbnailPixels*4 bytes).
	thumbs chan struct{}

	uploads  *prometheus.CounterVec // by kind: simple, resumable
	bytesIn  prometheus.Counter
	swept    prometheus.Counter
	sweepErr prometheus.Counter
}

// New returns a Service for cfg. It panics when Storage or Store is nil,
// which is a wiring mistake.
func New(cfg Config) *Service {
	if cfg.Storage == nil || cfg.Store == nil {
		panic("files: Config.Storage and Config.Store are required")
	}
	s := &Service{storage: cfg.Storage, store: cfg.Store, live: cfg.Live, urlTTL: cfg.URLTTL, upTTL: cfg.UploadTTL,
		every: cfg.SweepInterval, log: cfg.Logger, now: cfg.Now, thumbs: make(chan struct{}, 2)}
	if s.urlTTL <= 0 {
		s.urlTTL = 15 * time.Minute
	}
	if s.upTTL <= 0 {
		s.upTTL = 24 * time.Hour
	}
	if s.every <= 0 {
		s.every = time.Minute
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.uploads = promutil.Register(cfg.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "parley_file_uploads_total", Help: "Files uploaded, by kind (simple, resumable).",
	}, []string{"kind"}))
	s.bytesIn = promutil.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "parley_file_upload_bytes_total", Help: "Bytes of uploaded files stored.",
	}))
	s.swept = promutil.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "parley_files_swept_total", Help: "Deleted files whose bytes the sweeper removed.",
	}))
	s.sweepErr = promutil.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "parley_file_sweep_errors_total", Help: "Sweeper passes that failed (retried on the next pass).",
	}))
	return s
}

// Storage returns the service's storage.
func (s *Service) Storage() Storage { return s.storage }

// quotaFor is the quota of an upload to workspaceID: the live
// configuration's, with the workspace's file_storage_bytes override from
// ctx (parley.WithLimitsLookup) applied. The store checks it inside the
// file's transaction.
func (s *Service) quotaFor(ctx context.Context, workspaceID string) parley.FileQuota {
	return parley.LimitsFor(ctx, workspaceID).Quota(s.quota())
}

func (s *Service) quota() parley.FileQuota {
	if s.live == nil {
		return parley.DefaultFileConfig().Quota()
	}
	return s.live.LiveConfig().FileConfig.Quota()
}

// Key returns the storage key of a file's bytes; its thumbnail's is the
// same with ".thumb.png" or ".thumb.jpg". Every key of a workspace starts
// with WorkspacePrefix.
func Key(workspaceID, fileID string) string { return WorkspacePrefix(workspaceID) + fileID }

// WorkspacePrefix is the key prefix of a workspace's files.
func WorkspacePrefix(workspaceID string) string { return "w/" + workspaceID + "/" }

// errTooLarge is what limitedReader returns past its limit.
var errTooLarge = errors.New("files: over the size limit")

// limitedReader counts what it reads and fails once more than max bytes
// (max 0: no limit) came through.
type limitedReader struct {
	r   io.Reader
	max int64
	n   int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.n += int64(n)
	if l.max > 0 && l.n > l.max {
		return n, errTooLarge
	}
	return n, err
}

func tooLarge(q parley.FileQuota) error {
	return parley.Errorf(parley.ETOOLARGE, "the file is larger than the limit of %d bytes", q.MaxFileBytes)
}

// Upload stores r as a new file named name in the workspace, for actor.
// size is what the client announced (the request's length; -1: unknown):
// only an early refusal uses it, the stored size is what was read.
func (s *Service) Upload(ctx context.Context, actor, workspaceID, name string, r io.Reader, size int64) (*parley.File, error) {
	if err := parley.ValidateFileName(name); err != nil {
		return nil, err
	}
	q := s.quotaFor(ctx, workspaceID)
	if q.MaxFileBytes > 0 && size > q.MaxFileBytes {
		return nil, tooLarge(q)
	}
	if err := s.store.CheckUpload(ctx, actor, workspaceID, size, q); err != nil {
		return nil, err
	}
	id := parley.NewID(parley.PrefixFile)
	key := Key(workspaceID, id)
	br := bufio.NewReaderSize(r, 4096)
	head, err := br.Peek(sniffLen)
	if err != nil && err != io.EOF && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("upload: read: %w", err)
	}
	ctype := Sniff(head)
	lr := &limitedReader{r: br, max: q.MaxFileBytes}
	n, err := s.storage.Put(ctx, key, lr, -1, ctype)
	if err != nil {
		if errors.Is(err, errTooLarge) {
			return nil, tooLarge(q)
		}
		return nil, fmt.Errorf("upload: %w", err)
	}
	f := parley.File{ID: id, Name: name, Size: n, ContentType: ctype, StorageKey: key}
	out, err := s.finish(ctx, actor, workspaceID, f, q)
	if err == nil {
		s.uploads.WithLabelValues("simple").Inc()
		s.bytesIn.Add(float64(n))
	}
	return out, err
}

// finish measures an image and makes its thumbnail, then records the file;
// when the store refuses (quota, membership) the bytes go.
func (s *Service) finish(ctx context.Context, actor, workspaceID string, f parley.File, q parley.FileQuota) (*parley.File, error) {
	if CanThumbnail(f.ContentType) {
		s.thumbnail(ctx, &f)
	}
	out, err := s.store.CreateFile(ctx, actor, workspaceID, f, q)
	if err != nil {
		s.removeBytes(context.WithoutCancel(ctx), f)
		return nil, err
	}
	return out, nil
}

func (s *Service) removeBytes(ctx context.Context, f parley.File) {
	for _, k := range []string{f.StorageKey, f.ThumbnailKey} {
		if k == "" {
			continue
		}
		if err := s.storage.Delete(ctx, k); err != nil {
			s.log.Warn("files: remove bytes", "key", k, "err", err)
		}
	}
}

// Open returns a file actor may download and its bytes (the thumbnail's
// when thumb is set); the store decides, on every call.
func (s *Service) Open(ctx context.Context, actor, fileID string, thumb bool) (*parley.File, Object, error) {
	f, err := s.store.GetFile(ctx, actor, fileID)
	if err != nil {
		return nil, nil, err
	}
	key := f.StorageKey
	if thumb {
		if f.ThumbnailKey == "" {
			return nil, nil, parley.Errorf(parley.ENOTFOUND, "the file has no thumbnail")
		}
		key = f.ThumbnailKey
	}
	o, err := s.storage.Open(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, parley.Errorf(parley.ENOTFOUND, "file not found")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open file: %w", err)
	}
	return f, o, nil
}

// Resumable uploads: CreateUpload, PutChunk (again after a failure, at the
// offset GetUpload reports), CompleteUpload or AbortUpload.

// CreateUpload starts a resumable upload of size bytes.
func (s *Service) CreateUpload(ctx context.Context, actor, workspaceID, name string, size int64) (*parley.Upload, error) {
	if err := parley.ValidateFileName(name); err != nil {
		return nil, err
	}
	if size <= 0 {
		return nil, parley.Errorf(parley.EINVALID, "size must be a positive number of bytes")
	}
	q := s.quotaFor(ctx, workspaceID)
	if q.MaxFileBytes > 0 && size > q.MaxFileBytes {
		return nil, tooLarge(q)
	}
	if err := s.store.CheckUpload(ctx, actor, workspaceID, size, q); err != nil {
		return nil, err
	}
	fileID := parley.NewID(parley.PrefixFile)
	key := Key(workspaceID, fileID)
	backend, err := s.storage.CreateMultipart(ctx, key, "application/octet-stream")
	if err != nil {
		return nil, fmt.Errorf("create upload: %w", err)
	}
	u, err := s.store.CreateUpload(ctx, actor, workspaceID, parley.NewUpload{ID: parley.NewID("U"), FileID: fileID, Name: name,
		Size: size, ChunkSize: PartSize, StorageKey: key, BackendID: backend, ExpiresAt: s.now().Add(s.upTTL)}, q)
	if err != nil {
		s.storage.AbortMultipart(context.WithoutCancel(ctx), key, backend)
		return nil, err
	}
	return u, nil
}

// GetUpload returns actor's upload (its offset says where to go on).
func (s *Service) GetUpload(ctx context.Context, actor, uploadID string) (*parley.Upload, error) {
	return s.store.GetUpload(ctx, actor, uploadID)
}

// PutChunk stores the chunk at offset: exactly ChunkSize bytes, or what is
// left for the last one. A chunk at another offset than the upload's is
// ECONFLICT (the message says the offset); a chunk cut short stores
// nothing and leaves the offset where it was.
func (s *Service) PutChunk(ctx context.Context, actor, uploadID string, offset int64, r io.Reader, length int64) (*parley.Upload, error) {
	u, err := s.store.GetUpload(ctx, actor, uploadID)
	if err != nil {
		return nil, err
	}
	if offset != u.Offset {
		return nil, parley.Errorf(parley.ECONFLICT, "the upload's offset is %d, not %d", u.Offset, offset)
	}
	want := min(u.ChunkSize, u.Size-u.Offset)
	if want == 0 {
		return nil, parley.Errorf(parley.ECONFLICT, "the upload has all its bytes: complete it")
	}
	if length >= 0 && length != want {
		return nil, parley.Errorf(parley.EINVALID, "the chunk at offset %d must have %d bytes, not %d", offset, want, length)
	}
	exact := &exactReader{r: r, left: want}
	part := int(offset/u.ChunkSize) + 1
	if err := s.storage.PutPart(ctx, u.StorageKey, u.BackendID, part, exact, want); err != nil {
		if errors.Is(err, errShort) || errors.Is(err, errLong) {
			return nil, parley.Errorf(parley.EINVALID, "the chunk at offset %d must have %d bytes", offset, want)
		}
		return nil, fmt.Errorf("put chunk: %w", err)
	}
	return s.store.AdvanceUpload(ctx, actor, uploadID, offset, offset+want)
}

var (
	errShort = errors.New("files: chunk shorter than announced")
	errLong  = errors.New("files: chunk longer than announced")
)

// exactReader passes exactly left bytes of r and fails when r has fewer or
// more.
type exactReader struct {
	r    io.Reader
	left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left == 0 {
		var one [1]byte
		if n, _ := io.ReadFull(e.r, one[:]); n > 0 {
			return 0, errLong
		}
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if err == io.EOF && e.left > 0 {
		return n, errShort
	}
	if err == io.EOF {
		err = nil
	}
	return n, err
}

// CompleteUpload joins a fully received upload into a file.
func (s *Service) CompleteUpload(ctx context.Context, actor, uploadID string) (*parley.File, error) {
	u, err := s.store.GetUpload(ctx, actor, uploadID)
	if err != nil {
		return nil, err
	}
	if u.Offset != u.Size {
		return nil, parley.Errorf(parley.ECONFLICT, "the upload has %d of its %d bytes", u.Offset, u.Size)
	}
	parts := int((u.Size + u.ChunkSize - 1) / u.ChunkSize)
	if err := s.storage.CompleteMultipart(ctx, u.StorageKey, u.BackendID, parts); err != nil {
		return nil, fmt.Errorf("complete upload: %w", err)
	}
	if err := s.store.DeleteUpload(ctx, actor, uploadID); err != nil {
		return nil, err
	}
	o, err := s.storage.Open(ctx, u.StorageKey)
	if err != nil {
		return nil, fmt.Errorf("complete upload: %w", err)
	}
	head := make([]byte, sniffLen)
	n, err := io.ReadFull(o, head)
	o.Close()
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, fmt.Errorf("complete upload: read: %w", err)
	}
	f := parley.File{ID: u.FileID, Name: u.Name, Size: u.Size, ContentType: Sniff(head[:n]), StorageKey: u.StorageKey}
	out, err := s.finish(ctx, actor, u.WorkspaceID, f, s.quotaFor(ctx, u.WorkspaceID))
	if err == nil {
		s.uploads.WithLabelValues("resumable").Inc()
		s.bytesIn.Add(float64(u.Size))
	}
	return out, err
}

// AbortUpload drops an upload and what it received.
func (s *Service) AbortUpload(ctx context.Context, actor, uploadID string) error {
	u, err := s.store.GetUpload(ctx, actor, uploadID)
	if err != nil {
		return err
	}
	if err := s.storage.AbortMultipart(ctx, u.StorageKey, u.BackendID); err != nil {
		return fmt.Errorf("abort upload: %w", err)
	}
	return s.store.DeleteUpload(ctx, actor, uploadID)
}

// DeleteFile deletes an unattached file of actor's (its bytes go with the
// next sweep).
func (s *Service) DeleteFile(ctx context.Context, actor, fileID string) error {
	return s.store.DeleteFile(ctx, actor, fileID)
}

// DeleteWorkspaceFiles removes every file of a workspace: the bytes under
// its key prefix first (so that a failure leaves rows to retry with), then
// its rows and usage; its unfinished uploads are aborted by the next
// sweep. The workspace-deletion path calls it.
func (s *Service) DeleteWorkspaceFiles(ctx context.Context, workspaceID string) error {
	if err := parley.CheckText("workspace_id", workspaceID); err != nil || workspaceID == "" {
		return parley.Errorf(parley.EINVALID, "invalid workspace id")
	}
	if err := s.storage.DeletePrefix(ctx, WorkspacePrefix(workspaceID)); err != nil {
		return fmt.Errorf("delete workspace files: %w", err)
	}
	return s.store.DeleteWorkspaceFiles(ctx, workspaceID)
}

// RemoveWorkspaceFiles is DeleteWorkspaceFiles under the name the
// workspace purge calls (parley.WorkspaceFileRemover).
func (s *Service) RemoveWorkspaceFiles(ctx context.Context, workspaceID string) error {
	return s.DeleteWorkspaceFiles(ctx, workspaceID)
}

var _ parley.WorkspaceFileRemover = (*Service)(nil)

// Sweep removes the bytes of deleted files and aborts expired uploads,
// until none is left; it returns how many files and uploads it handled.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	const batch = 100
	total := 0
	for {
		fs, err := s.store.SweepFiles(ctx, batch)
		if err != nil {
			return total, err
		}
		ids := make([]string, 0, len(fs))
		var errs []error
		for _, f := range fs {
			var ferr error
			for _, k := range []string{f.StorageKey, f.ThumbnailKey} {
				if k != "" {
					if err := s.storage.Delete(ctx, k); err != nil {
						ferr = err
					}
				}
			}
			if ferr != nil {
				errs = append(errs, ferr)
				continue
			}
			ids = append(ids, f.ID)
		}
		if err := s.store.PurgeFiles(ctx, ids); err != nil {
			return total, err
		}
		s.swept.Add(float64(len(ids)))
		total += len(ids)
		if len(errs) > 0 {
			return total, errors.Join(errs...)
		}
		if len(fs) < batch {
			break
		}
	}
	for {
		ups, err := s.store.ExpiredUploads(ctx, s.now(), batch)
		if err != nil {
			return total, err
		}
		for _, u := range ups {
			if err := s.storage.AbortMultipart(ctx, u.StorageKey, u.BackendID); err != nil {
				return total, err
			}
			if err := s.store.DeleteUpload(ctx, u.UserID, u.ID); err != nil && parley.ErrorCode(err) != parley.ENOTFOUND {
				return total, err
			}
			total++
		}
		if len(ups) < batch {
			return total, nil
		}
	}
}

// Run sweeps every SweepInterval until ctx ends. Its caller owns the
// goroutine; a panic in a pass is logged and the next pass runs.
func (s *Service) Run(ctx context.Context) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		s.sweepOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Service) sweepOnce(ctx context.Context) {
	defer func() {
		if v := recover(); v != nil {
			s.sweepErr.Inc()
			s.log.Error("files: sweeper panicked", "panic", v)
		}
	}()
	if n, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
		s.sweepErr.Inc()
		s.log.Warn("files: sweep", "err", err, "done", n)
	} else if n > 0 {
		s.log.Debug("files: swept", "n", n)
	}
}

// Signed URLs: the signature binds the file, the variant (content or
// thumbnail), the user it was issued to and its expiry; the server checks
// it and then asks the store whether that user may still read the file.

// Variants of a file's bytes.
const (
	VariantContent   = "content"
	VariantThumbnail = "thumbnail"
)

func (s *Service) signingKey(ctx context.Context) ([]byte, error) {
	if k := s.key.Load(); k != nil {
		return *k, nil
	}
	s.keyMu.Lock()
	defer s.keyMu.Unlock()
	if k := s.key.Load(); k != nil {
		return *k, nil
	}
	k, err := s.store.FileSigningKey(ctx)
	if err != nil {
		return nil, err
	}
	s.key.Store(&k)
	return k, nil
}

func mac(key []byte, fileID, variant, userID string, exp int64) string {
	h := hmac.New(sha256.New, key)
	fmt.Fprintf(h, "parley-file-v1\n%s\n%s\n%s\n%d", fileID, variant, userID, exp)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// Signature signs a download of a file's variant by userID; it returns the
// expiry (unix seconds) and the signature.
func (s *Service) Signature(ctx context.Context, fileID, variant, userID string) (exp int64, sig string, err error) {
	key, err := s.signingKey(ctx)
	if err != nil {
		return 0, "", err
	}
	exp = s.now().Add(s.urlTTL).Unix()
	return exp, mac(key, fileID, variant, userID, exp), nil
}

// Verify checks a signed download: the signature, then the expiry. Any
// failure is EFORBIDDEN with no detail beyond expired or not.
func (s *Service) Verify(ctx context.Context, fileID, variant, userID, expText, sig string) error {
	exp, err := strconv.ParseInt(expText, 10, 64)
	if err != nil || userID == "" || sig == "" {
		return parley.Errorf(parley.EFORBIDDEN, "a download URL needs u, exp and sig: ask GET /files/{id} for one")
	}
	key, err := s.signingKey(ctx)
	if err != nil {
		return err
	}
	if !hmac.Equal([]byte(mac(key, fileID, variant, userID, exp)), []byte(sig)) {
		return parley.Errorf(parley.EFORBIDDEN, "invalid download signature")
	}
	if s.now().Unix() > exp {
		return parley.Errorf(parley.EFORBIDDEN, "the download URL has expired: ask GET /files/{id} for a new one")
	}
	return nil
}

// sniffLen is how much of a file Sniff looks at (http.DetectContentType's).
const sniffLen = 512

// Sniff returns the content type of a file that starts with head, from its
// bytes alone (the WHATWG algorithm of net/http): what the client says is
// never believed.
func Sniff(head []byte) string { return http.DetectContentType(head) }

// Inline reports whether a content type may be shown in the browser: a
// raster image format browsers decode without running anything. Every
// other type (HTML, SVG, PDF, scripts…) downloads as an attachment.
func Inline(contentType string) bool {
	switch contentType {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

// Store returns the metadata store the service asks.
func (s *Service) Store() parley.FileService { return s.store }
