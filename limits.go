package parley

import (
	"context"
	"slices"
	"strings"
)

// Caps bounds how much of each kind a store keeps, so that no client can
// grow one object without end: a message with thousands of reactions is
// shipped whole on every read and every reaction event. A store enforces
// each cap inside the transaction of the write that would pass it, so
// concurrent writes cannot overshoot; the refusal is ELIMIT (409). The zero
// value of every field means its default.
type Caps struct {
	// ReactionsPerMessage bounds the distinct emoji on one message (default
	// 50). More people may still add an emoji already there.
	ReactionsPerMessage int
	// PinsPerChannel bounds the pinned messages of one channel (default 100).
	PinsPerChannel int
	// PrivateChannelMembers bounds the members of one private channel
	// (default 1,000). Public channels are unbounded (#general holds
	// everyone); group DMs have their own fixed bound, MaxGroupDMOthers.
	PrivateChannelMembers int
	// ChannelsPerWorkspace bounds the active (not archived) public and
	// private channels of one workspace (default 20,000, room for the seed
	// tool's 10,000 and more). DMs do not count.
	ChannelsPerWorkspace int
	// InvitesPerWorkspace bounds the outstanding invites of one workspace:
	// those neither expired nor used up (default 1,000).
	InvitesPerWorkspace int
	// WorkspaceMembers bounds the people of one workspace (bots not
	// counted); 0, the default, is no bound. Only a workspace's override
	// (LimitMembers) sets it.
	WorkspaceMembers int
}

// Default caps.
const (
	DefaultReactionsPerMessage   = 50
	DefaultPinsPerChannel        = 100
	DefaultPrivateChannelMembers = 1000
	DefaultChannelsPerWorkspace  = 20000
	DefaultInvitesPerWorkspace   = 1000
)

// WithDefaults returns c with every zero or negative field set to its
// default.
func (c Caps) WithDefaults() Caps {
	or := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	or(&c.ReactionsPerMessage, DefaultReactionsPerMessage)
	or(&c.PinsPerChannel, DefaultPinsPerChannel)
	or(&c.PrivateChannelMembers, DefaultPrivateChannelMembers)
	or(&c.ChannelsPerWorkspace, DefaultChannelsPerWorkspace)
	or(&c.InvitesPerWorkspace, DefaultInvitesPerWorkspace)
	return c
}

// Workspace overrides (the tenant directory's per-workspace limits and
// features, docs/directory.md "Limits and features"). The catalogue refuses
// any key not listed here, so an operator's typo cannot pass as a setting
// that silently does nothing.
const (
	// LimitMembers bounds a workspace's people (bots not counted): an
	// invite accept or an import past it is refused with ELIMIT. No
	// default: unbounded unless overridden.
	LimitMembers = "members"
	// LimitChannels overrides Caps.ChannelsPerWorkspace.
	LimitChannels = "channels"
	// LimitInvites overrides Caps.InvitesPerWorkspace.
	LimitInvites = "invites"
	// LimitFileStorageBytes overrides the workspace's file quota
	// (FileQuota.WorkspaceMaxBytes, the live file_workspace_quota_mb):
	// an upload past it is refused with ETOOLARGE.
	LimitFileStorageBytes = "file_storage_bytes"

	// FeatureIntegrations turns bots, incoming webhooks, slash commands
	// and outgoing webhooks on or off (default on). Off: creating them is
	// refused with EFEATUREOFF, and so is posting through an incoming
	// webhook.
	FeatureIntegrations = "integrations"
	// FeatureFileUploads turns file uploads on or off (default on).
	FeatureFileUploads = "file_uploads"
)

// LimitKeys and FeatureKeys are the override keys the catalogue accepts,
// sorted.
var (
	LimitKeys   = []string{LimitChannels, LimitFileStorageBytes, LimitInvites, LimitMembers}
	FeatureKeys = []string{FeatureFileUploads, FeatureIntegrations}
)

// MaxLimitOverride bounds a count override's value: a count no workspace
// reaches, well inside every column's range. MaxStorageOverride bounds
// file_storage_bytes (1 PiB).
const (
	MaxLimitOverride   = 1_000_000_000
	MaxStorageOverride = 1 << 50
)

// maxOverride is the largest value key may take.
func maxOverride(key string) int64 {
	if key == LimitFileStorageBytes {
		return MaxStorageOverride
	}
	return MaxLimitOverride
}

// ValidateOverrides refuses an unknown limit or feature key and a limit
// outside 1..MaxLimitOverride (MaxStorageOverride for file_storage_bytes) (a limit of 0 would lock a workspace out of
// what it already has; to go back to the default, remove the key).
func ValidateOverrides(limits map[string]int64, features map[string]bool) error {
	for k, v := range limits {
		if !slices.Contains(LimitKeys, k) {
			return Errorf(EINVALID, "unknown limit %q (known: %s)", k, strings.Join(LimitKeys, ", "))
		}
		if v < 1 || v > maxOverride(k) {
			return Errorf(EINVALID, "limit %s must be between 1 and %d", k, maxOverride(k))
		}
	}
	for k := range features {
		if !slices.Contains(FeatureKeys, k) {
			return Errorf(EINVALID, "unknown feature %q (known: %s)", k, strings.Join(FeatureKeys, ", "))
		}
	}
	return nil
}

// WorkspaceLimits are one workspace's overrides, as the directory has
// them. The zero value overrides nothing.
type WorkspaceLimits struct {
	Limits   map[string]int64
	Features map[string]bool
}

// Apply returns c with the overridden caps replaced; c should already have
// its defaults.
func (w WorkspaceLimits) Apply(c Caps) Caps {
	set := func(dst *int, key string) {
		if v, ok := w.Limits[key]; ok && v > 0 {
			*dst = int(min(v, MaxLimitOverride))
		}
	}
	set(&c.WorkspaceMembers, LimitMembers)
	set(&c.ChannelsPerWorkspace, LimitChannels)
	set(&c.InvitesPerWorkspace, LimitInvites)
	return c
}

// Quota returns q with the workspace's file storage override applied.
func (w WorkspaceLimits) Quota(q FileQuota) FileQuota {
	if v, ok := w.Limits[LimitFileStorageBytes]; ok && v > 0 {
		q.WorkspaceMaxBytes = min(v, MaxStorageOverride)
	}
	return q
}

// Enabled says whether a feature is on: every feature is unless the
// workspace's overrides turn it off.
func (w WorkspaceLimits) Enabled(feature string) bool {
	on, ok := w.Features[feature]
	return !ok || on
}

// CheckFeature returns EFEATUREOFF when the feature is off.
func (w WorkspaceLimits) CheckFeature(feature string) error {
	if !w.Enabled(feature) {
		return Errorf(EFEATUREOFF, "the feature %q is turned off for this workspace", feature)
	}
	return nil
}

// Effective returns the values boot reports: every limit key with the cap
// in force (members only when set) and every feature key with whether it
// is on. file_storage_bytes is there when overridden (the server's quota
// is in the live configuration, not in Caps).
func (w WorkspaceLimits) Effective(base Caps) (map[string]int64, map[string]bool) {
	c := w.Apply(base.WithDefaults())
	lim := map[string]int64{
		LimitChannels: int64(c.ChannelsPerWorkspace),
		LimitInvites:  int64(c.InvitesPerWorkspace),
	}
	if c.WorkspaceMembers > 0 {
		lim[LimitMembers] = int64(c.WorkspaceMembers)
	}
	if v, ok := w.Limits[LimitFileStorageBytes]; ok {
		lim[LimitFileStorageBytes] = v
	}
	fea := make(map[string]bool, len(FeatureKeys))
	for _, k := range FeatureKeys {
		fea[k] = w.Enabled(k)
	}
	return lim, fea
}

// LimitsLookup returns a workspace's overrides. It must not fail: on an
// error it answers the zero WorkspaceLimits (the global defaults).
type LimitsLookup func(ctx context.Context, workspaceID string) WorkspaceLimits

type limitsKey struct{}

// WithLimitsLookup returns ctx carrying lookup: a store resolves the caps
// of the workspace a write is about through it, before the write's
// transaction, so that the workspace's overrides are enforced inside the
// transaction as exactly as the global caps are.
func WithLimitsLookup(ctx context.Context, lookup LimitsLookup) context.Context {
	return context.WithValue(ctx, limitsKey{}, lookup)
}

// LimitsFor returns the overrides of a workspace through ctx's lookup;
// none without one.
func LimitsFor(ctx context.Context, workspaceID string) WorkspaceLimits {
	if f, ok := ctx.Value(limitsKey{}).(LimitsLookup); ok && f != nil && workspaceID != "" {
		return f(ctx, workspaceID)
	}
	return WorkspaceLimits{}
}
