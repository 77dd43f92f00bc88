package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"parley"
	"parley/gateway"
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

	// The gateway's door and inbound limits (docs/security.md, "Gateway").
	WSFrameRate       float64       // --ws-frame-rate: frames per minute per connection; 0: default, negative: off
	WSFrameBurst      int           // --ws-frame-burst
	MaxIdentifies     int           // --max-identifies: identifies and resumes in progress
	IdentifyQueue     int           // --identify-queue: identifies waiting for a slot; negative: no queue
	IdentifyQueueWait time.Duration // --identify-queue-wait
	FillConcurrency   int           // --fill-concurrency: catch-up reads of channel logs at once
	DrainHandover     time.Duration // --drain-handover: how long a draining node answers handovers

	Caps parley.Caps // --cap-*: the store's caps; 0: the default

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
			"rate_"+strings.ReplaceAll(f.name[len("rate-"):], "-", "_")+" overrides it")
	}

	fs.Float64Var(&o.WSFrameRate, "ws-frame-rate", 0, "frames per minute one WebSocket connection may send, every op counted, plus two heartbeats per heartbeat interval; over it: reconnect{rate_limited} and close 4008 (default 1200; negative: no limit)")
	fs.IntVar(&o.WSFrameBurst, "ws-frame-burst", 0, "burst of --ws-frame-rate (default 200)")
	fs.IntVar(&o.MaxIdentifies, "max-identifies", 0, "identifies and resumes in progress on this node before others wait in the admission queue (default 64)")
	fs.IntVar(&o.IdentifyQueue, "identify-queue", 0, "identifies and resumes that may wait for an admission slot (default 512; negative: none, fail fast)")
	fs.IntVar(&o.FillConcurrency, "fill-concurrency", 0, "store reads this node runs at once to bring sessions that fell behind a channel back up to its stream; sessions behind the same channel share one read (default 8)")
	fs.DurationVar(&o.DrainHandover, "drain-handover", gateway.DefaultDrainHandover, "after a shutdown signal has sent every gateway client away, how long this node goes on handing their sessions over to the nodes they reconnect to, counted again from each session taken, at most six times it (while another node is live and it still holds sessions); 0: not at all")
	fs.DurationVar(&o.IdentifyQueueWait, "identify-queue-wait", 0, "longest an identify or resume waits for an admission slot (default 1s; negative: no queue)")

	c := &o.Caps
	fs.IntVar(&c.ReactionsPerMessage, "cap-reactions-per-message", 0, fmt.Sprintf("distinct emoji on one message (default %d)", parley.DefaultReactionsPerMessage))
	fs.IntVar(&c.PinsPerChannel, "cap-pins-per-channel", 0, fmt.Sprintf("pinned messages in one channel (default %d)", parley.DefaultPinsPerChannel))
	fs.IntVar(&c.PrivateChannelMembers, "cap-private-channel-members", 0, fmt.Sprintf("members of one private channel (default %d)", parley.DefaultPrivateChannelMembers))
	fs.IntVar(&c.ChannelsPerWorkspace, "cap-channels-per-workspace", 0, fmt.Sprintf("active public and private channels in one workspace (default %d)", parley.DefaultChannelsPerWorkspace))
	fs.IntVar(&c.InvitesPerWorkspace, "cap-invites-per-workspace", 0, fmt.Sprintf("outstanding invites of one workspace (default %d)", parley.DefaultInvitesPerWorkspace))
}

// validateLimits parses the trusted proxies.
func (o *limitOptions) validateLimits() error {
	p, err := edge.ParseProxies(o.TrustedProxies)
	if err != nil {
		return fmt.Errorf("--trusted-proxies: %w", err)
	}
	o.proxies = p
	for _, c := range []struct {
		flag string
		v    int
	}{
		{"cap-reactions-per-message", o.Caps.ReactionsPerMessage},
		{"cap-pins-per-channel", o.Caps.PinsPerChannel},
		{"cap-private-channel-members", o.Caps.PrivateChannelMembers},
		{"cap-channels-per-workspace", o.Caps.ChannelsPerWorkspace},
		{"cap-invites-per-workspace", o.Caps.InvitesPerWorkspace},
		{"ws-frame-burst", o.WSFrameBurst},
		{"max-identifies", o.MaxIdentifies},
		{"fill-concurrency", o.FillConcurrency},
	} {
		if c.v < 0 {
			return fmt.Errorf("--%s must not be negative (0 is the default)", c.flag)
		}
	}
	return nil
}
