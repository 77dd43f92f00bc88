package shardstore

import (
	"github.com/prometheus/client_golang/prometheus"

	"parley/internal/promutil"
)

// The router's own series (docs/metrics.md#store-routing). Each shard's
// calls are also counted by its guard, under database="<shard id>".
type metrics struct {
	routed           *prometheus.CounterVec // shard, via
	idMisses         *prometheus.CounterVec // kind
	idUnknown        *prometheus.CounterVec // kind
	readOnly         prometheus.Counter
	partial          *prometheus.CounterVec // op
	opens            *prometheus.CounterVec // shard, result
	retired          *prometheus.CounterVec // shard, result
	userCopies       *prometheus.CounterVec // shard
	userSyncFailures *prometheus.CounterVec // shard
	userRepairs      *prometheus.CounterVec // shard
	created          *prometheus.CounterVec // shard
	undos            *prometheus.CounterVec // shard, result
	slugFrees        *prometheus.CounterVec // result
	purgedUnplaces   *prometheus.CounterVec // shard, result
	botSyncs         *prometheus.CounterVec // op, result
}

func newMetrics(reg prometheus.Registerer) *metrics {
	return &metrics{
		routed: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_shardstore_routed_total", Help: "Workspace resolutions by shard and how: directory (its record) or fallback (not in the directory: the default shard)."},
			[]string{"shard", "via"})),
		idMisses: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_shardstore_id_misses_total", Help: "Channel and message ids not in the id -> workspace cache: every shard was asked."},
			[]string{"kind"})),
		idUnknown: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_shardstore_id_negative_hits_total", Help: "Ids answered not found from the negative cache (every shard lacked them a moment ago), without asking the shards."},
			[]string{"kind"})),
		readOnly: promutil.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_shardstore_read_only_refusals_total", Help: "Writes refused with 503 because their workspace was read-only."})),
		partial: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_shardstore_partial_total", Help: "Calls across workspaces answered without a shard that failed, by operation."},
			[]string{"op"})),
		opens: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_shardstore_shard_opens_total", Help: "Openings of a shard's store, by shard and result (ok, error)."},
			[]string{"shard", "result"})),
		retired: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_shardstore_shard_stores_retired_total", Help: "Shard stores closed after the shard's DSN changed, by shard and result: drained (their calls had returned) or bound (closed with calls still running, after the bound or at shutdown)."},
			[]string{"shard", "result"})),
		userCopies: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_shardstore_user_copies_total", Help: "User rows copied from the control database to a shard."},
			[]string{"shard"})),
		userSyncFailures: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_shardstore_user_sync_failures_total", Help: "Profile, status or deactivation changes not made on a shard holding the user's copy."},
			[]string{"shard"})),
		userRepairs: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_shardstore_user_repairs_total", Help: "Stale user copies brought up to date from the control database after a failed change."},
			[]string{"shard"})),
		created: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_shardstore_workspaces_created_total", Help: "Workspaces created through the router, by the shard placed on."},
			[]string{"shard"})),
		undos: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_shardstore_placement_undos_total", Help: "Placements of workspaces whose creation failed, by shard and result: ok (removed from the directory), kept (the shard has the workspace, or the entry changed since), retry (an attempt failed; retried), gave_up (left in the directory)."},
			[]string{"shard", "result"})),
		slugFrees: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_shardstore_slug_frees_total", Help: "Catalogue slug reservations of deleted workspaces given up, by result: ok, retry (the control database failed; retried), gave_up (left reserved)."},
			[]string{"result"})),
		purgedUnplaces: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_shardstore_purged_unplaces_total", Help: "Directory entries of purged workspaces removed, by shard and result: ok (removed, or gone already), kept (the entry changed since), retry (the control database failed; retried), gave_up (left in the directory)."},
			[]string{"shard", "result"})),
		botSyncs: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_shardstore_bot_syncs_total", Help: "Copies of a bot's row (bot), a token's session (token) or a revocation (revoke) from a workspace's shard to the control database, by result (ok, error)."},
			[]string{"op", "result"})),
	}
}

// RegisterMetrics registers the router's series on reg without a router,
// so that every node exposes them (at 0 while store routing is off), as
// dashboards and alerts expect one set of series on every node.
func RegisterMetrics(reg prometheus.Registerer) { newMetrics(reg) }
