package liveconfig

import "parley"

// JoinPatch holds the join-limiter and slow-mode keys of a change
// (docs/join-limits.md).
type JoinPatch struct {
	JoinLimitEnabled       *bool `json:"join_limit_enabled,omitempty"`
	JoinLimitDryRun        *bool `json:"join_limit_dry_run,omitempty"`
	JoinRateChannelNode    *int  `json:"join_rate_channel_node,omitempty"`
	JoinRateChannelCluster *int  `json:"join_rate_channel_cluster,omitempty"`
	JoinBurst              *int  `json:"join_burst,omitempty"`
	SlowModeEnabled        *bool `json:"slow_mode_enabled,omitempty"`
	SlowModeDryRun         *bool `json:"slow_mode_dry_run,omitempty"`
}

// apply sets c's join and slow-mode keys that p gives.
func (p JoinPatch) apply(c *parley.LiveConfig) error {
	setBool(p.JoinLimitEnabled, &c.JoinLimitEnabled)
	setBool(p.JoinLimitDryRun, &c.JoinLimitDryRun)
	setBool(p.SlowModeEnabled, &c.SlowModeEnabled)
	setBool(p.SlowModeDryRun, &c.SlowModeDryRun)
	return setInts([]intKey{
		{"join_rate_channel_node", p.JoinRateChannelNode, &c.JoinRateChannelNode, 0, parley.MaxJoinRate},
		{"join_rate_channel_cluster", p.JoinRateChannelCluster, &c.JoinRateChannelCluster, 0, parley.MaxJoinRate},
		{"join_burst", p.JoinBurst, &c.JoinBurst, 1, parley.MaxJoinBurst},
	})
}
