package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"parley/gateway"
	"parley/presence"
)

// gatewayPath is where the WebSocket gateway is served on the API listener.
const gatewayPath = "/api/v1/gateway"

// startGateway starts the presence tracker and the WebSocket gateway and
// mounts the gateway on the API listener (before it serves).
func (n *node) startGateway() error {
	var err error
	n.presence, err = presence.New(presence.Config{
		Bus: n.bus, NodeID: n.opts.NodeID, Logger: n.log, Registerer: n.reg, Membership: n.members,
	})
	if err != nil {
		return fmt.Errorf("start presence: %w", err)
	}
	n.gateway, err = gateway.New(gateway.Config{
		Store:      n.store,
		Bus:        n.bus,
		Presence:   n.presence,
		Users:      n.userDirectory(),
		NodeID:     n.opts.NodeID,
		Logger:     n.log,
		Registerer: n.reg,

		AllowedOrigins:    n.opts.Origins,
		IdentifyRatePerIP: gateway.Rate{PerMinute: n.opts.IdentifyPerMin, Burst: identifyBurst(n.opts.IdentifyPerMin)},
	})
	if err != nil {
		n.presence.Close()
		n.presence = nil
		return fmt.Errorf("start gateway: %w", err)
	}
	n.api.Handler = withGateway(n.api.Handler, n.gateway)
	return nil
}

// stopGateway tells every client to reconnect elsewhere and drains the
// gateway, then stops presence (which says goodbye on the bus). It runs
// before the HTTP server stops: hijacked sockets are the gateway's to close.
func (n *node) stopGateway(ctx context.Context) error {
	var errs []error
	if n.gateway != nil {
		if err := n.gateway.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("gateway shutdown: %w", err))
		}
	}
	if n.presence != nil {
		n.presence.Close()
	}
	return errors.Join(errs...)
}

// withGateway sends GET /api/v1/gateway to the gateway and everything else
// to next.
func withGateway(next http.Handler, gw http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == gatewayPath {
			gw.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// identifyBurst is the burst that goes with --identify-rate: half a minute's
// worth, or the gateway's default (0) when no rate is set.
func identifyBurst(perMinute float64) int {
	if perMinute <= 0 {
		return 0
	}
	return max(1, int(perMinute/2))
}
