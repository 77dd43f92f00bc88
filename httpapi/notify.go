package httpapi

import (
	"crypto/rand"
	"html/template"
	"net/http"

	"parley"
	"parley/notify"
)

// Email notification preferences and the unsubscribe link (docs/email.md).
// GET and PUT /me/notifications are for people's logins (bots have no
// email); /unsubscribe/{token} needs no login: the token, signed with the
// server's email secret, says whose email to turn off. GET shows a page
// with a confirm button, POST (the button, or a mail client's one-click
// List-Unsubscribe-Post) turns it off.

// notifyState is the Server's part of email notifications.
type notifyState struct {
	store   parley.NotifyStore // nil: the routes answer 503
	secret  []byte
	enabled bool // an SMTP server is configured
}

func newNotifyState(cfg Config) *notifyState {
	n := &notifyState{store: cfg.Notify, secret: cfg.NotifySecret, enabled: cfg.EmailEnabled}
	if n.store == nil {
		n.store, _ = cfg.Store.(parley.NotifyStore)
	}
	if len(n.secret) == 0 {
		// No secret configured: links made by this process work until it
		// stops (cmd/parley requires one when email is on).
		n.secret = []byte(rand.Text())
	}
	return n
}

// notifyPrefsOut is GET /me/notifications' answer.
type notifyPrefsOut struct {
	parley.NotifyPrefs
	// Intervals are the interval_seconds a PUT accepts.
	Intervals []int64 `json:"intervals"`
	// EmailEnabled says whether this server sends email at all (an SMTP
	// server is configured); the preference is kept either way.
	EmailEnabled bool `json:"email_enabled"`
}

func (s *Server) notifyStore() (parley.NotifyStore, error) {
	if s.notify.store == nil {
		return nil, parley.Errorf(parley.EUNAVAILABLE, "email notifications are not available")
	}
	return s.notify.store, nil
}

func (s *Server) writePrefs(w http.ResponseWriter, p parley.NotifyPrefs) {
	writeJSON(w, http.StatusOK, notifyPrefsOut{NotifyPrefs: p, Intervals: parley.NotifyIntervals, EmailEnabled: s.notify.enabled})
}

func (s *Server) getNotifyPrefs(w http.ResponseWriter, r *http.Request, c *caller) error {
	st, err := s.notifyStore()
	if err != nil {
		return err
	}
	p, err := st.NotifyPrefs(r.Context(), c.UserID)
	if err != nil {
		return err
	}
	s.writePrefs(w, p)
	return nil
}

func (s *Server) setNotifyPrefs(w http.ResponseWriter, r *http.Request, c *caller) error {
	st, err := s.notifyStore()
	if err != nil {
		return err
	}
	var in struct {
		Mode            *string `json:"mode"`
		IntervalSeconds *int64  `json:"interval_seconds"`
	}
	if err := decode(r, &in, false); err != nil {
		return err
	}
	if in.Mode == nil && in.IntervalSeconds == nil {
		return parley.Errorf(parley.EINVALID, "give mode, interval_seconds or both")
	}
	p, err := st.NotifyPrefs(r.Context(), c.UserID)
	if err != nil {
		return err
	}
	if in.Mode != nil {
		p.Mode = *in.Mode
	}
	if in.IntervalSeconds != nil {
		p.IntervalSeconds = *in.IntervalSeconds
	}
	if p, err = st.SetNotifyPrefs(r.Context(), c.UserID, p); err != nil {
		return err
	}
	s.writePrefs(w, p)
	return nil
}

// unsubscribeUser checks the link's token.
func (s *Server) unsubscribeUser(r *http.Request) (string, error) {
	id, ok := notify.VerifyUnsubscribeToken(s.notify.secret, r.PathValue("token"))
	if !ok {
		return "", parley.Errorf(parley.ENOTFOUND, "this unsubscribe link is not valid")
	}
	return id, nil
}

var unsubscribePage = template.Must(template.New("unsubscribe").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{{.Title}} · Parley</title></head>
<body>
<h1>{{.Title}}</h1>
<p>{{.Text}}</p>
{{if .Confirm}}<form method="post"><button type="submit">Turn off email notifications</button></form>{{end}}
</body></html>
`))

func writePage(w http.ResponseWriter, title, text string, confirm bool) error {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	return unsubscribePage.Execute(w, struct {
		Title, Text string
		Confirm     bool
	}{title, text, confirm})
}

func (s *Server) unsubscribePage(w http.ResponseWriter, r *http.Request, _ *caller) error {
	if _, err := s.unsubscribeUser(r); err != nil {
		return err
	}
	if _, err := s.notifyStore(); err != nil {
		return err
	}
	return writePage(w, "Unsubscribe",
		"Stop the emails Parley sends about mentions and direct messages you missed? You can turn them on again in Preferences.", true)
}

func (s *Server) unsubscribe(w http.ResponseWriter, r *http.Request, _ *caller) error {
	id, err := s.unsubscribeUser(r)
	if err != nil {
		return err
	}
	st, err := s.notifyStore()
	if err != nil {
		return err
	}
	p, err := st.NotifyPrefs(r.Context(), id)
	if err != nil {
		return err
	}
	p.Mode = parley.NotifyOff
	if _, err := st.SetNotifyPrefs(r.Context(), id, p); err != nil {
		return err
	}
	return writePage(w, "Unsubscribed",
		"Parley will not email you about missed mentions and direct messages any more. You can turn them on again in Preferences.", false)
}
