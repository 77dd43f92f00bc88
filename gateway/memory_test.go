package gateway

import (
	"os"
	"runtime"
	"strconv"
	"testing"
)

// TestIdleSessionMemory measures the heap and stacks per idle identified
// session: PARLEY_MEASURE_SESSIONS=N go test -run IdleSessionMemory -v
// ./gateway. Each session is a different user (its own user-topic
// subscription) in one workspace; the clients are raw sockets in the same
// process (a few hundred bytes each, included).
func TestIdleSessionMemory(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PARLEY_MEASURE_SESSIONS"))
	if n <= 0 {
		t.Skip("set PARLEY_MEASURE_SESSIONS to measure")
	}
	e := newEnv(t, func(c *Config) { c.IdentifyRatePerIP = Rate{PerMinute: -1}; c.MaxConcurrentIdentifies = 1 << 20 })
	owner := e.user("owner")
	ws := e.workspace(owner)
	users := make([]*tuser, n)
	for i := range users {
		users[i] = e.user("u")
		e.workspaceJoin(ws, owner, users[i])
	}
	conns := make([]*rawClient, 0, n)
	before, beforeStack := memInUse()
	for i, u := range users {
		r := e.rawDial(t)
		r.br = nil
		r.send(t, map[string]any{"op": "identify", "token": u.token, "workspace_id": ws.ID})
		conns = append(conns, r)
		if i%100 == 99 {
			waitUntil(t, "identified", func() bool { return e.gw.registry.len() == i+1 })
		}
	}
	waitUntil(t, "identified", func() bool { return e.gw.registry.len() == n })
	after, afterStack := memInUse()
	t.Logf("%d idle sessions: %.0f bytes per session (heap %.0f + stacks %.0f; server and raw client), %d goroutines",
		n, float64(after+afterStack-before-beforeStack)/float64(n), float64(after-before)/float64(n),
		float64(afterStack-beforeStack)/float64(n), runtime.NumGoroutine())
	runtime.KeepAlive(conns)
}

func memInUse() (heap, stack uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse, m.StackInuse
}
