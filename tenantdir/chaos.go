package tenantdir

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"parley"
)

// Chaos holds the directory's failure switches (Atlassian's: drop a
// region, delay ingestion, add latency), read by replicas, projections and
// clients that are given it. The zero value breaks nothing; every method
// is safe for concurrent use and cheap when nothing is switched on.
type Chaos struct {
	mu  sync.Mutex
	off map[string]bool // regions whose replicas do not answer; guarded by mu

	anyOff         atomic.Bool
	ingestDelay    atomic.Int64  // ns
	lookupLatency  atomic.Int64  // ns
	lookupFraction atomic.Uint64 // float64 bits
}

// ChaosState is the switches' JSON form (the admin endpoint).
type ChaosState struct {
	// RegionsOff: replicas of these regions drop every request unanswered,
	// as a region that is down or cut off does.
	RegionsOff []string `json:"regions_off"`
	// IngestDelayMS: a projection applies a change no sooner than this
	// long after it entered the stream.
	IngestDelayMS int64 `json:"ingest_delay_ms"`
	// LookupLatencyMS is added to LookupLatencyFraction (0 to 1) of a
	// client's lookups, picked at random.
	LookupLatencyMS       int64   `json:"lookup_latency_ms"`
	LookupLatencyFraction float64 `json:"lookup_latency_fraction"`
}

// SetRegionOff turns a region's replicas off (true) or on.
func (c *Chaos) SetRegionOff(region string, off bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off == nil {
		c.off = map[string]bool{}
	}
	if off {
		c.off[region] = true
	} else {
		delete(c.off, region)
	}
	c.anyOff.Store(len(c.off) > 0)
}

// RegionOff reports whether region's replicas are off.
func (c *Chaos) RegionOff(region string) bool {
	if c == nil || !c.anyOff.Load() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.off[region]
}

// SetIngestDelay delays every projection's ingestion by d (0: off).
func (c *Chaos) SetIngestDelay(d time.Duration) { c.ingestDelay.Store(int64(d)) }

// IngestDelay is the current ingestion delay.
func (c *Chaos) IngestDelay() time.Duration {
	if c == nil {
		return 0
	}
	return time.Duration(c.ingestDelay.Load())
}

// SetLookupLatency adds d to the given fraction (0 to 1) of lookups.
func (c *Chaos) SetLookupLatency(d time.Duration, fraction float64) {
	c.lookupFraction.Store(math.Float64bits(max(0, min(1, fraction))))
	c.lookupLatency.Store(int64(d))
}

// lookupDelay is the latency to add to this lookup: 0 for most.
func (c *Chaos) lookupDelay() time.Duration {
	if c == nil {
		return 0
	}
	d := c.lookupLatency.Load()
	if d == 0 {
		return 0
	}
	if rand.Float64() >= math.Float64frombits(c.lookupFraction.Load()) {
		return 0
	}
	return time.Duration(d)
}

// State returns the switches.
func (c *Chaos) State() ChaosState {
	c.mu.Lock()
	regions := make([]string, 0, len(c.off))
	for r := range c.off {
		regions = append(regions, r)
	}
	c.mu.Unlock()
	sort.Strings(regions)
	return ChaosState{RegionsOff: regions, IngestDelayMS: c.IngestDelay().Milliseconds(),
		LookupLatencyMS:       time.Duration(c.lookupLatency.Load()).Milliseconds(),
		LookupLatencyFraction: math.Float64frombits(c.lookupFraction.Load())}
}

// Set replaces every switch with s.
func (c *Chaos) Set(s ChaosState) error {
	if s.IngestDelayMS < 0 || s.LookupLatencyMS < 0 || s.IngestDelayMS > 600_000 || s.LookupLatencyMS > 600_000 {
		return parley.Errorf(parley.EINVALID, "delays must be 0 to 600000 ms")
	}
	if s.LookupLatencyFraction < 0 || s.LookupLatencyFraction > 1 {
		return parley.Errorf(parley.EINVALID, "lookup_latency_fraction must be 0 to 1")
	}
	for _, r := range s.RegionsOff {
		if err := checkID("region", r); err != nil {
			return err
		}
	}
	c.mu.Lock()
	c.off = map[string]bool{}
	for _, r := range s.RegionsOff {
		c.off[r] = true
	}
	c.anyOff.Store(len(c.off) > 0)
	c.mu.Unlock()
	c.SetIngestDelay(time.Duration(s.IngestDelayMS) * time.Millisecond)
	c.SetLookupLatency(time.Duration(s.LookupLatencyMS)*time.Millisecond, s.LookupLatencyFraction)
	return nil
}

// Handler serves the switches for the admin listener: GET returns them,
// PUT replaces them all with the JSON body (ChaosState).
func (c *Chaos) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
		case http.MethodPut:
			var s ChaosState
			dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&s); err != nil {
				writeError(w, http.StatusBadRequest, parley.EINVALID, "body: "+err.Error())
				return
			}
			if err := c.Set(s); err != nil {
				writeError(w, http.StatusBadRequest, parley.ErrorCode(err), parley.ErrorMessage(err))
				return
			}
		default:
			w.Header().Set("Allow", "GET, PUT")
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "GET or PUT")
			return
		}
		writeJSON(w, http.StatusOK, c.State())
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeError writes the API's error shape: {"error": {"code", "message"}}.
func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]map[string]string{"error": {"code": code, "message": message}})
}
