package main

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"strings"

	"parley"
	"parley/httpapi"
	"parley/webui"
)

// rootHandler serves the public listener: the WebSocket gateway at
// gatewayPath, the API under /api/v1/ and the web client (package webui)
// everywhere else, with a JSON 404 for files that do not exist. web is the
// built client; webui.Dist() in the binary.
func rootHandler(api, gw http.Handler, web fs.FS) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/api/v1/", api)
	mux.Handle(gatewayPath, gw)
	mux.Handle("/", webui.New(web, webui.Options{
		Version: parley.Version,
		NotFound: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeJSONError(w, http.StatusNotFound, parley.ENOTFOUND, "no such endpoint")
		}),
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// API paths go to the API as sent: this mux would answer a path
		// with "." or ".." segments with a 307 to the cleaned path, which
		// keeps the method (DELETE …/reactions/.. would delete the
		// message). The API refuses such paths itself.
		if strings.HasPrefix(r.URL.Path, httpapi.Prefix+"/") && r.URL.Path != gatewayPath {
			api.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
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
