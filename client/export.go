package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// ExportWorkspace streams the workspace's Parley export zip (docs/import.md)
// into w and returns the bytes written; its owner only. With private set,
// the private channels are included. It is sent once, never retried: a
// failure midway leaves w with part of a zip.
func (c *Client) ExportWorkspace(ctx context.Context, workspaceID string, private bool, w io.Writer) (int64, error) {
	path := "/workspaces/" + url.PathEscape(workspaceID) + "/export"
	target := c.bases[int(c.cur.Load())%len(c.bases)] + apiPrefix + path
	if private {
		target += "?private=true"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", path, err)
	}
	req.Header.Set("Accept", "application/zip, application/json")
	if tok := c.Token(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return 0, &transportError{fmt.Errorf("GET %s: %w", path, err)}
	}
	defer res.Body.Close()
	if res.StatusCode >= 300 {
		raw, _ := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes))
		return 0, apiError(res, raw)
	}
	n, err := io.Copy(w, res.Body)
	if err != nil {
		return n, &transportError{fmt.Errorf("GET %s: read export: %w", path, err)}
	}
	return n, nil
}
