package files

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"parley"
)

// ErrTooLarge is Ingest's error for bytes over its limit.
var ErrTooLarge = errors.New("files: over the size limit")

// Ingest stores r's bytes as a new file of the workspace, with the type
// sniffed and, for an image, its dimensions and thumbnail, as Upload does,
// but records nothing: for an importer that records and attaches the file
// in one transaction of its own (parley.ImportFileStore). At most max
// bytes are read (0: the live per-file limit); past it, ErrTooLarge and
// nothing stays stored. Discard removes what Ingest stored when the record
// is refused.
func (s *Service) Ingest(ctx context.Context, workspaceID, name string, r io.Reader, max int64) (parley.File, error) {
	if err := parley.ValidateFileName(name); err != nil {
		return parley.File{}, err
	}
	if max <= 0 {
		max = s.quota().MaxFileBytes
	}
	id := parley.NewID(parley.PrefixFile)
	key := Key(workspaceID, id)
	br := bufio.NewReaderSize(r, 4096)
	head, err := br.Peek(sniffLen)
	if err != nil && err != io.EOF && !errors.Is(err, bufio.ErrBufferFull) {
		return parley.File{}, fmt.Errorf("ingest: read: %w", err)
	}
	ctype := Sniff(head)
	lr := &limitedReader{r: br, max: max}
	n, err := s.storage.Put(ctx, key, lr, -1, ctype)
	if err != nil {
		// A failed Put leaves nothing behind on either storage, but a
		// partial object must not outlive an error either way.
		_ = s.storage.Delete(context.WithoutCancel(ctx), key)
		if errors.Is(err, errTooLarge) {
			return parley.File{}, ErrTooLarge
		}
		return parley.File{}, fmt.Errorf("ingest: %w", err)
	}
	f := parley.File{ID: id, Name: name, Size: n, ContentType: ctype, StorageKey: key}
	if CanThumbnail(ctype) {
		s.thumbnail(ctx, &f)
	}
	s.bytesIn.Add(float64(n))
	return f, nil
}

// Discard removes the bytes of a file Ingest stored.
func (s *Service) Discard(ctx context.Context, f parley.File) { s.removeBytes(ctx, f) }

// Quota returns the live file limits.
func (s *Service) Quota() parley.FileQuota { return s.quota() }
