// Package tenantdir is Parley's tenant directory (ARCHITECTURE §9, after
// Atlassian's Tenant Context Service): which shard and region hold a
// workspace, in what status, with which limits and feature overrides.
//
// It is built as CQRS. The Catalogue (catalogue.go) is the write side and
// the only truth: a control database (SQLite by default, PostgreSQL in
// production) holding shards and workspace placements; every change is
// appended, in the same transaction, to a change log (the outbox). The
// Relay (relay.go) publishes that log to durable JetStream streams, one
// per Audience, stripping what an audience may not see (the edge audience
// — gateway and query roles — never sees a database credential). A
// Projection (projection.go) is a read model rebuilt from its stream; a
// Replica serves it over NATS request-reply, one per region. The Client
// (client.go) is the directory in every node: a long-lived local cache
// (otter) that races every region's replicas, keeps entries for an hour,
// is updated over the bus within moments of a change, and serves
// last-known-good when no replica answers. Chaos (chaos.go) holds the
// switches that break it on purpose.
//
// The package must not know about the chat store's tables or HTTP request
// paths: store routing (choosing a shard's pool per request) is built on
// Client.Lookup by the store, not here.
package tenantdir

import (
	"regexp"
	"time"

	"parley"
)

// Status is where a workspace is in its life on a shard.
type Status string

// Workspace statuses. Moving: its data is being copied to TargetShard
// while it keeps serving from ShardID. ReadOnly: writes are refused
// (the brief switch window of a move, or maintenance).
const (
	StatusActive   Status = "active"
	StatusMoving   Status = "moving"
	StatusReadOnly Status = "read_only"
)

// ShardState says whether new workspaces may be placed on a shard.
type ShardState string

// Shard states. A draining shard keeps its workspaces but gets no new
// ones.
const (
	ShardActive   ShardState = "active"
	ShardDraining ShardState = "draining"
)

// Audience is a kind of consumer of the directory; each sees its own
// projection.
type Audience string

// Audiences. API: the api role, which opens the shards' databases and so
// gets their DSNs. Edge: the gateway and query roles, which never see a
// credential.
const (
	AudienceAPI  Audience = "api"
	AudienceEdge Audience = "edge"
)

// Audiences lists every audience, in publishing order.
var Audiences = []Audience{AudienceAPI, AudienceEdge}

// Shard is one database that holds workspaces.
type Shard struct {
	ID     string `json:"id"`
	Region string `json:"region"`
	// DSN opens the shard's database; only the catalogue and the API
	// audience hold it. Empty for the default shard of a single node:
	// the node's own database.
	DSN string `json:"dsn,omitempty"`
	// Capacity is how many workspaces the shard is meant to hold; its
	// load is count/capacity, and a full shard gets no new workspace.
	Capacity int        `json:"capacity"`
	State    ShardState `json:"state"`
	// Workspaces is how many workspaces are on it or moving to it
	// (filled by ListShards only).
	Workspaces int `json:"workspaces"`
	// Version is the change-log sequence of the change that made this
	// state.
	Version   int64     `json:"version"`
	ChangedAt time.Time `json:"changed_at"`
}

// Record is a workspace's entry in the directory: what a lookup returns.
type Record struct {
	WorkspaceID string `json:"workspace_id"`
	ShardID     string `json:"shard_id"`
	Region      string `json:"region"`
	Status      Status `json:"status"`
	// TargetShard is the shard a moving (or read-only, mid-move) workspace
	// is going to; empty otherwise.
	TargetShard string           `json:"target_shard,omitempty"`
	Limits      map[string]int64 `json:"limits,omitempty"`
	Features    map[string]bool  `json:"features,omitempty"`
	// DSN and TargetDSN open the shard's (and the target's) database: set
	// for the API audience only.
	DSN       string `json:"dsn,omitempty"`
	TargetDSN string `json:"target_dsn,omitempty"`
	// Version is the change-log sequence of the change that made this
	// record; a newer version always wins.
	Version   int64     `json:"version"`
	ChangedAt time.Time `json:"changed_at"`
	// Removed marks a tombstone: the workspace's placement was removed
	// (Catalogue.Unplace). It travels the change log and the streams so
	// that projections and clients drop the entry (and an older record
	// delivered late cannot bring it back); lookups never return one.
	Removed bool `json:"removed,omitempty"`
}

// ForAudience is the record as aud may see it.
func (r Record) ForAudience(aud Audience) Record {
	if aud != AudienceAPI {
		r.DSN, r.TargetDSN = "", ""
	}
	return r
}

// ForAudience is the shard as aud may see it.
func (s Shard) ForAudience(aud Audience) Shard {
	if aud != AudienceAPI {
		s.DSN = ""
	}
	return s
}

// idPattern is what a shard, workspace or region id may be: it becomes a
// token of a NATS subject.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// checkID refuses an id that is not a subject-safe token.
func checkID(kind, id string) error {
	if !idPattern.MatchString(id) {
		return parley.Errorf(parley.EINVALID, "%s %q: use 1 to 64 letters, digits, '-' or '_'", kind, id)
	}
	return nil
}
