// Package webui serves Parley's web client: the assets Vite builds from web/
// into webui/dist, embedded into the binary with go:embed.
//
// It serves them at / under a strict Content-Security-Policy (scripts,
// styles and connections from the server's own origin only; no inline
// script or style, no frames, no plugins), with long caching for the
// content-hashed files under /assets/ and an SPA fallback: any other path
// that does not name a file gets index.html, so client routes survive a
// reload. When the binary was built without the web client (dist holds only
// its README), every page is a short "web client not built" page instead,
// so `go build` alone still gives a working server.
package webui

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

//go:embed all:dist
var embedded embed.FS

// CSP is the Content-Security-Policy of the web client's pages and assets.
// connect-src 'self' covers the gateway's ws:// or wss:// URL on the same
// host (CSP Level 3). img-src https: is for the icons bot messages name
// (bot_profile.icon_url, docs/integrations.md), which the client shows only
// as images that send no referrer; images are the one thing it admits.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data: https:; font-src 'self'; object-src 'none'; frame-ancestors 'none'; " +
	"base-uri 'none'; form-action 'self'"

// assetCache is for the content-hashed files under /assets/: they never change.
const assetCache = "public, max-age=31536000, immutable"

// Dist returns the embedded build output (the contents of webui/dist).
func Dist() fs.FS {
	sub, err := fs.Sub(embedded, "dist")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}

// Built reports whether fsys holds a web client build (an index.html).
func Built(fsys fs.FS) bool {
	st, err := fs.Stat(fsys, "index.html")
	return err == nil && !st.IsDir()
}

// Options configure a Handler.
type Options struct {
	// Version is shown on the "not built" page.
	Version string
	// NotFound answers requests for files that do not exist (paths with an
	// extension, and anything under /assets/) and non-GET methods are
	// answered 405. Default: http.NotFound.
	NotFound http.Handler
}

// Handler serves the web client from fsys (Dist() in the binary).
type Handler struct {
	fsys     fs.FS
	index    []byte
	built    bool
	opts     Options
	notBuilt []byte
	started  time.Time

	mu sync.Mutex
	gz map[string][]byte // gzip-compressed text files, made on first request
}

// New returns a handler for the build in fsys.
func New(fsys fs.FS, opts Options) *Handler {
	if opts.NotFound == nil {
		opts.NotFound = http.NotFoundHandler()
	}
	h := &Handler{fsys: fsys, opts: opts, started: time.Now()}
	if idx, err := fs.ReadFile(fsys, "index.html"); err == nil {
		h.index, h.built = idx, true
	}
	var buf bytes.Buffer
	if err := notBuiltPage.Execute(&buf, opts.Version); err != nil {
		panic(err)
	}
	h.notBuilt = buf.Bytes()
	return h
}

// Built reports whether the handler serves a real web client.
func (h *Handler) Built() bool { return h.built }

func securityHeaders(w http.ResponseWriter, csp string) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := path.Clean("/" + r.URL.Path)
	if !h.built {
		if p == "/" || !strings.Contains(path.Base(p), ".") {
			h.serveNotBuilt(w, r)
			return
		}
		h.opts.NotFound.ServeHTTP(w, r)
		return
	}
	name := strings.TrimPrefix(p, "/")
	if name != "" && name != "index.html" {
		if data, err := fs.ReadFile(h.fsys, name); err == nil {
			securityHeaders(w, CSP)
			if strings.HasPrefix(name, "assets/") {
				w.Header().Set("Cache-Control", assetCache)
			} else {
				w.Header().Set("Cache-Control", "no-cache")
			}
			h.serveFile(w, r, name, data)
			return
		}
		// A missing asset or file-like path is a 404, not the app: a stale
		// page asking for an old bundle must fail visibly. The app's own
		// routes (/w/…, /invite/…) are the app whatever they end in: a
		// channel's name may hold a dot.
		if strings.HasPrefix(name, "assets/") || strings.Contains(path.Base(name), ".") && !clientRoute(name) {
			h.opts.NotFound.ServeHTTP(w, r)
			return
		}
	}
	// The app shell, for / and every client route.
	securityHeaders(w, CSP)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	h.serveFile(w, r, "index.html", h.index)
}

// clientRoute reports whether name (without its leading slash) is under
// one of the web client's URL prefixes (web/app/src/lib/route.ts).
func clientRoute(name string) bool {
	return strings.HasPrefix(name, "w/") || strings.HasPrefix(name, "invite/")
}

// compressible file types: text that gzip shrinks several times over.
var compressible = map[string]bool{".js": true, ".css": true, ".html": true, ".svg": true, ".json": true, ".txt": true, ".map": true}

// serveFile serves data, gzip-compressed when the client accepts it and
// that pays off. Compressed copies are made once and kept: the embedded
// files never change.
func (h *Handler) serveFile(w http.ResponseWriter, r *http.Request, name string, data []byte) {
	if compressible[path.Ext(name)] && len(data) >= 1024 {
		w.Header().Add("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			if gz := h.gzipped(name, data); gz != nil {
				if w.Header().Get("Content-Type") == "" {
					if ct := mime.TypeByExtension(path.Ext(name)); ct != "" {
						w.Header().Set("Content-Type", ct)
					}
				}
				w.Header().Set("Content-Encoding", "gzip")
				http.ServeContent(w, r, name, h.started, bytes.NewReader(gz))
				return
			}
		}
	}
	http.ServeContent(w, r, name, h.started, bytes.NewReader(data))
}

// acceptsGzip reports whether Accept-Encoding lists gzip with a q above 0.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			continue
		}
		q := 1.0
		if k, v, ok := strings.Cut(strings.TrimSpace(params), "="); ok && strings.TrimSpace(k) == "q" {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				q = f
			}
		}
		return q > 0
	}
	return false
}

func (h *Handler) gzipped(name string, data []byte) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gz, ok := h.gz[name]; ok {
		return gz
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(data)
	zw.Close()
	var gz []byte
	if buf.Len() < len(data)*9/10 {
		gz = buf.Bytes()
	}
	if h.gz == nil {
		h.gz = make(map[string][]byte)
	}
	h.gz[name] = gz
	return gz
}

func (h *Handler) serveNotBuilt(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w, notBuiltCSP)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		return
	}
	w.Write(h.notBuilt)
}

// notBuiltStyle is the page's only style; the CSP allows exactly it by hash.
const notBuiltStyle = `
body { font: 16px/1.5 system-ui, sans-serif; max-width: 40rem; margin: 4rem auto; padding: 0 1rem; color: #1d1c1d; }
code { background: #f4f4f4; padding: 0 .25em; border-radius: 3px; }
.muted { color: #616061; }
`

var notBuiltCSP = func() string {
	sum := sha256.Sum256([]byte(notBuiltStyle))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
		"'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}()

var notBuiltPage = template.Must(template.New("notbuilt").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Parley — web client not built</title>
<style>` + notBuiltStyle + `</style>
</head>
<body>
<h1>Parley is running</h1>
<p><strong>The web client is not built.</strong> This binary was compiled without it.
Run <code>make web</code> (or <code>make run</code>, which builds it) and restart the server.</p>
<p>The HTTP API works: it lives under <code>/api/v1/</code>, described by
<a href="/api/v1/openapi.json">/api/v1/openapi.json</a>.</p>
<p class="muted">Version {{.}}</p>
</body>
</html>
`))
