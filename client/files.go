package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"parley"
)

// Files (docs/files.md). Uploads and downloads stream: the client never
// holds a file in memory. They are bounded by the HTTP client's Timeout
// like every request: give WithHTTPClient a client without one (or a long
// one) for big files, or use UploadFileResumable, whose requests each
// carry one chunk.

// UploadFile streams size bytes of r (-1: unknown) as a new file of the
// workspace, named name. It is sent once: an upload is not idempotent.
func (c *Client) UploadFile(ctx context.Context, workspaceID, name string, r io.Reader, size int64) (*parley.File, error) {
	var f parley.File
	err := c.stream(ctx, http.MethodPost, "/workspaces/"+esc(workspaceID)+"/files", url.Values{"name": {name}}, r, size, &f)
	if err != nil {
		return nil, err
	}
	return &f, nil
}

// GetFile returns a file's metadata with download URLs signed for the
// caller (relative to the server: ResolveURL makes them absolute).
func (c *Client) GetFile(ctx context.Context, fileID string) (*parley.File, error) {
	var f parley.File
	if err := c.do(ctx, call{method: http.MethodGet, path: "/files/" + esc(fileID), idempotent: true}, &f); err != nil {
		return nil, err
	}
	return &f, nil
}

// DeleteFile deletes an unattached file of the caller's.
func (c *Client) DeleteFile(ctx context.Context, fileID string) error {
	return c.do(ctx, call{method: http.MethodDelete, path: "/files/" + esc(fileID), idempotent: true}, nil)
}

// ListChannelFiles returns a page of the files attached in a channel,
// newest first.
func (c *Client) ListChannelFiles(ctx context.Context, channelID, cursor string, limit int) (*parley.FilePage, error) {
	v := url.Values{}
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	var page parley.FilePage
	if err := c.do(ctx, call{method: http.MethodGet, path: "/channels/" + esc(channelID) + "/files", query: v, idempotent: true}, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// DownloadFile opens a file's bytes (its thumbnail's with thumb set) with
// the client's token. The caller closes the reader.
func (c *Client) DownloadFile(ctx context.Context, fileID string, thumb bool) (io.ReadCloser, error) {
	variant := "/content"
	if thumb {
		variant = "/thumbnail"
	}
	res, err := c.send(ctx, http.MethodGet, apiPrefix+"/files/"+esc(fileID)+variant, nil, -1, "")
	if err != nil {
		return nil, err
	}
	return res.Body, nil
}

// ResolveURL makes a URL the server returned (a signed download path)
// absolute against the server in use.
func (c *Client) ResolveURL(path string) string {
	return c.bases[int(c.cur.Load())%len(c.bases)] + path
}

// CreateUpload starts a resumable upload of size bytes.
func (c *Client) CreateUpload(ctx context.Context, workspaceID, name string, size int64) (*parley.Upload, error) {
	var u parley.Upload
	err := c.do(ctx, call{method: http.MethodPost, path: "/workspaces/" + esc(workspaceID) + "/uploads",
		body: map[string]any{"name": name, "size": size}}, &u)
	if err != nil {
		return nil, err
	}
	return &u, nil
}

// GetUpload returns an upload's state: its offset is where to go on from.
func (c *Client) GetUpload(ctx context.Context, uploadID string) (*parley.Upload, error) {
	var u parley.Upload
	if err := c.do(ctx, call{method: http.MethodGet, path: "/uploads/" + esc(uploadID), idempotent: true}, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// PutUploadChunk sends the chunk at offset (chunk_size bytes, or what is
// left).
func (c *Client) PutUploadChunk(ctx context.Context, uploadID string, offset int64, chunk io.Reader, size int64) (*parley.Upload, error) {
	var u parley.Upload
	err := c.stream(ctx, http.MethodPut, "/uploads/"+esc(uploadID), url.Values{"offset": {strconv.FormatInt(offset, 10)}}, chunk, size, &u)
	if err != nil {
		return nil, err
	}
	return &u, nil
}

// CompleteUpload turns a fully sent upload into a file.
func (c *Client) CompleteUpload(ctx context.Context, uploadID string) (*parley.File, error) {
	var f parley.File
	if err := c.do(ctx, call{method: http.MethodPost, path: "/uploads/" + esc(uploadID) + "/complete"}, &f); err != nil {
		return nil, err
	}
	return &f, nil
}

// AbortUpload drops an upload.
func (c *Client) AbortUpload(ctx context.Context, uploadID string) error {
	return c.do(ctx, call{method: http.MethodDelete, path: "/uploads/" + esc(uploadID), idempotent: true}, nil)
}

// UploadFileResumable uploads size bytes of r chunk by chunk. After a
// failed chunk it asks the server for the upload's offset and goes on from
// there, up to the client's retry budget per chunk; progress, if not nil,
// is called with the bytes the server holds after each chunk.
func (c *Client) UploadFileResumable(ctx context.Context, workspaceID, name string, r io.ReaderAt, size int64, progress func(sent int64)) (*parley.File, error) {
	u, err := c.CreateUpload(ctx, workspaceID, name, size)
	if err != nil {
		return nil, err
	}
	failures := 0
	for u.Offset < u.Size {
		n := min(u.ChunkSize, u.Size-u.Offset)
		next, err := c.PutUploadChunk(ctx, u.ID, u.Offset, io.NewSectionReader(r, u.Offset, n), n)
		if err != nil {
			var ae *APIError
			if ctx.Err() != nil || (errors.As(err, &ae) && ae.Status != http.StatusConflict && ae.Status < 500) {
				return nil, err
			}
			if failures++; failures > c.maxRetries+1 {
				return nil, err
			}
			if next, err = c.GetUpload(ctx, u.ID); err != nil { // where did it get to?
				return nil, err
			}
			u = next
			continue
		}
		failures = 0
		u = next
		if progress != nil {
			progress(u.Offset)
		}
	}
	return c.CompleteUpload(ctx, u.ID)
}

// stream sends body as the request's bytes (not JSON) and decodes the JSON
// answer into out. It is sent once.
func (c *Client) stream(ctx context.Context, method, path string, q url.Values, body io.Reader, size int64, out any) error {
	target := apiPrefix + path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	res, err := c.send(ctx, method, target, body, size, "application/octet-stream")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes))
	if err != nil {
		return &transportError{fmt.Errorf("%s %s: read response: %w", method, path, err)}
	}
	if err := json.Unmarshal(bytes.TrimSpace(raw), out); err != nil {
		return fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	return nil
}

// send sends one request with an unbuffered body to the server in use and
// returns a successful response (the caller closes its body) or the error.
func (c *Client) send(ctx context.Context, method, target string, body io.Reader, size int64, ctype string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.ResolveURL(target), body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, target, err)
	}
	if body != nil && size >= 0 {
		req.ContentLength = size
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if tok := c.Token(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, &transportError{fmt.Errorf("%s %s: %w", method, target, err)}
	}
	if res.StatusCode >= 300 {
		defer res.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		return nil, apiError(res, raw)
	}
	return res, nil
}
