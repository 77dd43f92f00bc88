package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	"parley"
	"parley/auditlog"
	"parley/internal/testpg"
	"parley/sqlstore"
)

// BenchmarkBotPost: a bot token posts messages over HTTP (8 clients at
// once) to the API on SQLite and PostgreSQL, with its audit entry written
// by each request ("sync", the old way) or queued to the batched writer
// ("queued", package auditlog). Reports posts/s; the audit log is checked
// to hold every post afterwards.
func BenchmarkBotPost(b *testing.B) {
	for _, d := range dialects {
		for _, mode := range []string{"sync", "queued"} {
			b.Run(string(d)+"/"+mode, func(b *testing.B) { benchBotPost(b, d, mode == "queued") })
		}
	}
}

func benchBotPost(b *testing.B, d sqlstore.Dialect, queued bool) {
	cfg := sqlstore.Config{Logger: quietLogger()}
	if d == sqlstore.Postgres {
		cfg.PostgresURL = testpg.New(b)
	} else {
		cfg.Path = filepath.Join(b.TempDir(), "parley.db")
	}
	st, err := sqlstore.Open(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	var w *auditlog.Writer
	e := newEnvWithStore(b, st, newClock(), func(c *Config) {
		c.Rates = parley.LiveRatesOff()
		if queued {
			w = auditlog.New(auditlog.Config{Store: st, Logger: quietLogger()})
			c.Audit = w
		}
	})
	admin := mustAccount(b, st, "admin")
	ws := mustWorkspace(b, st, admin)
	ch := mustChannel(b, st, ws, admin, parley.KindPublic)
	ctx := context.Background()
	bot, err := st.CreateBot(ctx, admin.ID, ws.ID, parley.NewBot{Name: "CI", Handle: "ci-" + uniq()})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.AddMembers(ctx, admin.ID, ch.ID, []string{bot.User.ID}); err != nil {
		b.Fatal(err)
	}
	var tok parley.BotToken
	e.must(201, "POST", "/workspaces/"+ws.ID+"/bots/"+bot.User.ID+"/tokens", admin.Token,
		map[string]any{"label": "ci", "scopes": []string{"chat:write"}}, &tok)
	url := e.srv.URL + Prefix + "/channels/" + ch.ID + "/messages"
	var n, failed atomic.Int64
	b.SetParallelism(4) // 4 × GOMAXPROCS clients
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body, _ := json.Marshal(map[string]string{"text": "build passed", "client_msg_id": fmt.Sprintf("c%d", n.Add(1))})
			req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tok.Token)
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil || res.StatusCode != 201 {
				failed.Add(1)
			}
			if res != nil {
				res.Body.Close()
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "posts/s")
	if failed.Load() > 0 {
		b.Fatalf("%d posts failed", failed.Load())
	}
	if w != nil {
		if err := w.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
	total := 0
	cursor := ""
	for {
		p, err := st.BotAudit(ctx, admin.ID, ws.ID, bot.User.ID, cursor, 200)
		if err != nil {
			b.Fatal(err)
		}
		total += len(p.Entries)
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if total != b.N { // every post audited
		b.Fatalf("%d audit entries for %d posts", total, b.N)
	}
}
