// Package edge is what the HTTP API and the gateway share at the door of a
// public deployment: which address a request comes from (ClientIP, with
// the trusted-proxy rule) and a token bucket per key (Limiter).
//
// Both doors must key their per-IP limits on the same address, or a client
// could pick its own key at one of them; so neither reads X-Forwarded-For
// itself. This package knows nothing about routes, users or frames.
package edge

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Proxies is the set of address ranges whose X-Forwarded-For entries are
// believed (--trusted-proxies). The zero value trusts nobody: the client is
// the connection's peer and the headers are ignored.
type Proxies struct {
	ranges []netip.Prefix
}

// ParseProxies reads a list of CIDR ranges or single addresses
// ("10.0.0.0/8", "127.0.0.1", "::1").
func ParseProxies(list []string) (Proxies, error) {
	var p Proxies
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if pre, err := netip.ParsePrefix(s); err == nil {
			p.ranges = append(p.ranges, pre.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return Proxies{}, fmt.Errorf("trusted proxy %q: want a CIDR range or an address", s)
		}
		a = a.Unmap()
		p.ranges = append(p.ranges, netip.PrefixFrom(a, a.BitLen()))
	}
	return p, nil
}

// MustProxies is ParseProxies for tests and constants.
func MustProxies(list ...string) Proxies {
	p, err := ParseProxies(list)
	if err != nil {
		panic(err)
	}
	return p
}

// Empty reports whether no proxy is trusted.
func (p Proxies) Empty() bool { return len(p.ranges) == 0 }

// String lists the ranges, comma-separated.
func (p Proxies) String() string {
	s := make([]string, len(p.ranges))
	for i, r := range p.ranges {
		s[i] = r.String()
	}
	return strings.Join(s, ",")
}

func (p Proxies) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, r := range p.ranges {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

// ClientIP is the address per-IP limits key on. Each proxy appends the
// address it got the request from to X-Forwarded-For, so the chain read
// from the right, with the connection's peer last, is a list of hops that
// are true as long as each hop is a trusted proxy: the client is the
// right-most address that is not in a trusted range. Everything to its
// left was written by the client and is ignored. Without trusted proxies,
// or when the peer is not one, the peer is the client.
func (p Proxies) ClientIP(r *http.Request) string {
	peer, ok := peerAddr(r.RemoteAddr)
	if !ok {
		return r.RemoteAddr // not an IP (a test transport, a unix socket)
	}
	if !p.trusted(peer) {
		return peer.String()
	}
	client := peer
	lines := r.Header.Values("X-Forwarded-For")
	for i := len(lines) - 1; i >= 0; i-- {
		hops := strings.Split(lines[i], ",")
		for j := len(hops) - 1; j >= 0; j-- {
			a, ok := parseHop(hops[j])
			if !ok {
				// A trusted proxy wrote no such thing: stop at the last
				// hop we could believe.
				return client.String()
			}
			client = a
			if !p.trusted(a) {
				return a.String()
			}
		}
	}
	return client.String() // every hop was a trusted proxy
}

// FromTrustedProxy reports whether the request's peer is a trusted proxy,
// whose X-Forwarded-Proto may then be believed.
func (p Proxies) FromTrustedProxy(r *http.Request) bool {
	peer, ok := peerAddr(r.RemoteAddr)
	return ok && p.trusted(peer)
}

func peerAddr(remote string) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// parseHop reads one X-Forwarded-For entry: an address, possibly with a
// port ("1.2.3.4:5", "[::1]:5") as some proxies write it.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	return netip.Addr{}, false
}

// IPKey is the limiter key of a client address: IPv4 addresses as they
// are, IPv6 addresses by their /64, since one subscriber usually holds a
// whole /64 and could otherwise take a fresh key for every request.
func IPKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Is6() || a.Is4In6() {
		return ip
	}
	p, _ := a.Prefix(64)
	return p.String()
}
