package main

import "parley/querycache"

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
