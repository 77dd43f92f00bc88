package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"parley"
	"parley/internal/testpg"
	"parley/natsbus"
	"parley/querycache"
	"parley/sqlstore"
)

// newCachedEnv is newEnvOn with the query cache wired in, as cmd/parley
// runs it: the store publishes to an embedded bus and the cache follows the
// directory topics on it.
func newCachedEnv(tb testing.TB, d sqlstore.Dialect, adjust ...func(*Config)) *env {
	tb.Helper()
	bus, err := natsbus.Start(natsbus.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatalf("start bus: %v", err)
	}
	tb.Cleanup(func() { bus.Close() })
	clk := newClock()
	cfg := sqlstore.Config{Now: clk.Now, Logger: quietLogger(), Publisher: bus}
	if d == sqlstore.Postgres {
		cfg.PostgresURL = testpg.New(tb)
	} else {
		cfg.Path = filepath.Join(tb.TempDir(), "parley.db")
	}
	st, err := sqlstore.Open(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("open %s store: %v", d, err)
	}
	tb.Cleanup(func() { st.Close() })
	cache := querycache.New(querycache.Config{Store: st, Bus: bus, Logger: quietLogger()})
	tb.Cleanup(cache.Close)
	return newEnvWithStore(tb, st, clk, append([]func(*Config){func(c *Config) { c.Directory = cache }}, adjust...)...)
}

// TestAuthzMatrixCached runs the whole authorization matrix with the query
// cache serving its routes.
func TestAuthzMatrixCached(t *testing.T) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			e := newCachedEnv(t, d, func(c *Config) {
				c.Rates = parley.LiveRatesOff()
				c.NotifySecret = authzNotifySecret
			})
			runMatrix(t, e, d)
		})
	}
}

// TestDirectoryCached: the directory served by the cache keeps the store's
// paging, search and visibility.
func TestDirectoryCached(t *testing.T) {
	e := newCachedEnv(t, sqlstore.SQLite)
	_, owner, members, outsider := checkDirectory(t, e)

	// /users/batch from the cache: the same visibility as the store's.
	var out struct{ Users []parley.User }
	e.must(http.StatusOK, "POST", "/users/batch", owner.Token, map[string][]string{"ids": {members[1].ID, outsider.ID, "Unosuch"}}, &out)
	if len(out.Users) != 1 || out.Users[0].ID != members[1].ID || out.Users[0].Email != "" {
		t.Fatalf("batch: %+v, want only members[1] without email", out.Users)
	}
	r := e.must(http.StatusOK, "POST", "/users/batch", outsider.Token, map[string][]string{"ids": {owner.ID}}, nil)
	if string(r.Body) != "{\"users\":[]}\n" {
		t.Errorf("empty batch body %s, want users: []", r.Body)
	}
}

// TestQueryCacheEndpoints: the switcher, mention suggestions and header
// answer in their documented shapes, from the cache and from the store
// (sqlstore.Directory).
func TestQueryCacheEndpoints(t *testing.T) {
	for _, cached := range []bool{true, false} {
		name := "store"
		if cached {
			name = "cache"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			if cached {
				e = newCachedEnv(t, sqlstore.SQLite)
			}
			owner := mustAccount(t, e.store, "owner")
			ws := mustWorkspace(t, e.store, owner)
			pat := mustAccount(t, e.store, "patricia")
			paul := mustAccount(t, e.store, "paul")
			mustJoin(t, e.store, ws, owner, pat, paul)
			ch, err := e.store.CreateChannel(context.Background(), owner.ID, ws.ID, parley.NewChannel{Name: "planning", Kind: parley.KindPublic, Topic: "Q3"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.store.AddMembers(context.Background(), owner.ID, ch.ID, []string{paul.ID}); err != nil {
				t.Fatal(err)
			}

			r := e.must(http.StatusOK, "GET", "/workspaces/"+ws.ID+"/switcher?q=p&limit=5", owner.Token, nil, nil)
			var sw map[string][]map[string]any
			r.decode(t, &sw)
			if len(sw["channels"]) != 1 || sw["channels"][0]["name"] != "planning" || len(sw["users"]) != 2 {
				t.Fatalf("switcher: %s", r.Body)
			}
			r = e.must(http.StatusOK, "GET", "/workspaces/"+ws.ID+"/switcher?q=%23nothing", owner.Token, nil, nil)
			if string(r.Body) != "{\"channels\":[],\"users\":[]}\n" {
				t.Errorf("empty switcher body %s", r.Body)
			}

			r = e.must(http.StatusOK, "GET", "/channels/"+ch.ID+"/mention-suggestions?q=%40pa", owner.Token, nil, nil)
			var ms struct {
				Users []map[string]any `json:"users"`
			}
			r.decode(t, &ms)
			if len(ms.Users) != 2 || ms.Users[0]["id"] != paul.ID || ms.Users[0]["in_channel"] != true ||
				ms.Users[1]["id"] != pat.ID || ms.Users[1]["in_channel"] != false || ms.Users[0]["handle"] == nil {
				t.Fatalf("mention suggestions: %s", r.Body)
			}

			var h parley.ChannelHeader
			e.must(http.StatusOK, "GET", "/channels/"+ch.ID+"/header", pat.Token, nil, &h)
			if h.Channel.ID != ch.ID || h.MemberCount != 2 || h.Topic != "Q3" || len(h.MembersPreview) != 2 || h.Channel.IsMember {
				t.Fatalf("header: %+v", h)
			}
			raw := e.must(http.StatusOK, "GET", "/channels/"+ch.ID+"/header", pat.Token, nil, nil)
			var fields map[string]json.RawMessage
			raw.decode(t, &fields)
			for _, f := range []string{"channel", "member_count", "topic", "purpose", "members_preview"} {
				if _, ok := fields[f]; !ok {
					t.Errorf("header has no %q: %s", f, raw.Body)
				}
			}
			e.must(http.StatusBadRequest, "GET", "/workspaces/"+ws.ID+"/switcher?limit=x", owner.Token, nil, nil)
			if !strings.Contains(string(e.must(http.StatusNotFound, "GET", "/channels/Cnosuch/header", owner.Token, nil, nil).Body), "not_found") {
				t.Error("unknown channel header is not a not_found error")
			}
		})
	}
}
