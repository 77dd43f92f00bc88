package tenantdir

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultStream names the directory's streams: DefaultStream + "_API" and
// DefaultStream + "_EDGE".
const DefaultStream = "PARLEY_TENANTDIR"

// NATS says where the directory's subjects and streams are: every part of
// the package (relay, projections, replicas, clients) of one directory
// uses the same values.
type NATS struct {
	Conn *nats.Conn
	// Prefix is put before every subject (the bus's SubjectPrefix, e.g.
	// "parley."); a dot is added when missing.
	Prefix string
	// Stream is the base name of the streams (default DefaultStream).
	Stream string
	// Replicas is how many servers of a JetStream cluster keep each
	// stream (default 1). A cluster spanning regions wants 3 (a quorum
	// survives one server or one minority region lost; docs/directory.md
	// "Regions"); at most 5.
	Replicas int
}

func (n NATS) check() (NATS, error) {
	if n.Conn == nil {
		return n, errors.New("tenantdir: no NATS connection")
	}
	if n.Prefix != "" && !strings.HasSuffix(n.Prefix, ".") {
		n.Prefix += "."
	}
	if n.Stream == "" {
		n.Stream = DefaultStream
	}
	if n.Replicas == 0 {
		n.Replicas = 1
	}
	if n.Replicas < 1 || n.Replicas > 5 {
		return n, fmt.Errorf("tenantdir: %d stream replicas: want 1 to 5", n.Replicas)
	}
	return n, nil
}

// The directory's subjects, all under Prefix + "tenantdir.":
//
//	changes.<audience>.shard.<id>       the audience's stream (and invalidations)
//	changes.<audience>.workspace.<id>
//	lookup.<audience>.<region>          request-reply: a region's replicas

func (n NATS) changeSubject(aud Audience, kind, key string) string {
	return n.Prefix + "tenantdir.changes." + string(aud) + "." + kind + "." + key
}

func (n NATS) changesOf(aud Audience) string {
	return n.Prefix + "tenantdir.changes." + string(aud) + ".>"
}

func (n NATS) workspaceChangesOf(aud Audience) string {
	return n.Prefix + "tenantdir.changes." + string(aud) + "." + KindWorkspace + ".*"
}

func (n NATS) lookupSubject(aud Audience, region string) string {
	return n.Prefix + "tenantdir.lookup." + string(aud) + "." + region
}

// StreamName is the name of aud's stream.
func (n NATS) StreamName(aud Audience) string {
	return n.Stream + "_" + strings.ToUpper(string(aud))
}

// streamConfig is aud's stream: file-backed, kept forever, the last few
// states of each key (a projection applies the newest version, so an old
// state replayed after a new one changes nothing), duplicates of a change
// (two relays, a retried publish) dropped by its sequence; kept by
// n.Replicas servers of a cluster.
func (n NATS) streamConfig(aud Audience) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              n.StreamName(aud),
		Description:       "Parley tenant directory changes for the " + string(aud) + " audience",
		Subjects:          []string{n.changesOf(aud)},
		Storage:           jetstream.FileStorage,
		Retention:         jetstream.LimitsPolicy,
		MaxMsgsPerSubject: 16,
		Discard:           jetstream.DiscardOld,
		Duplicates:        2 * time.Minute,
		Replicas:          n.Replicas,
	}
}

// EnsureStreams creates (or updates) every audience's stream.
func EnsureStreams(ctx context.Context, n NATS) error {
	n, err := n.check()
	if err != nil {
		return err
	}
	js, err := jetstream.New(n.Conn)
	if err != nil {
		return fmt.Errorf("tenantdir: jetstream: %w", err)
	}
	for _, aud := range Audiences {
		if _, err := js.CreateOrUpdateStream(ctx, n.streamConfig(aud)); err != nil {
			return fmt.Errorf("tenantdir: stream %s: %w", n.StreamName(aud), err)
		}
	}
	return nil
}
