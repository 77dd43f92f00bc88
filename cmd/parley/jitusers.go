package main

import "parley/gateway"

// userDirectory is where the gateway resolves the users it attaches to
// events (just-in-time users): this node's query cache, which answers by id
// and by handle from memory. startQueryCache runs before startGateway.
func (n *node) userDirectory() gateway.UserDirectory {
	return n.cache
}
