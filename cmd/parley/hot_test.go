package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"parley"
	pclient "parley/client"
	"parley/liveconfig"
)

// A node finds a channel hot (GET /hot lists it) and answers its /events
// from the recent-events buffer, exactly as the store would.
func TestHotChannelAndRecentBuffer(t *testing.T) {
	n := startInProcess(t)
	ctx := t.Context()
	api := "http://" + n.apiLn.Addr().String()
	admin := "http://" + n.adminLn.Addr().String()
	on, off, window := 2, 0, 1
	if _, err := n.config.Update(ctx, liveconfig.Patch{HotPatch: liveconfig.HotPatch{HotOnRate: &on, HotOffRate: &off,
		HotWindowSeconds: &window}}, false); err != nil {
		t.Fatal(err)
	}
	c := pclient.New(api)
	if _, err := c.Login(ctx, demoOwnerEmail, demoPassword); err != nil {
		t.Fatal(err)
	}
	me, err := c.Me(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.CreateChannel(ctx, n.demo.WorkspaceID, parley.NewChannel{Name: "concert", Kind: parley.KindPublic})
	if err != nil {
		t.Fatal(err)
	}
	post := func() int64 {
		m, err := c.PostMessage(ctx, ch.ID, parley.NewMessage{Text: "encore"})
		if err != nil {
			t.Fatal(err)
		}
		n.hot.Observe(ch.ID, m.Seq) // the gateway's part
		return m.Seq
	}
	var last int64
	for range 10 {
		last = post()
	}
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(scrape(t, admin+"/hot"), ch.ID) {
		if time.Now().After(deadline) {
			t.Fatalf("GET /hot never listed the channel: %s", scrape(t, admin+"/hot"))
		}
		last = post()
		time.Sleep(20 * time.Millisecond)
	}
	var listing struct {
		Channels []struct {
			ChannelID string  `json:"channel_id"`
			Rate      float64 `json:"rate"`
			Source    string  `json:"source"`
		} `json:"channels"`
	}
	if err := json.Unmarshal([]byte(scrape(t, admin+"/hot")), &listing); err != nil || len(listing.Channels) != 1 ||
		listing.Channels[0].Source != "local" || listing.Channels[0].Rate < 2 {
		t.Fatalf("GET /hot: %+v %v", listing, err)
	}
	// Once the buffer holds the newest event, /events after it answers
	// from memory, the same page as the store's.
	for {
		last = post()
		p, err := c.ListEvents(ctx, ch.ID, last-5, 100)
		if err != nil {
			t.Fatal(err)
		}
		want, err := n.store.ListEvents(ctx, me.ID, ch.ID, last-5, 100)
		if err != nil {
			t.Fatal(err)
		}
		// The buffer may not have heard the newest event yet: its page can
		// be shorter, never different.
		if len(p.Events) > len(want.Events) {
			t.Fatalf("page of %d events, the store's has %d", len(p.Events), len(want.Events))
		}
		for i := range p.Events {
			want.Events[i].WorkspaceID = "" // the API's log entries leave it out
			g, _ := json.Marshal(p.Events[i])
			w, _ := json.Marshal(want.Events[i])
			if string(g) != string(w) {
				t.Fatalf("event %d:\n got %s\nwant %s", i, g, w)
			}
		}
		if strings.Contains(scrape(t, admin+"/metrics"), `parley_recent_reads_total{op="events",result="hit"}`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no /events was answered from the buffer")
		}
	}
	res, err := http.Post(admin+"/hot", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /hot: %d, want 405", res.StatusCode)
	}
}
