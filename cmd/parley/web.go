package main

import (
	"encoding/json"
	"html/template"
	"net/http"

	"parley"
)

// rootHandler serves the public listener: the API under /api/v1/, a landing
// page at /, and a JSON 404 everywhere else.
func rootHandler(api http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/api/v1/", api)
	mux.HandleFunc("GET /{$}", landing)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			w.Header().Set("Allow", "GET, HEAD")
			writeJSONError(w, http.StatusMethodNotAllowed, parley.EINVALID, "method not allowed")
			return
		}
		writeJSONError(w, http.StatusNotFound, parley.ENOTFOUND, "no such endpoint")
	})
	return mux
}

// writeJSONError writes an error in the API's shape:
// {"error": {"code": …, "message": …}}.
func writeJSONError(w http.ResponseWriter, status int, code, message string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	type errBody struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	json.NewEncoder(w).Encode(struct {
		Error errBody `json:"error"`
	}{errBody{code, message}})
}

// landingCSP allows nothing but the page's own inline style block: no
// scripts, no images, no frames, no forms.
const landingCSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

var landingPage = template.Must(template.New("landing").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Parley</title>
<style>
body { font: 16px/1.5 system-ui, sans-serif; max-width: 40rem; margin: 4rem auto; padding: 0 1rem; color: #1d1c1d; }
code { background: #f4f4f4; padding: 0 .25em; border-radius: 3px; }
.muted { color: #616061; }
</style>
</head>
<body>
<h1>Parley is running</h1>
<p>This server speaks the Parley HTTP API under <code>/api/v1/</code>.
Its OpenAPI document is at <a href="/api/v1/openapi.json">/api/v1/openapi.json</a>.</p>
<p>The web client is not built yet: use the API directly, for example with <code>curl</code>.</p>
<p class="muted">Version {{.}}</p>
</body>
</html>
`))

func landing(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", landingCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	landingPage.Execute(w, parley.Version)
}
