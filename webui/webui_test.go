package webui

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

func builtFS() fstest.MapFS {
	return fstest.MapFS{
		"README":                  {Data: []byte("placeholder")},
		"index.html":              {Data: []byte(`<!doctype html><script type="module" src="/assets/index-abc123.js"></script><div id="app"></div>`)},
		"assets/index-abc123.js":  {Data: []byte("export const x = 1;")},
		"assets/index-abc123.css": {Data: []byte("body{margin:0}")},
		"favicon.svg":             {Data: []byte("<svg/>")},
	}
}

func serve(h http.Handler, method, target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

func TestCSPOnEveryResponse(t *testing.T) {
	h := New(builtFS(), Options{})
	for _, p := range []string{"/", "/assets/index-abc123.js", "/assets/index-abc123.css", "/favicon.svg", "/w/abc/c/def"} {
		rec := serve(h, "GET", p)
		if rec.Code != 200 {
			t.Fatalf("%s: %d", p, rec.Code)
		}
		csp := rec.Header().Get("Content-Security-Policy")
		for _, want := range []string{"script-src 'self'", "style-src 'self'", "connect-src 'self'", "img-src 'self' data: https:;", "frame-ancestors 'none'", "base-uri 'none'"} {
			if !strings.Contains(csp, want) {
				t.Fatalf("%s: CSP %q lacks %q", p, csp, want)
			}
		}
		// Bot icons come from https only: never plain http, nor any source
		// for scripts, styles or frames.
		if strings.Contains(csp, " http:") || strings.Contains(csp, "*") {
			t.Fatalf("%s: CSP %q admits more than https images", p, csp)
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Fatalf("%s: CSP %q allows inline code", p, csp)
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" || rec.Header().Get("X-Frame-Options") != "DENY" {
			t.Fatalf("%s: security headers %v", p, rec.Header())
		}
	}
}

func TestSPAFallbackAndCaching(t *testing.T) {
	h := New(builtFS(), Options{})
	// Client routes get the app shell, never cached for long.
	for _, p := range []string{"/", "/index.html", "/w/W1/c/C1", "/threads", "/login",
		"/w/acme/c/release-1.2", "/w/acme/c/v1.2/m/M1", "/w/acme/search?q=a.b", "/invite/abc", "/w/acme/u/U1", "/w/acme/c/general/t/R1"} {
		rec := serve(h, "GET", p)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `<div id="app">`) {
			t.Fatalf("%s: %d %s", p, rec.Code, rec.Body)
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Fatalf("%s: content type %q", p, ct)
		}
		if cc := rec.Header().Get("Cache-Control"); cc != "no-cache" {
			t.Fatalf("%s: cache %q", p, cc)
		}
	}
	// Hashed assets are immutable; their type comes from the extension.
	rec := serve(h, "GET", "/assets/index-abc123.js")
	if rec.Body.String() != "export const x = 1;" || !strings.Contains(rec.Header().Get("Cache-Control"), "immutable") {
		t.Fatalf("asset: %s %v", rec.Body, rec.Header())
	}
	if ct := rec.Header().Get("Content-Type"); !strings.Contains(ct, "javascript") {
		t.Fatalf("asset content type %q", ct)
	}
	if cc := serve(h, "GET", "/favicon.svg").Header().Get("Cache-Control"); cc != "no-cache" {
		t.Fatalf("unhashed file cache %q", cc)
	}
	// HEAD works; other methods do not.
	if rec := serve(h, "HEAD", "/"); rec.Code != 200 || rec.Body.Len() != 0 {
		t.Fatalf("HEAD /: %d %q", rec.Code, rec.Body)
	}
	if rec := serve(h, "POST", "/"); rec.Code != 405 || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST /: %d %v", rec.Code, rec.Header())
	}
}

func TestMissingFilesAre404(t *testing.T) {
	nf := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(404)
		w.Write([]byte("custom 404"))
	})
	h := New(builtFS(), Options{NotFound: nf})
	for _, p := range []string{"/assets/index-old999.js", "/assets/nothing", "/favicon.ico", "/robots.txt", "/../../etc/passwd.txt"} {
		rec := serve(h, "GET", p)
		if rec.Code != 404 || rec.Body.String() != "custom 404" {
			t.Fatalf("%s: %d %s", p, rec.Code, rec.Body)
		}
	}
	// The README placeholder is a file, served as such (it is harmless text).
	if rec := serve(h, "GET", "/README"); rec.Code != 200 || rec.Body.String() != "placeholder" {
		t.Fatalf("/README: %d", rec.Code)
	}
}

func TestNotBuiltPage(t *testing.T) {
	h := New(fstest.MapFS{"README": {Data: []byte("placeholder")}}, Options{Version: "v9.9.9"})
	if h.Built() {
		t.Fatal("Built() with no index.html")
	}
	for _, p := range []string{"/", "/w/W1/c/C1"} {
		rec := serve(h, "GET", p)
		body := rec.Body.String()
		if rec.Code != 200 || !strings.Contains(body, "web client is not built") || !strings.Contains(body, "make web") ||
			!strings.Contains(body, "v9.9.9") || strings.Contains(body, "<script") {
			t.Fatalf("%s: %d %s", p, rec.Code, body)
		}
		csp := rec.Header().Get("Content-Security-Policy")
		if !strings.HasPrefix(csp, "default-src 'none'") || strings.Contains(csp, "script-src") || strings.Contains(csp, "unsafe-inline") ||
			!strings.Contains(csp, "style-src 'sha256-") {
			t.Fatalf("not-built CSP %q", csp)
		}
	}
	if rec := serve(h, "GET", "/assets/index-abc.js"); rec.Code != 404 {
		t.Fatalf("asset while not built: %d", rec.Code)
	}
}

// The embedded directory always exists: go build works without a web build.
func TestEmbeddedDist(t *testing.T) {
	d := Dist()
	if _, err := d.Open("README"); err != nil {
		t.Fatalf("placeholder missing from the embed: %v", err)
	}
	h := New(d, Options{})
	rec := serve(h, "GET", "/")
	if rec.Code != 200 {
		t.Fatalf("GET /: %d", rec.Code)
	}
	if h.Built() != strings.Contains(rec.Body.String(), `<script`) {
		t.Fatalf("Built()=%v but body %s", h.Built(), rec.Body)
	}
}

func TestGzip(t *testing.T) {
	big := strings.Repeat("export function f() { return 'hello world'; }\n", 200)
	fsys := builtFS()
	fsys["assets/big-1.js"] = &fstest.MapFile{Data: []byte(big)}
	h := New(fsys, Options{})
	get := func(ae string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/assets/big-1.js", nil)
		if ae != "" {
			req.Header.Set("Accept-Encoding", ae)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, ae := range []string{"gzip", "gzip, deflate, br", "br;q=1.0, gzip;q=0.8"} {
		rec := get(ae)
		if rec.Header().Get("Content-Encoding") != "gzip" || !strings.Contains(rec.Header().Get("Content-Type"), "javascript") ||
			rec.Header().Get("Vary") != "Accept-Encoding" || rec.Body.Len() >= len(big)/4 {
			t.Fatalf("%q: %v, %d bytes", ae, rec.Header(), rec.Body.Len())
		}
		zr, err := gzip.NewReader(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		plain, _ := io.ReadAll(zr)
		if string(plain) != big {
			t.Fatalf("%q: decompressed body differs", ae)
		}
	}
	for _, ae := range []string{"", "br", "gzip;q=0", "identity"} {
		rec := get(ae)
		if rec.Header().Get("Content-Encoding") != "" || rec.Body.String() != big {
			t.Fatalf("%q: %v", ae, rec.Header())
		}
	}
	// Tiny files are sent as they are.
	req := httptest.NewRequest("GET", "/assets/index-abc123.js", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Header().Get("Content-Encoding") != "" {
		t.Fatalf("tiny file compressed: %v", rec.Header())
	}
}
