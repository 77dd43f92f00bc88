package files_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"strings"
	"testing"

	"parley/files"
	"parley/internal/s3test"
)

// The storage contract, run against both implementations.

func TestLocalStorage(t *testing.T) {
	s, err := files.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	testStorage(t, s)
}

func TestS3Storage(t *testing.T) {
	testStorage(t, newS3(t))
}

// newS3 starts a versitygw and returns an S3 storage on a new bucket.
func newS3(tb testing.TB) *files.S3 {
	tb.Helper()
	srv := s3test.Start(tb)
	s, err := files.NewS3(context.Background(), files.S3Config{Endpoint: srv.Endpoint, Bucket: "parley-test",
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, PathStyle: true, CreateBucket: true, Prefix: "p/"})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func randomBytes(tb testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return b
}

func readAll(tb testing.TB, s files.Storage, key string) []byte {
	tb.Helper()
	o, err := s.Open(context.Background(), key)
	if err != nil {
		tb.Fatalf("open %s: %v", key, err)
	}
	defer o.Close()
	b, err := io.ReadAll(o)
	if err != nil {
		tb.Fatalf("read %s: %v", key, err)
	}
	if o.Size() != int64(len(b)) {
		tb.Fatalf("%s: Size() = %d, read %d bytes", key, o.Size(), len(b))
	}
	return b
}

func testStorage(t *testing.T, s files.Storage) {
	ctx := context.Background()
	t.Run("PutOpenSeek", func(t *testing.T) {
		data := randomBytes(t, 100_000)
		n, err := s.Put(ctx, "w/W1/F1", bytes.NewReader(data), int64(len(data)), "application/octet-stream")
		if err != nil || n != int64(len(data)) {
			t.Fatalf("put: %d, %v", n, err)
		}
		if got := readAll(t, s, "w/W1/F1"); !bytes.Equal(got, data) {
			t.Fatal("read back different bytes")
		}
		o, err := s.Open(ctx, "w/W1/F1")
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		if _, err := o.Seek(90_000, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		tail, err := io.ReadAll(o)
		if err != nil || !bytes.Equal(tail, data[90_000:]) {
			t.Fatalf("after seek: %d bytes, %v", len(tail), err)
		}
	})
	t.Run("Overwrite", func(t *testing.T) {
		for _, v := range []string{"first version", "second"} {
			if _, err := s.Put(ctx, "w/W1/over", strings.NewReader(v), -1, "text/plain"); err != nil {
				t.Fatal(err)
			}
		}
		if got := string(readAll(t, s, "w/W1/over")); got != "second" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("UnknownSizeLarge", func(t *testing.T) {
		data := randomBytes(t, files.PartSize+12345) // two parts on S3
		n, err := s.Put(ctx, "w/W1/big", bytes.NewReader(data), -1, "application/octet-stream")
		if err != nil || n != int64(len(data)) {
			t.Fatalf("put: %d, %v", n, err)
		}
		if got := readAll(t, s, "w/W1/big"); !bytes.Equal(got, data) {
			t.Fatal("read back different bytes")
		}
	})
	t.Run("NotFoundAndDelete", func(t *testing.T) {
		if _, err := s.Open(ctx, "w/W1/missing"); !errors.Is(err, files.ErrNotFound) {
			t.Fatalf("open missing: %v", err)
		}
		if err := s.Delete(ctx, "w/W1/missing"); err != nil {
			t.Fatalf("delete missing: %v", err)
		}
		if _, err := s.Put(ctx, "w/W1/gone", strings.NewReader("x"), 1, ""); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, "w/W1/gone"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Open(ctx, "w/W1/gone"); !errors.Is(err, files.ErrNotFound) {
			t.Fatalf("open deleted: %v", err)
		}
	})
	t.Run("DeletePrefix", func(t *testing.T) {
		for _, k := range []string{"w/W2/a", "w/W2/b", "w/W2/b.thumb", "w/W20/keep"} {
			if _, err := s.Put(ctx, k, strings.NewReader(k), -1, ""); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.DeletePrefix(ctx, "w/W2/"); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"w/W2/a", "w/W2/b", "w/W2/b.thumb"} {
			if _, err := s.Open(ctx, k); !errors.Is(err, files.ErrNotFound) {
				t.Fatalf("%s after DeletePrefix: %v", k, err)
			}
		}
		if got := string(readAll(t, s, "w/W20/keep")); got != "w/W20/keep" {
			t.Fatalf("a key of another prefix went: %q", got)
		}
	})
	t.Run("Multipart", func(t *testing.T) {
		data := randomBytes(t, 2*files.PartSize+777)
		id, err := s.CreateMultipart(ctx, "w/W3/resumed", "application/octet-stream")
		if err != nil {
			t.Fatal(err)
		}
		part := func(n int) []byte {
			lo := (n - 1) * files.PartSize
			return data[lo:min(lo+files.PartSize, len(data))]
		}
		// Out of order, and part 2 twice (a retry after a lost answer).
		for _, n := range []int{2, 1, 2, 3} {
			p := part(n)
			if err := s.PutPart(ctx, "w/W3/resumed", id, n, bytes.NewReader(p), int64(len(p))); err != nil {
				t.Fatalf("part %d: %v", n, err)
			}
		}
		if err := s.CompleteMultipart(ctx, "w/W3/resumed", id, 3); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, s, "w/W3/resumed"); !bytes.Equal(got, data) {
			t.Fatal("completed object differs")
		}
	})
	t.Run("MultipartMissingPartAndAbort", func(t *testing.T) {
		id, err := s.CreateMultipart(ctx, "w/W3/aborted", "")
		if err != nil {
			t.Fatal(err)
		}
		p := randomBytes(t, files.PartSize)
		if err := s.PutPart(ctx, "w/W3/aborted", id, 1, bytes.NewReader(p), int64(len(p))); err != nil {
			t.Fatal(err)
		}
		if err := s.CompleteMultipart(ctx, "w/W3/aborted", id, 2); err == nil {
			t.Fatal("completed an upload with a missing part")
		}
		if err := s.AbortMultipart(ctx, "w/W3/aborted", id); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Open(ctx, "w/W3/aborted"); !errors.Is(err, files.ErrNotFound) {
			t.Fatalf("aborted upload left an object: %v", err)
		}
	})
	t.Run("BadKeys", func(t *testing.T) {
		for _, k := range []string{"", "/abs", "w/../x", "w//x", "w/./x", `w\x`} {
			if _, err := s.Put(ctx, k, strings.NewReader("x"), 1, ""); err == nil {
				t.Errorf("put %q: no error", k)
			}
		}
	})
}
