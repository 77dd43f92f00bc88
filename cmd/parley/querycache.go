package main

import (
	"parley"
	"parley/gateway"
	"parley/querycache"
)

// Every node runs the query cache: it is the directory queries of the HTTP
// API (httpapi.Config.Directory) and the gateway's just-in-time users
// directory. sqlstore.Directory is the other implementation, for tests and
// tools.
var (
	_ parley.DirectoryQueries = (*querycache.Cache)(nil)
	_ gateway.UserDirectory   = (parley.DirectoryQueries)(nil)
)

// startQueryCache starts this node's query cache (the Flannel role: the
// directory, /users/batch, the switcher, mention suggestions and channel
// headers answered from memory, kept fresh by the directory events on the
// bus). It is built before the HTTP API, which serves from it, and closed
// before the bus (stopQueryCache).
func (n *node) startQueryCache() *querycache.Cache {
	n.cache = querycache.New(querycache.Config{
		Store:      n.store,
		Bus:        n.bus,
		Logger:     n.log,
		Registerer: n.reg,
	})
	return n.cache
}

// stopQueryCache unsubscribes the cache from the bus.
func (n *node) stopQueryCache() {
	if n.cache != nil {
		n.cache.Close()
	}
}
