package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"parley"
	"parley/auth"
	"parley/sqlstore"
	"parley/storetest"
)

func TestSeedDemo(t *testing.T) {
	ctx := context.Background()
	rec := &storetest.Recorder{}
	// The test counts the seed's publishes: the outbox relay, which
	// publishes again what was not acknowledged within its grace (a loaded
	// machine can pass 1 s), stays quiet meanwhile.
	store, err := sqlstore.Open(ctx, sqlstore.Config{Path: filepath.Join(t.TempDir(), "parley.db"), Publisher: rec,
		Relay: sqlstore.RelayConfig{Grace: 10 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	info, err := seedDemo(ctx, store, log)
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	if !info.Seeded || info.WorkspaceID == "" {
		t.Fatalf("first seed: %+v", info)
	}
	alice, hash, err := store.UserCredentials(ctx, demoOwnerEmail)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := auth.VerifyPassword(hash, demoPassword); !ok {
		t.Fatal("alice's password is not the demo password")
	}
	if alice.Title == "" {
		t.Fatal("demo users have no titles")
	}

	// The channels, from their channel.created events.
	channels := map[string]*parley.Channel{}
	for _, ev := range rec.OfType(parley.EventChannelCreated) {
		var d parley.ChannelEventData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		name := d.Channel.Name
		if d.Channel.Kind.IsDM() {
			name = string(d.Channel.Kind)
		}
		channels[name] = d.Channel
	}
	for name, kind := range map[string]parley.ChannelKind{
		"general": parley.KindPublic, "random": parley.KindPublic, "engineering": parley.KindPublic,
		"leads": parley.KindPrivate, "dm": parley.KindDM, "group_dm": parley.KindGroupDM,
	} {
		if ch := channels[name]; ch == nil || ch.Kind != kind {
			t.Fatalf("channel %s: %+v", name, ch)
		}
	}
	leads, err := store.GetChannel(ctx, alice.ID, channels["leads"].ID)
	if err != nil || leads.MemberCount != 2 {
		t.Fatalf("#leads: %+v %v", leads, err)
	}
	general, err := store.GetChannel(ctx, alice.ID, channels["general"].ID)
	if err != nil || general.MemberCount != 5 {
		t.Fatalf("#general: %+v %v", general, err)
	}
	pins, err := store.ListPins(ctx, alice.ID, general.ID)
	if err != nil || len(pins.Messages) != 1 || len(pins.Messages[0].Reactions) == 0 {
		t.Fatalf("#general pins: %+v %v", pins, err)
	}

	posts := rec.OfType(parley.EventMessageCreated)
	if len(posts) < 25 || len(posts) > 35 {
		t.Fatalf("%d demo messages, want about 30", len(posts))
	}
	var threaded bool
	for _, ev := range posts {
		var d parley.MessageEventData
		json.Unmarshal(ev.Data, &d)
		if d.Message.ThreadRootID != "" {
			threaded = true
		}
	}
	if !threaded {
		t.Fatal("the demo has no thread replies")
	}
	if len(rec.OfType(parley.EventReactionAdded)) < 3 {
		t.Fatal("the demo has too few reactions")
	}

	before := len(rec.Events())
	again, err := seedDemo(ctx, store, log)
	if err != nil {
		t.Fatalf("second seed: %v", err)
	}
	if again.Seeded || again.WorkspaceID != info.WorkspaceID {
		t.Fatalf("second seed: %+v, want the first workspace, not seeded", again)
	}
	if n := len(rec.Events()); n != before {
		t.Fatalf("second seed wrote %d events", n-before)
	}
}
