//go:build race

package gateway

// raceEnabled: the race detector slows every goroutine several times over;
// timing bounds that tests assert are widened under it.
const raceEnabled = true
