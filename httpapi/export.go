package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"parley"
	"parley/transfer"
)

// GET /workspaces/{ws}/export: the workspace as a Parley export zip
// (docs/import.md), streamed as the store reads it, for its owner only
// (the store checks, before the first byte). ?private=true adds the
// private channels.

// startWriter sets the download's headers on the first byte, so that an
// error before it (not the owner, no such workspace) is answered as any
// other error.
type startWriter struct {
	w       http.ResponseWriter
	name    string
	started bool
}

func (sw *startWriter) Write(p []byte) (int, error) {
	if !sw.started {
		sw.started = true
		h := sw.w.Header()
		h.Set("Content-Type", "application/zip")
		h.Set("Content-Disposition", `attachment; filename="`+sw.name+`"`)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		sw.w.WriteHeader(http.StatusOK)
	}
	return sw.w.Write(p)
}

func (s *Server) exportWorkspace(w http.ResponseWriter, r *http.Request, c *caller) error {
	if s.exporter == nil {
		return parley.Errorf(parley.EUNAVAILABLE, "export is not available on this node")
	}
	var opts parley.ExportOptions
	switch v := r.URL.Query().Get("private"); v {
	case "", "false":
	case "true":
		opts.Private = true
	default:
		return parley.Errorf(parley.EINVALID, "private must be true or false")
	}
	ws := r.PathValue("ws")
	sw := &startWriter{w: w, name: fmt.Sprintf("parley-%s-%s.zip", ws, time.Now().UTC().Format("20060102"))}
	_, err := transfer.Export(r.Context(), s.exporter, c.UserID, ws, opts, sw)
	if err != nil && sw.started {
		// Half a zip is sent: cut the response so that the client sees a
		// failed download, not a short export.
		s.log.Warn("export failed midway", "workspace_id", ws, "err", err)
		panic(http.ErrAbortHandler)
	}
	return err
}
