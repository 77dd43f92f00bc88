package main

import (
	"fmt"
	"time"

	"parley"
	"parley/gateway"
	"parley/presence"
	"parley/tenantdir"
)

// gatewayPath is where the WebSocket gateway is served on the API listener.
const gatewayPath = "/api/v1/gateway"

// openGateway starts the presence tracker (which the store then asks who
// @here reaches) and the WebSocket gateway, which
// rootHandler mounts on the API listener. The gateway attaches the users
// that message events reference (just-in-time users), resolved by the
// query cache from memory.
func (n *node) openGateway() error {
	var err error
	n.presence, err = presence.New(presence.Config{
		Bus: n.bus, NodeID: n.opts.NodeID, Logger: n.log, Registerer: n.reg, Membership: n.members,
	})
	if err != nil {
		return fmt.Errorf("start presence: %w", err)
	}
	// @here reaches the members the tracker says are active (sqlstore/here.go).
	n.store.SetPresence(n.presence)
	if n.router != nil {
		n.router.SetPresence(n.presence)
	}
	n.gateway, err = gateway.New(gateway.Config{
		Store:      n.chat,
		Bus:        n.bus,
		Presence:   n.presence,
		Users:      n.cache,
		NodeID:     n.opts.NodeID,
		Logger:     n.log,
		Registerer: n.reg,
		Live:       n.config,
		Hot:        n.hot,

		AllowedOrigins:          n.opts.Origins,
		TrustedProxies:          n.opts.proxies,
		IdentifyRatePerIP:       gateway.Rate{PerMinute: n.opts.IdentifyPerMin, Burst: identifyBurst(n.opts.IdentifyPerMin)},
		InboundRate:             gateway.Rate{PerMinute: n.opts.WSFrameRate, Burst: n.opts.WSFrameBurst},
		MaxConcurrentIdentifies: n.opts.MaxIdentifies,
		IdentifyQueue:           n.opts.IdentifyQueue,
		IdentifyQueueWait:       n.opts.IdentifyQueueWait,
		FillConcurrency:         n.opts.FillConcurrency,
		DrainHandover:           drainHandover(n.opts.DrainHandover),
		LiveNodes:               n.liveNodes,
		WorkspaceLimits:         n.dir.workspaceLimits(),
	})
	if err != nil {
		return fmt.Errorf("start gateway: %w", err)
	}
	n.dir.onChange(func(rec tenantdir.Record) {
		// A workspace that turned integrations off: its bots' sessions on
		// this node close, as their API calls are refused.
		if !rec.Removed && !(parley.WorkspaceLimits{Features: rec.Features}).Enabled(parley.FeatureIntegrations) {
			n.gateway.CloseBots(rec.WorkspaceID)
		}
	})
	return nil
}

// drainHandover is --drain-handover as the gateway takes it (0 there is
// its default; here it is off).
func drainHandover(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// liveNodes lists the ids of the cluster's live nodes, this one included.
func (n *node) liveNodes() []string {
	if n.members == nil {
		return []string{n.opts.NodeID}
	}
	live := n.members.Live()
	ids := make([]string, len(live))
	for i, m := range live {
		ids[i] = m.ID
	}
	return ids
}

// identifyBurst is the burst that goes with --identify-rate: half a minute's
// worth, or the gateway's default (0) when no rate is set.
func identifyBurst(perMinute float64) int {
	if perMinute <= 0 {
		return 0
	}
	return max(1, int(perMinute/2))
}
