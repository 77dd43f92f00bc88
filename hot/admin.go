package hot

import (
	"encoding/json"
	"net/http"
)

// AdminHandler serves GET /hot on the admin listener: the hot channels of
// this node's view with their rates, as
// {"channels":[{"channel_id","rate","since","source","node_id","expires_at"}]}.
func AdminHandler(d *Detector) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		chans := d.Channels()
		if chans == nil {
			chans = []Channel{}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(struct {
			Channels []Channel `json:"channels"`
		}{chans})
	})
}
