package tenantdir

import (
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
)

// ReplicaConfig configures a Replica.
type ReplicaConfig struct {
	NATS       NATS
	Projection *Projection
	// Region whose replica this is: it answers requests to that region.
	Region string
	// Chaos, when set, can turn the region off (ChaosState.RegionsOff).
	Chaos  *Chaos
	Logger *slog.Logger
}

// Replica serves a projection to clients over NATS request-reply, on the
// lookup subject of its audience and region (queue group: one replica of
// the region answers each request).
type Replica struct {
	sub    *nats.Subscription
	p      *Projection
	region string
	chaos  *Chaos
	log    *slog.Logger
}

// lookupReply is a replica's answer: a record, or an error code
// ("not_found": the directory has no such workspace; "unavailable": the
// replica is still replaying).
type lookupReply struct {
	Record *Record `json:"record,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// StartReplica subscribes the replica.
func StartReplica(cfg ReplicaConfig) (*Replica, error) {
	n, err := cfg.NATS.check()
	if err != nil {
		return nil, err
	}
	if err := checkID("region", cfg.Region); err != nil {
		return nil, err
	}
	r := &Replica{p: cfg.Projection, region: cfg.Region, chaos: cfg.Chaos, log: cfg.Logger}
	if r.log == nil {
		r.log = slog.Default()
	}
	subj := n.lookupSubject(cfg.Projection.Audience(), cfg.Region)
	if r.sub, err = n.Conn.QueueSubscribe(subj, "tenantdir", r.answer); err != nil {
		return nil, fmt.Errorf("tenantdir: replica %s: %w", subj, err)
	}
	return r, nil
}

// Stop unsubscribes.
func (r *Replica) Stop() error { return r.sub.Unsubscribe() }

func (r *Replica) answer(m *nats.Msg) {
	defer func() {
		if v := recover(); v != nil {
			r.log.Error("tenant directory replica: panic answering", "panic", v)
		}
	}()
	if r.chaos.RegionOff(r.region) {
		return // a region that is down answers nothing
	}
	var rep lookupReply
	select {
	case <-r.p.Ready():
		if rec, ok := r.p.Workspace(string(m.Data)); ok {
			rep.Record = &rec
		} else {
			rep.Error = "not_found"
		}
	default:
		rep.Error = "unavailable"
	}
	data, err := json.Marshal(rep)
	if err != nil {
		r.log.Error("tenant directory replica: encode", "err", err)
		return
	}
	if err := m.Respond(data); err != nil {
		r.log.Warn("tenant directory replica: respond", "err", err)
	}
}
