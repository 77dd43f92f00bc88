package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Workspace affinity: the URLs this node announces, the ring over the live
// gateway nodes, and the ws_url that boot hands out for a workspace.

// announcedURLs returns the API and WebSocket URLs this node announces to
// the others (and that boot hands to clients): from --public-url when set,
// else from the bound API listener (an unspecified IP becomes 127.0.0.1,
// reachable only from this host).
func announcedURLs(publicURL string, bound net.Addr) (apiURL, wsURL string) {
	if publicURL == "" {
		base := displayAddr(bound)
		return "http://" + base + "/", "ws://" + base + gatewayPath
	}
	u, _ := url.Parse(publicURL) // checked by validatePublicURL
	prefix := strings.TrimRight(u.Path, "/")
	ws := "ws"
	if u.Scheme == "https" {
		ws = "wss"
	}
	return u.Scheme + "://" + u.Host + prefix + "/", ws + "://" + u.Host + prefix + gatewayPath
}

// validatePublicURL checks --public-url: http or https, a host, an optional
// path prefix (a reverse proxy's), nothing else.
func validatePublicURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("--public-url: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("--public-url must start with http:// or https://")
	case u.Host == "" || u.User != nil:
		return errors.New("--public-url needs a host (and no user info): http[s]://host[:port][/prefix]")
	case u.RawQuery != "" || u.Fragment != "":
		return errors.New("--public-url must not have a query or a fragment")
	}
	return nil
}

// warnLoopbackAnnounce warns when a clustered node announces a loopback
// ws_url, which the other nodes' clients cannot reach.
func (n *node) warnLoopbackAnnounce() {
	if n.opts.PublicURL == "" && (n.opts.NATS != "" || n.opts.NATSCluster != "") {
		if ip := net.ParseIP(hostOf(n.members.Self().WSURL)); ip != nil && ip.IsLoopback() {
			n.log.Warn("this node announces a loopback ws_url to a cluster: set --public-url so that clients of the other nodes can reach it",
				"ws_url", n.members.Self().WSURL)
		}
	}
}

func hostOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// wsURLFor is the ws_url boot returns for a workspace (httpapi.Config.WSURL):
// the gateway node the ring picks for it, so that the workspace's sessions
// (and its query cache) gather there; this node's own when the ring picks
// it, is empty, or is not running yet. This node's own is its --public-url
// one; without --public-url it is "", which makes boot answer with the
// host the client reached this node by (more likely reachable than the
// bound address).
func (n *node) wsURLFor(workspaceID string) string {
	if n.affinity != nil {
		if nd, ok := n.affinity.Lookup(workspaceID); ok && nd.WSURL != "" && nd.ID != n.opts.NodeID {
			return nd.WSURL
		}
	}
	if n.opts.PublicURL != "" && n.members != nil {
		return n.members.Self().WSURL
	}
	return ""
}
