package main

import (
	"strconv"
	"strings"
	"testing"

	"parley/internal/mailtest"
)

// TestEmailOptions: email is off by default, and --smtp-host needs a From
// address, a secret of 16 characters and a known TLS mode.
func TestEmailOptions(t *testing.T) {
	o, err := parse(t, nil, nil)
	if err != nil || o.SMTPHost != "" || o.SMTPTLS != "starttls" || o.EmailScan <= 0 {
		t.Fatalf("defaults: %+v %v", o.emailOptions, err)
	}
	ok := map[string]string{"PARLEY_SMTP_HOST": "smtp.example.com", "PARLEY_SMTP_FROM": "Parley <p@example.com>",
		"PARLEY_EMAIL_SECRET": "0123456789abcdef"}
	if o, err = parse(t, nil, ok); err != nil || o.SMTPHost != "smtp.example.com" {
		t.Fatalf("valid: %+v %v", o.emailOptions, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--smtp-from", ""}, "--smtp-from"},
		{[]string{"--email-secret", "short"}, "--email-secret"},
		{[]string{"--smtp-tls", "ssl"}, "--smtp-tls"},
		{[]string{"--smtp-port", "70000"}, "--smtp-port"},
		{[]string{"--email-scan-interval", "0s"}, "--email-scan-interval"},
	} {
		if _, err := parse(t, c.args, ok); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want one naming %s", c.args, err, c.want)
		}
	}
}

// TestServeEmail: a node with SMTP settings starts its notifier and tells
// clients email is on; one without says it is off and needs no mail server.
func TestServeEmail(t *testing.T) {
	mail := mailtest.Start(t)
	p := startParley(t, "--listen", "127.0.0.1:0", "--admin", "off", "--data", t.TempDir(), "--demo",
		"--smtp-host", mail.SMTPHost, "--smtp-port", strconv.Itoa(mail.SMTPPort), "--smtp-tls", "none",
		"--smtp-from", "Parley <parley@example.com>", "--email-secret", "0123456789abcdef0123")
	p.waitLog(t, "email notifications on")
	c, _ := readDemo(t, p)
	var prefs struct {
		Mode         string `json:"mode"`
		EmailEnabled bool   `json:"email_enabled"`
	}
	c.do("GET", "/me/notifications", nil, 200, &prefs)
	if prefs.Mode != "on" || !prefs.EmailEnabled {
		t.Fatalf("with SMTP: %+v", prefs)
	}
	p.stop(t)

	p = startParley(t, "--listen", "127.0.0.1:0", "--admin", "off", "--data", t.TempDir(), "--demo")
	p.waitLog(t, "email notifications off")
	c, _ = readDemo(t, p)
	c.do("GET", "/me/notifications", nil, 200, &prefs)
	if prefs.EmailEnabled {
		t.Fatalf("without SMTP: %+v", prefs)
	}
}
