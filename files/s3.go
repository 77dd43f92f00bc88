package files

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config says which S3-compatible store and bucket to use.
type S3Config struct {
	// Endpoint is the store's URL: https://s3.eu-west-1.amazonaws.com,
	// http://127.0.0.1:7070 (a scheme of http means no TLS).
	Endpoint  string
	Bucket    string
	Region    string // default us-east-1
	AccessKey string
	SecretKey string
	// Prefix is put before every key ("parley/"), so that one bucket can
	// hold other things; empty: none.
	Prefix string
	// PathStyle asks for path-style requests (http://host/bucket/key),
	// which most self-hosted stores need; false lets minio-go choose.
	PathStyle bool
	// CreateBucket makes the bucket when it does not exist.
	CreateBucket bool
}

// S3 is a Storage in a bucket of an S3-compatible store (AWS S3, MinIO,
// Ceph, versitygw, R2…), through minio-go.
type S3 struct {
	c      *minio.Client
	core   minio.Core
	bucket string
	prefix string
}

var _ Storage = (*S3)(nil)

// NewS3 connects to the store and checks that the bucket is there (making
// it when cfg.CreateBucket is set).
func NewS3(ctx context.Context, cfg S3Config) (*S3, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("files: s3 endpoint must be an http(s):// URL, not %q", cfg.Endpoint)
	}
	if cfg.Bucket == "" {
		return nil, errors.New("files: s3 bucket is required")
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	c, err := minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:       u.Scheme == "https",
		Region:       region,
		BucketLookup: lookup,
	})
	if err != nil {
		return nil, fmt.Errorf("files: s3 client: %w", err)
	}
	ok, err := c.BucketExists(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("files: s3 bucket %q: %w", cfg.Bucket, err)
	}
	if !ok {
		if !cfg.CreateBucket {
			return nil, fmt.Errorf("files: s3 bucket %q does not exist", cfg.Bucket)
		}
		if err := c.MakeBucket(ctx, cfg.Bucket, minio.MakeBucketOptions{Region: region}); err != nil {
			return nil, fmt.Errorf("files: make s3 bucket %q: %w", cfg.Bucket, err)
		}
	}
	return &S3{c: c, core: minio.Core{Client: c}, bucket: cfg.Bucket, prefix: cfg.Prefix}, nil
}

func (s *S3) name(key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	return s.prefix + key, nil
}

// Put streams r to the bucket. With a known size minio-go sends it as it
// reads; with an unknown one Put reads up to PartSize: a smaller object
// goes in one request, a larger one as a multipart upload of PartSize
// parts, one buffered at a time.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) (int64, error) {
	name, err := s.name(key)
	if err != nil {
		return 0, err
	}
	opts := minio.PutObjectOptions{ContentType: contentType, PartSize: PartSize}
	if size >= 0 {
		info, err := s.c.PutObject(ctx, s.bucket, name, r, size, opts)
		if err != nil {
			return 0, fmt.Errorf("files: s3 put: %w", err)
		}
		return info.Size, nil
	}
	var buf bytes.Buffer // grows to what arrives, PartSize at most
	n, err := buf.ReadFrom(io.LimitReader(r, PartSize))
	if err != nil {
		return 0, fmt.Errorf("files: s3 put: %w", err)
	}
	if n < PartSize {
		if _, err := s.c.PutObject(ctx, s.bucket, name, &buf, n, opts); err != nil {
			return 0, fmt.Errorf("files: s3 put: %w", err)
		}
		return n, nil
	}
	id, err := s.core.NewMultipartUpload(ctx, s.bucket, name, opts)
	if err != nil {
		return 0, fmt.Errorf("files: s3 put: %w", err)
	}
	total, parts, err := s.putParts(ctx, name, id, &buf, r)
	if err == nil {
		_, err = s.core.CompleteMultipartUpload(ctx, s.bucket, name, id, parts, minio.PutObjectOptions{})
	}
	if err != nil {
		s.core.AbortMultipartUpload(context.WithoutCancel(ctx), s.bucket, name, id)
		return 0, fmt.Errorf("files: s3 put: %w", err)
	}
	return total, nil
}

// putParts sends buf as part 1 and the rest of r as the following parts,
// refilling buf each time.
func (s *S3) putParts(ctx context.Context, name, id string, buf *bytes.Buffer, r io.Reader) (int64, []minio.CompletePart, error) {
	var (
		parts []minio.CompletePart
		total int64
	)
	for n := 1; ; n++ {
		size := int64(buf.Len())
		if size == 0 && n > 1 {
			return total, parts, nil
		}
		p, err := s.core.PutObjectPart(ctx, s.bucket, name, id, n, bytes.NewReader(buf.Bytes()), size, minio.PutObjectPartOptions{})
		if err != nil {
			return 0, nil, err
		}
		parts = append(parts, minio.CompletePart{PartNumber: n, ETag: p.ETag})
		total += size
		buf.Reset()
		if size < PartSize {
			return total, parts, nil
		}
		if _, err := buf.ReadFrom(io.LimitReader(r, PartSize)); err != nil {
			return 0, nil, err
		}
	}
}

type s3Object struct {
	*minio.Object
	size int64
	mod  time.Time
}

func (o *s3Object) Size() int64        { return o.size }
func (o *s3Object) ModTime() time.Time { return o.mod }

// Open stats the object and returns a reader that fetches it lazily
// (Seek starts a ranged request).
func (s *S3) Open(ctx context.Context, key string) (Object, error) {
	name, err := s.name(key)
	if err != nil {
		return nil, err
	}
	o, err := s.c.GetObject(ctx, s.bucket, name, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("files: s3 open: %w", err)
	}
	st, err := o.Stat()
	if err != nil {
		o.Close()
		if notFound(err) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
		}
		return nil, fmt.Errorf("files: s3 open: %w", err)
	}
	return &s3Object{Object: o, size: st.Size, mod: st.LastModified}, nil
}

func notFound(err error) bool {
	code := minio.ToErrorResponse(err).Code
	return code == minio.NoSuchKey || code == "NotFound"
}

// Delete removes the object.
func (s *S3) Delete(ctx context.Context, key string) error {
	name, err := s.name(key)
	if err != nil {
		return err
	}
	if err := s.c.RemoveObject(ctx, s.bucket, name, minio.RemoveObjectOptions{}); err != nil && !notFound(err) {
		return fmt.Errorf("files: s3 delete: %w", err)
	}
	return nil
}

// DeletePrefix lists the objects under prefix and removes them in batches.
func (s *S3) DeletePrefix(ctx context.Context, prefix string) error {
	if !strings.HasSuffix(prefix, "/") {
		return fmt.Errorf("files: prefix %q must end with /", prefix)
	}
	if err := checkKey(strings.TrimSuffix(prefix, "/")); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	list := s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true})
	objects := make(chan minio.ObjectInfo)
	var listErr error
	go func() {
		defer close(objects)
		for o := range list {
			if o.Err != nil {
				listErr = o.Err
				return
			}
			select {
			case objects <- o:
			case <-ctx.Done():
				return
			}
		}
	}()
	var errs []error
	for e := range s.c.RemoveObjects(ctx, s.bucket, objects, minio.RemoveObjectsOptions{}) {
		if e.Err != nil && !notFound(e.Err) {
			errs = append(errs, e.Err)
		}
	}
	if listErr != nil { // the goroutine has finished: objects is closed
		errs = append(errs, listErr)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("files: s3 delete prefix: %w", err)
	}
	return nil
}

// CreateMultipart starts an S3 multipart upload.
func (s *S3) CreateMultipart(ctx context.Context, key, contentType string) (string, error) {
	name, err := s.name(key)
	if err != nil {
		return "", err
	}
	id, err := s.core.NewMultipartUpload(ctx, s.bucket, name, minio.PutObjectOptions{ContentType: contentType})
	if err != nil {
		return "", fmt.Errorf("files: s3 create upload: %w", err)
	}
	return id, nil
}

// PutPart uploads one part, streaming it.
func (s *S3) PutPart(ctx context.Context, key, uploadID string, part int, r io.Reader, size int64) error {
	name, err := s.name(key)
	if err != nil {
		return err
	}
	if _, err := s.core.PutObjectPart(ctx, s.bucket, name, uploadID, part, r, size, minio.PutObjectPartOptions{}); err != nil {
		return fmt.Errorf("files: s3 put part %d: %w", part, err)
	}
	return nil
}

// CompleteMultipart lists the parts the store holds (their ETags) and
// completes the upload with parts 1..n.
func (s *S3) CompleteMultipart(ctx context.Context, key, uploadID string, parts int) error {
	name, err := s.name(key)
	if err != nil {
		return err
	}
	etags := make(map[int]string, parts)
	marker := 0
	for {
		res, err := s.core.ListObjectParts(ctx, s.bucket, name, uploadID, marker, 1000)
		if err != nil {
			return fmt.Errorf("files: s3 list parts: %w", err)
		}
		for _, p := range res.ObjectParts {
			etags[p.PartNumber] = p.ETag
		}
		if !res.IsTruncated {
			break
		}
		marker = res.NextPartNumberMarker
	}
	complete := make([]minio.CompletePart, 0, parts)
	for i := 1; i <= parts; i++ {
		etag, ok := etags[i]
		if !ok {
			return fmt.Errorf("files: s3 complete upload: part %d is missing", i)
		}
		complete = append(complete, minio.CompletePart{PartNumber: i, ETag: etag})
	}
	if _, err := s.core.CompleteMultipartUpload(ctx, s.bucket, name, uploadID, complete, minio.PutObjectOptions{}); err != nil {
		return fmt.Errorf("files: s3 complete upload: %w", err)
	}
	return nil
}

// AbortMultipart drops an upload's parts.
func (s *S3) AbortMultipart(ctx context.Context, key, uploadID string) error {
	name, err := s.name(key)
	if err != nil {
		return err
	}
	if err := s.core.AbortMultipartUpload(ctx, s.bucket, name, uploadID); err != nil &&
		minio.ToErrorResponse(err).Code != minio.NoSuchUpload {
		return fmt.Errorf("files: s3 abort upload: %w", err)
	}
	return nil
}
