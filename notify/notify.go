// Package notify emails people about the mentions and DM messages they
// missed (docs/email.md). It is off unless an SMTP server is configured.
//
// A Notifier scans the store every ScanInterval (or when RunOnce is
// called): for each person with email on and an unread mention or DM
// message that no email covered yet, the batch is due once the oldest such
// item is their interval old and their last email is an interval old too.
// Then, unless they are online, it claims the person (ClaimNotify: one
// node sends, whatever the number of nodes), reads the items again (what
// they read meanwhile is gone), and sends one email with all of them.
package notify

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/wneessen/go-mail"

	"parley"
	"parley/internal/promutil"
)

// TLS modes of the SMTP connection.
const (
	TLSNone     = "none"     // plain text (a local relay)
	TLSStartTLS = "starttls" // STARTTLS, required
	TLSImplicit = "tls"      // TLS from the first byte (port 465)
)

// SMTP is the outgoing mail server.
type SMTP struct {
	Host     string
	Port     int // 0: 587, or 465 with TLSImplicit, or 25 with TLSNone
	Username string
	Password string
	From     string // the From address, "Parley <parley@example.com>"
	TLS      string // TLSNone, TLSStartTLS (default) or TLSImplicit
}

// Config configures a Notifier.
type Config struct {
	Store parley.NotifyStore
	SMTP  SMTP
	// BaseURL is where people open Parley; links in emails start with it.
	BaseURL string
	// Secret signs unsubscribe links; every node must have the same.
	Secret []byte
	// NodeID names this node in send claims.
	NodeID string
	// Online returns those of userIDs who are online now (nil: nobody):
	// they are not emailed yet.
	Online func(ctx context.Context, userIDs []string) []string
	// Now is the clock (time.Now by default); tests move it.
	Now func() time.Time
	// ScanInterval is how often Start scans (default 30 s).
	ScanInterval time.Duration
	// ClaimTTL is how long a send claim holds (default 2 minutes): a node
	// that dies mid-send delays that person's email by at most this.
	ClaimTTL time.Duration
	// Batch bounds the people per scan (default 500) and MaxItems the
	// items per email (default 50).
	Batch, MaxItems int
	Logger          *slog.Logger
	Registerer      prometheus.Registerer
}

// Notifier sends the emails.
type Notifier struct {
	cfg    Config
	log    *slog.Logger
	client *mail.Client

	sent   *prometheus.CounterVec
	items  prometheus.Counter
	panics prometheus.Counter

	mu   sync.Mutex // one RunOnce at a time
	stop chan struct{}
	done chan struct{}
}

// ParseTLS checks a TLS mode setting.
func ParseTLS(s string) (string, error) {
	switch s {
	case "", TLSStartTLS:
		return TLSStartTLS, nil
	case TLSNone, TLSImplicit:
		return s, nil
	}
	return "", fmt.Errorf("email TLS mode %q: want none, starttls or tls", s)
}

// New makes a Notifier; it does not scan until Start or RunOnce.
func New(cfg Config) (*Notifier, error) {
	if cfg.Store == nil {
		return nil, errors.New("notify: no store")
	}
	if cfg.SMTP.Host == "" || cfg.SMTP.From == "" {
		return nil, errors.New("notify: SMTP host and from address are required")
	}
	if len(cfg.Secret) == 0 {
		return nil, errors.New("notify: no secret for unsubscribe links")
	}
	tlsMode, err := ParseTLS(cfg.SMTP.TLS)
	if err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ScanInterval <= 0 {
		cfg.ScanInterval = 30 * time.Second
	}
	if cfg.ClaimTTL <= 0 {
		cfg.ClaimTTL = 2 * time.Minute
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.MaxItems <= 0 {
		cfg.MaxItems = 50
	}
	if cfg.NodeID == "" {
		cfg.NodeID = "node-" + rand.Text()
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	opts := []mail.Option{mail.WithTimeout(30 * time.Second)}
	port := cfg.SMTP.Port
	switch tlsMode {
	case TLSNone:
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
		if port == 0 {
			port = 25
		}
	case TLSStartTLS:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
		if port == 0 {
			port = 587
		}
	case TLSImplicit:
		opts = append(opts, mail.WithSSL())
		if port == 0 {
			port = 465
		}
	}
	opts = append(opts, mail.WithPort(port))
	if cfg.SMTP.Username != "" {
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthPlain),
			mail.WithUsername(cfg.SMTP.Username), mail.WithPassword(cfg.SMTP.Password))
	}
	client, err := mail.NewClient(cfg.SMTP.Host, opts...)
	if err != nil {
		return nil, fmt.Errorf("notify: SMTP client: %w", err)
	}
	n := &Notifier{cfg: cfg, log: log.With("component", "notify"), client: client}
	n.sent, n.items = RegisterMetrics(cfg.Registerer)
	n.panics = promutil.Panics(cfg.Registerer).WithLabelValues("notify")
	return n, nil
}

// RegisterMetrics registers (or finds) the notifier's series in reg; a
// node without email registers them too, so they read 0 rather than vanish.
func RegisterMetrics(reg prometheus.Registerer) (sent *prometheus.CounterVec, items prometheus.Counter) {
	sent = promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "parley_notify_emails_total",
		Help: "Notification emails by result: sent, failed (SMTP refused or unreachable).",
	}, []string{"result"}))
	items = promutil.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "parley_notify_items_total",
		Help: "Missed mentions and DM messages put in notification emails.",
	}))
	sent.WithLabelValues("sent")
	sent.WithLabelValues("failed")
	return sent, items
}

// Start scans every ScanInterval until Close.
func (n *Notifier) Start() {
	n.stop, n.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(n.done)
		t := time.NewTicker(n.cfg.ScanInterval)
		defer t.Stop()
		for {
			select {
			case <-n.stop:
				return
			case <-t.C:
				n.scanSafely()
			}
		}
	}()
}

// Close stops Start's loop and waits for a scan in progress.
func (n *Notifier) Close() {
	if n.stop == nil {
		return
	}
	close(n.stop)
	<-n.done
	n.stop = nil
}

func (n *Notifier) scanSafely() {
	defer func() {
		if v := recover(); v != nil {
			n.panics.Inc()
			n.log.Error("notify scan panicked", "panic", v)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := n.RunOnce(ctx); err != nil {
		n.log.Warn("notify scan", "err", err)
	}
}

// RunOnce does one scan at the Notifier's clock and returns the number of
// emails sent. An error sending to one person is logged and counted; the
// others still get theirs.
func (n *Notifier) RunOnce(ctx context.Context) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	recipients, err := n.cfg.Store.NotifyRecipients(ctx, n.cfg.Batch)
	if err != nil {
		return 0, fmt.Errorf("notify: %w", err)
	}
	now := n.cfg.Now()
	var due []parley.NotifyRecipient
	for _, r := range recipients {
		if r.LastSentAt.IsZero() || !now.Before(r.LastSentAt.Add(interval(r.Prefs))) {
			due = append(due, r)
		}
	}
	if len(due) == 0 {
		return 0, nil
	}
	online := map[string]bool{}
	if n.cfg.Online != nil {
		ids := make([]string, len(due))
		for i, r := range due {
			ids[i] = r.UserID
		}
		for _, id := range n.cfg.Online(ctx, ids) {
			online[id] = true
		}
	}
	sent := 0
	for _, r := range due {
		if online[r.UserID] {
			continue
		}
		ok, err := n.notify(ctx, r, now)
		if err != nil {
			n.log.Warn("notification email not sent", "user", r.UserID, "err", err)
			continue
		}
		if ok {
			sent++
		}
	}
	return sent, nil
}

func interval(p parley.NotifyPrefs) time.Duration {
	if p.IntervalSeconds <= 0 {
		return time.Duration(parley.NotifyDefaultInterval) * time.Second
	}
	return time.Duration(p.IntervalSeconds) * time.Second
}

// notify emails one person if their batch is due, under a claim.
func (n *Notifier) notify(ctx context.Context, r parley.NotifyRecipient, now time.Time) (bool, error) {
	ok, last, err := n.cfg.Store.ClaimNotify(ctx, r.UserID, n.cfg.NodeID, now, now.Add(n.cfg.ClaimTTL))
	if err != nil || !ok {
		return false, err
	}
	release := true
	defer func() {
		if release {
			if err := n.cfg.Store.ReleaseNotify(context.WithoutCancel(ctx), r.UserID, n.cfg.NodeID); err != nil {
				n.log.Warn("notify: release claim", "user", r.UserID, "err", err)
			}
		}
	}()
	iv := interval(r.Prefs)
	if !last.IsZero() && now.Before(last.Add(iv)) {
		return false, nil // another node sent since the scan read the state
	}
	// Read under the claim: what was read since the scan is gone.
	items, err := n.cfg.Store.MissedItems(ctx, r.UserID, n.cfg.MaxItems)
	if err != nil {
		return false, err
	}
	if len(items) == 0 || now.Before(items[0].CreatedAt.Add(iv)) {
		return false, nil // nothing, or the oldest has not waited its interval
	}
	token := UnsubscribeToken(n.cfg.Secret, r.UserID)
	e, err := render(r, items, n.cfg.BaseURL, n.cfg.BaseURL+"/api/v1/unsubscribe/"+token)
	if err != nil {
		return false, err
	}
	msg, err := n.message(r, e)
	if err != nil {
		return false, err
	}
	if err := n.client.DialAndSendWithContext(ctx, msg); err != nil {
		n.sent.WithLabelValues("failed").Inc()
		return false, fmt.Errorf("send: %w", err)
	}
	n.sent.WithLabelValues("sent").Inc()
	n.items.Add(float64(len(items)))
	release = false
	if err := n.cfg.Store.NotifySent(context.WithoutCancel(ctx), r.UserID, n.cfg.NodeID, items, now); err != nil {
		// The email went; if this is lost the claim expires and the same
		// items may go again (at least once, not exactly once).
		return true, fmt.Errorf("record sent: %w", err)
	}
	return true, nil
}

func (n *Notifier) message(r parley.NotifyRecipient, e email) (*mail.Msg, error) {
	m := mail.NewMsg()
	if err := m.From(n.cfg.SMTP.From); err != nil {
		return nil, fmt.Errorf("from address: %w", err)
	}
	if err := m.To(r.Email); err != nil {
		return nil, fmt.Errorf("to address: %w", err)
	}
	m.Subject(e.Subject)
	m.SetDate()
	m.SetMessageID()
	m.SetGenHeader(mail.HeaderListUnsubscribe, "<"+e.UnsubscribeURL+">")
	m.SetGenHeader(mail.HeaderListUnsubscribePost, "List-Unsubscribe=One-Click")
	m.SetGenHeader("Auto-Submitted", "auto-generated")
	m.SetBodyString(mail.TypeTextPlain, e.Text)
	m.AddAlternativeString(mail.TypeTextHTML, e.HTML)
	return m, nil
}
