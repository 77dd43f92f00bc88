package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Storage keeps file bytes under keys. Two implementations: Local (a
// directory, the default) and S3 (any S3-compatible store); both pass the
// same contract test (storage_test.go). Keys are slash-separated paths that
// this package makes ("w/<workspace>/<file>"); a key never starts with "/"
// and has no "." or ".." segment.
//
// Every method streams: none holds a whole object in memory (S3's Put of
// an object of unknown size buffers one part, PartSize).
type Storage interface {
	// Put stores r under key, replacing what was there, and returns the
	// number of bytes written. size is the length of r, or -1 when unknown.
	// A failed Put leaves nothing under key.
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) (int64, error)
	// Open returns the object under key, or an error matching ErrNotFound.
	Open(ctx context.Context, key string) (Object, error)
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// DeletePrefix removes every key that starts with prefix (which ends
	// with "/").
	DeletePrefix(ctx context.Context, prefix string) error

	// Resumable uploads: parts numbered from 1, each PartSize bytes but the
	// last, put in any order and again after a failure; Complete joins
	// parts 1..n into key.
	CreateMultipart(ctx context.Context, key, contentType string) (uploadID string, err error)
	PutPart(ctx context.Context, key, uploadID string, part int, r io.Reader, size int64) error
	CompleteMultipart(ctx context.Context, key, uploadID string, parts int) error
	AbortMultipart(ctx context.Context, key, uploadID string) error
}

// Object is an open stored object: seekable, so that downloads answer
// Range requests without reading what they skip.
type Object interface {
	io.ReadSeekCloser
	Size() int64
	ModTime() time.Time
}

// ErrNotFound is what Open returns for a key that holds nothing.
var ErrNotFound = errors.New("files: object not found")

// PartSize is the size of every part of a resumable upload but the last
// (S3's minimum is 5 MiB), and of the parts S3.Put sends for an object of
// unknown size.
const PartSize = 8 << 20

// checkKey refuses keys that could name something outside the store.
func checkKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "\\") {
		return fmt.Errorf("files: invalid key %q", key)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("files: invalid key %q", key)
		}
	}
	return nil
}
