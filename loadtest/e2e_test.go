package loadtest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"parley"
	"parley/auth"
	"parley/gateway"
	"parley/httpapi"
	"parley/natsbus"
	"parley/sqlstore"
)

// Every scenario, tiny, against one in-process node (store, bus, API and
// gateway), under the race detector, set up from a seed file. cmd/parley's
// test runs the binary with API setup and worker processes.

func newNode(t *testing.T) (string, parley.Store) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	bus, err := natsbus.Start(natsbus.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlstore.Open(context.Background(), sqlstore.Config{
		Path: filepath.Join(t.TempDir(), "parley.db"), Publisher: bus, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{Store: st, Bus: bus, NodeID: "n1", Logger: quiet, Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(httpapi.Config{Store: st, Directory: st.Directory(), Logger: quiet})
	mux := http.NewServeMux()
	mux.Handle("/", api.Handler())
	mux.Handle("/api/v1/gateway", gw)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gw.Shutdown(ctx)
		srv.Close()
		st.Close()
		bus.Close()
	})
	return srv.URL, st
}

// seedFileFor writes a workspace straight into the store, as `parley
// seed` does (one password hash, sessions minted directly), and returns
// the path of its JSON: signups through the API would cost an argon2
// hash each.
func seedFileFor(t *testing.T, st parley.Store, users, channels int) string {
	t.Helper()
	ctx := t.Context()
	hash, err := auth.HashPassword("loadtest-password-1")
	if err != nil {
		t.Fatal(err)
	}
	account := func(handle string) PlanUser {
		u, err := st.CreateUser(ctx, parley.NewUser{Email: handle + "@seed.test", Name: handle, Handle: handle, PasswordHash: hash})
		if err != nil {
			t.Fatal(err)
		}
		token, tokenHash, err := auth.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if err := st.CreateSession(ctx, parley.Session{TokenHash: tokenHash, UserID: u.ID, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		return PlanUser{ID: u.ID, Token: token}
	}
	slug := "s" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	owner := account(slug + "-owner")
	ws, err := st.CreateWorkspace(ctx, owner.ID, "Seeded", slug)
	if err != nil {
		t.Fatal(err)
	}
	general, err := st.ListChannels(ctx, owner.ID, ws.ID, parley.ChannelQuery{Q: "general", Limit: 1})
	if err != nil || len(general.Channels) != 1 {
		t.Fatalf("general: %v", err)
	}
	type ch struct {
		ID string `json:"id"`
	}
	chans := []ch{{general.Channels[0].ID}}
	for i := range channels {
		c, err := st.CreateChannel(ctx, owner.ID, ws.ID, parley.NewChannel{Name: "load-" + strconv.Itoa(i+1), Kind: parley.KindPublic})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch{c.ID})
	}
	inv, err := st.CreateInvite(ctx, owner.ID, ws.ID, parley.InviteParams{})
	if err != nil {
		t.Fatal(err)
	}
	var us []PlanUser
	for i := range users {
		u := account(slug + "-" + strconv.Itoa(i+1))
		if _, err := st.AcceptInvite(ctx, u.ID, inv.Code); err != nil {
			t.Fatal(err)
		}
		if channels > 0 {
			if _, err := st.AddMembers(ctx, owner.ID, chans[1+i%channels].ID, []string{u.ID}); err != nil {
				t.Fatal(err)
			}
		}
		us = append(us, u)
	}
	b, err := json.Marshal(map[string]any{"workspace_id": ws.ID, "owner": owner, "users": us, "channels": chans})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "seed.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestScenariosEndToEnd(t *testing.T) {
	url, st := newNode(t)
	for _, sc := range Scenarios {
		t.Run(sc, func(t *testing.T) {
			out := t.TempDir()
			res, err := Run(t.Context(), Config{URL: url, Scenario: sc, Seed: seedFileFor(t, st, 4, 2), Rate: 20,
				Duration: 1500 * time.Millisecond, StormAfter: 500 * time.Millisecond, CatchUp: 20 * time.Second,
				Watchers: 1, Posters: 2, Out: out, ServerPID: os.Getpid(), // the node runs in this process
				Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Pass || res.Lost != 0 || res.Duplicated != 0 || res.OutOfOrder != 0 || res.Connected != 4 {
				t.Fatalf("%+v", res)
			}
			if res.Deliveries == 0 || res.Checked == 0 || res.Posts == 0 {
				t.Fatalf("nothing happened: %d deliveries, %d streams, %d actions", res.Deliveries, res.Checked, res.Posts)
			}
			for _, k := range []string{"load_generator_cores", "load_server_cores", "drain_generator_cores", "drain_server_cores"} {
				if v, ok := res.Extra[k]; !ok || v < 0 {
					t.Errorf("extra %s = %v, %v", k, v, ok)
				}
			}
			// Every paced part of the scenario ran open-loop and says what
			// it was asked and what it achieved.
			want := map[string]float64{"connect": 200, "post": 20}
			switch sc {
			case ScenarioJoinSpike:
				want = map[string]float64{"connect": 200, "join": 20}
			case ScenarioSteady:
				want = map[string]float64{"connect": 200, "action": 20}
			}
			for _, o := range res.Offered {
				if o.Asked != want[o.Name] || o.Achieved <= 0 || o.Late < 0 {
					t.Errorf("offered %+v, want asked %v", o, want[o.Name])
				}
				delete(want, o.Name)
			}
			if len(want) != 0 {
				t.Errorf("no offered load for %v: %+v", want, res.Offered)
			}
			switch sc {
			case ScenarioReconnectStorm:
				if res.Client.Resumes+res.Client.InvalidSessions < 4 {
					t.Errorf("storm: %+v", res.Client)
				}
			case ScenarioJoinSpike:
				if res.Latency["join_api"].Count != 3 || res.Latency["join_delivery"].Count == 0 {
					t.Errorf("joins: %+v", res.Latency)
				}
			case ScenarioSteady:
				if res.Latency["delivery"].Count == 0 {
					t.Errorf("steady: %+v", res.Latency)
				}
			}
			for _, f := range []string{"result.json", "report.html"} {
				if _, err := os.Stat(filepath.Join(out, f)); err != nil {
					t.Error(err)
				}
			}
		})
	}
}
