package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"parley"
	"parley/httpapi"
	"parley/internal/edge"
)

// The flags of a public deployment's limits (docs/security.md): the
// trusted reverse proxies, and this node's default for every API rate
// limit, which the live configuration's rate_* settings override.

// limitOptions are the settings of those flags.
type limitOptions struct {
	TrustedProxies []string         // --trusted-proxies, CIDR ranges or addresses
	Rates          parley.LiveRates // --rate-*; each starts at httpapi.DefaultRates

	proxies edge.Proxies // parsed from TrustedProxies by validateLimits
}

// rateFlag is a parley.Rate as a flag, in its text form.
type rateFlag struct{ r *parley.Rate }

func (f rateFlag) String() string { return f.r.String() }
func (f rateFlag) Type() string   { return "rate" }
func (f rateFlag) Set(s string) error {
	r, err := parley.ParseRate(s)
	if err != nil {
		return err
	}
	if r.IsDefault() {
		return fmt.Errorf(`%q: give a rate or "off"`, s)
	}
	*f.r = r
	return nil
}

func (o *limitOptions) registerLimits(fs *pflag.FlagSet) {
	fs.StringSliceVar(&o.TrustedProxies, "trusted-proxies", nil, "comma-separated CIDR ranges or addresses of the reverse proxies in front of this node; only their X-Forwarded-For and X-Forwarded-Proto are believed, and the client is the right-most address not in these ranges (default: none, headers ignored)")
	o.Rates = httpapi.DefaultRates
	r := &o.Rates
	for _, f := range []struct {
		name string
		rate *parley.Rate
		what string
	}{
		{"rate-message-user", &r.MessageUser, "messages posted per user"},
		{"rate-message-ip", &r.MessageIP, "messages posted per client IP"},
		{"rate-write-user", &r.WriteUser, "edits, deletes, reactions, pins, read markers and other small writes per user"},
		{"rate-write-ip", &r.WriteIP, "small writes per client IP"},
		{"rate-create-user", &r.CreateUser, "workspaces, channels, DMs, invites and invite acceptances per user"},
		{"rate-create-ip", &r.CreateIP, "creations per client IP"},
		{"rate-search-user", &r.SearchUser, "searches per user"},
		{"rate-search-ip", &r.SearchIP, "searches per client IP"},
		{"rate-login-account-ip", &r.LoginAccountIP, "login attempts per account and client IP (and per known device)"},
		{"rate-login-account", &r.LoginAccount, "login attempts per account from devices it does not know"},
		{"rate-login-ip", &r.LoginIP, "login attempts per client IP"},
		{"rate-signup-ip", &r.SignupIP, "signups per client IP"},
	} {
		fs.Var(rateFlag{f.rate}, f.name, f.what+` ("N/min", "N/min,burst=B" or "off"); the live setting `+
			"rate_"+underscore(f.name[len("rate-"):])+" overrides it")
	}
}

func underscore(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '-' {
			b[i] = '_'
		}
	}
	return string(b)
}

// validateLimits parses the trusted proxies.
func (o *limitOptions) validateLimits() error {
	p, err := edge.ParseProxies(o.TrustedProxies)
	if err != nil {
		return fmt.Errorf("--trusted-proxies: %w", err)
	}
	o.proxies = p
	return nil
}
