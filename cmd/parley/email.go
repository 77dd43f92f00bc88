package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"parley/notify"
)

// Email for missed mentions and DMs (docs/email.md): off unless
// --smtp-host is set, so a zero-services `parley serve` sends nothing.

// emailOptions are the --smtp-* and --email-* flags.
type emailOptions struct {
	SMTPHost     string
	SMTPPort     int
	SMTPUser     string
	SMTPPassword string
	SMTPFrom     string
	SMTPTLS      string
	EmailSecret  string
	EmailScan    time.Duration
}

func (o *emailOptions) registerEmail(fs *pflag.FlagSet) {
	fs.StringVar(&o.SMTPHost, "smtp-host", "", "SMTP server for email notifications of missed mentions and DMs; empty: no email (docs/email.md)")
	fs.IntVar(&o.SMTPPort, "smtp-port", 0, "SMTP port (default 587 with --smtp-tls starttls, 465 with tls, 25 with none)")
	fs.StringVar(&o.SMTPUser, "smtp-user", "", "SMTP user name (PLAIN authentication); empty: none")
	fs.StringVar(&o.SMTPPassword, "smtp-password", "", "SMTP password")
	fs.StringVar(&o.SMTPFrom, "smtp-from", "", `From address of notification emails, e.g. "Parley <parley@example.com>"; required with --smtp-host`)
	fs.StringVar(&o.SMTPTLS, "smtp-tls", "starttls", "SMTP TLS mode: starttls (required), tls (from the first byte) or none")
	fs.StringVar(&o.EmailSecret, "email-secret", "", "secret (at least 16 characters, the same on every node) that signs the unsubscribe links of emails; required with --smtp-host")
	fs.DurationVar(&o.EmailScan, "email-scan-interval", 30*time.Second, "how often a node looks for emails that are due")
}

func (o *emailOptions) validateEmail() error {
	if o.SMTPHost == "" {
		return nil
	}
	if o.SMTPFrom == "" {
		return errors.New("--smtp-from is required with --smtp-host")
	}
	if len(o.EmailSecret) < 16 {
		return errors.New("--email-secret of at least 16 characters is required with --smtp-host (it signs unsubscribe links; the same on every node)")
	}
	if _, err := notify.ParseTLS(o.SMTPTLS); err != nil {
		return fmt.Errorf("--smtp-tls: %w", err)
	}
	if o.SMTPPort < 0 || o.SMTPPort > 65535 {
		return fmt.Errorf("--smtp-port %d is not a port", o.SMTPPort)
	}
	if o.EmailScan <= 0 {
		return errors.New("--email-scan-interval must be positive")
	}
	return nil
}

// startNotifier starts the email notifier when SMTP is configured; links
// in emails start with baseURL.
func (n *node) startNotifier(baseURL string) error {
	o := n.opts
	if o.SMTPHost == "" {
		notify.RegisterMetrics(n.reg) // at 0
		n.log.Info("email notifications off (no --smtp-host)")
		return nil
	}
	if o.PublicURL == "" {
		n.log.Warn("email links use the --listen address; set --public-url to the address people open Parley at")
	}
	var err error
	n.notifier, err = notify.New(notify.Config{
		Store: n.notifyStore(),
		SMTP: notify.SMTP{Host: o.SMTPHost, Port: o.SMTPPort, Username: o.SMTPUser, Password: o.SMTPPassword,
			From: o.SMTPFrom, TLS: o.SMTPTLS},
		BaseURL:      baseURL,
		Secret:       []byte(o.EmailSecret),
		NodeID:       o.NodeID,
		Online:       n.onlineUsers,
		ScanInterval: o.EmailScan,
		Logger:       n.log,
		Registerer:   n.reg,
	})
	if err != nil {
		return fmt.Errorf("email: %w", err)
	}
	n.notifier.Start()
	n.log.Info("email notifications on", "smtp", o.SMTPHost, "tls", o.SMTPTLS)
	return nil
}

// onlineUsers are those of ids who are online anywhere in the cluster:
// presence asks the other nodes about users with no session here
// (presence.Tracker.OnlineUsers), so a user active on another node gets
// no email.
func (n *node) onlineUsers(ctx context.Context, ids []string) []string {
	if n.presence == nil {
		return nil
	}
	return n.presence.OnlineUsers(ctx, ids)
}
