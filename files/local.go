package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Local is a Storage in a directory of the local file system: the default,
// which needs no service. An object is a file at <dir>/<key>; a resumable
// upload's parts wait in <dir>/.uploads/<id>/. Writes go to a temporary
// file renamed into place, so a reader never sees half an object.
type Local struct {
	dir string
}

var _ Storage = (*Local)(nil)

// NewLocal returns a Local storage in dir. The directory is made by the
// first write, so that a node that never stores a file (on PostgreSQL with
// S3 elsewhere, say) leaves nothing on disk.
func NewLocal(dir string) (*Local, error) {
	if dir == "" {
		return nil, fmt.Errorf("files: local storage needs a directory")
	}
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return nil, fmt.Errorf("files: local storage: %s is not a directory", dir)
	}
	return &Local{dir: dir}, nil
}

func (l *Local) path(key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	return filepath.Join(l.dir, filepath.FromSlash(key)), nil
}

// Put writes r to a temporary file beside the key's and renames it.
func (l *Local) Put(ctx context.Context, key string, r io.Reader, size int64, _ string) (int64, error) {
	p, err := l.path(key)
	if err != nil {
		return 0, err
	}
	return writeFile(ctx, p, r)
}

// writeFile copies r into a new file at p, through a temporary file.
func writeFile(ctx context.Context, p string, r io.Reader) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return 0, fmt.Errorf("files: put: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return 0, fmt.Errorf("files: put: %w", err)
	}
	n, err := io.Copy(tmp, ctxReader{ctx, r})
	if err == nil {
		err = tmp.Close()
	} else {
		tmp.Close()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return 0, fmt.Errorf("files: put: %w", err)
	}
	return n, nil
}

// ctxReader stops a copy when its context ends (a client that went away).
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

type localObject struct {
	*os.File
	size int64
	mod  time.Time
}

func (o *localObject) Size() int64        { return o.size }
func (o *localObject) ModTime() time.Time { return o.mod }

// Open opens the key's file.
func (l *Local) Open(_ context.Context, key string) (Object, error) {
	p, err := l.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return nil, fmt.Errorf("files: open: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("files: open: %w", err)
	}
	return &localObject{File: f, size: st.Size(), mod: st.ModTime()}, nil
}

// Delete removes the key's file.
func (l *Local) Delete(_ context.Context, key string) error {
	p, err := l.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("files: delete: %w", err)
	}
	return nil
}

// DeletePrefix removes the directory the prefix names.
func (l *Local) DeletePrefix(_ context.Context, prefix string) error {
	p, err := l.path(strings.TrimSuffix(prefix, "/"))
	if err != nil {
		return err
	}
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("files: delete prefix: %w", err)
	}
	return nil
}

func (l *Local) uploadDir(uploadID string) (string, error) {
	if uploadID == "" || strings.ContainsAny(uploadID, `/\.`) {
		return "", fmt.Errorf("files: invalid upload id %q", uploadID)
	}
	return filepath.Join(l.dir, ".uploads", uploadID), nil
}

// CreateMultipart makes the upload's part directory.
func (l *Local) CreateMultipart(_ context.Context, key, _ string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(l.dir, ".uploads"), 0o750); err != nil {
		return "", fmt.Errorf("files: create upload: %w", err)
	}
	d, err := os.MkdirTemp(filepath.Join(l.dir, ".uploads"), "u")
	if err != nil {
		return "", fmt.Errorf("files: create upload: %w", err)
	}
	return filepath.Base(d), nil
}

// PutPart writes one part's file.
func (l *Local) PutPart(ctx context.Context, _, uploadID string, part int, r io.Reader, _ int64) error {
	d, err := l.uploadDir(uploadID)
	if err != nil {
		return err
	}
	if part < 1 {
		return fmt.Errorf("files: part %d: parts count from 1", part)
	}
	if _, err := os.Stat(d); err != nil {
		return fmt.Errorf("files: put part: upload %s: %w", uploadID, ErrNotFound)
	}
	_, err = writeFile(ctx, filepath.Join(d, strconv.Itoa(part)), r)
	return err
}

// CompleteMultipart concatenates the parts into the key's file and removes
// them.
func (l *Local) CompleteMultipart(ctx context.Context, key, uploadID string, parts int) error {
	d, err := l.uploadDir(uploadID)
	if err != nil {
		return err
	}
	p, err := l.path(key)
	if err != nil {
		return err
	}
	for i := 1; i <= parts; i++ { // all there before anything is written
		if _, err := os.Stat(filepath.Join(d, strconv.Itoa(i))); err != nil {
			return fmt.Errorf("files: complete upload: part %d: %w", i, err)
		}
	}
	pr := &partsReader{dir: d, n: parts}
	defer pr.close()
	if _, err := writeFile(ctx, p, pr); err != nil {
		return err
	}
	return os.RemoveAll(d)
}

// AbortMultipart removes the upload's parts.
func (l *Local) AbortMultipart(_ context.Context, _, uploadID string) error {
	d, err := l.uploadDir(uploadID)
	if err != nil {
		return err
	}
	return os.RemoveAll(d)
}

// partsReader reads parts 1..n of a directory one after the other, with
// one open at a time.
type partsReader struct {
	dir  string
	n    int
	next int // the last part opened
	cur  *os.File
}

func (r *partsReader) Read(p []byte) (int, error) {
	for {
		if r.cur == nil {
			if r.next == r.n {
				return 0, io.EOF
			}
			r.next++
			f, err := os.Open(filepath.Join(r.dir, strconv.Itoa(r.next)))
			if err != nil {
				return 0, err
			}
			r.cur = f
		}
		n, err := r.cur.Read(p)
		if err == io.EOF {
			r.cur.Close()
			r.cur = nil
			if n > 0 {
				return n, nil
			}
			continue
		}
		return n, err
	}
}

func (r *partsReader) close() {
	if r.cur != nil {
		r.cur.Close()
	}
}
