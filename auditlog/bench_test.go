package auditlog_test

import (
	"context"
	"path/filepath"
	"testing"

	"parley"
	"parley/auditlog"
	"parley/internal/testpg"
	"parley/sqlstore"
	"parley/storetest"
)

// BenchmarkAuditWrite: the database work of the bot audit log alone, 8
// writers at once: "sync" is what each bot request did before (look the
// bot's workspace up, then one transaction for its entry), "queued" is
// Record into the batched writer, flushed by Close inside the timed part.
// Reports entries/s.
func BenchmarkAuditWrite(b *testing.B) {
	for _, d := range []string{"sqlite", "postgres"} {
		for _, mode := range []string{"sync", "queued"} {
			b.Run(d+"/"+mode, func(b *testing.B) {
				cfg := sqlstore.Config{Logger: quiet, Path: filepath.Join(b.TempDir(), "p.db")}
				if d == "postgres" {
					cfg = sqlstore.Config{Logger: quiet, PostgresURL: testpg.New(b)}
				}
				st, err := sqlstore.Open(context.Background(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				owner := storetest.MustUser(b, st, "owner")
				ws := storetest.MustWorkspace(b, st, owner)
				bot, err := st.CreateBot(context.Background(), owner.ID, ws.ID, parley.NewBot{Name: "CI", Handle: "ci-bot"})
				if err != nil {
					b.Fatal(err)
				}
				e := parley.AuditEntry{BotID: bot.User.ID, Action: "POST /channels/{id}/messages", Target: "/api/v1/channels/C1/messages", Status: 201}
				var w *auditlog.Writer
				if mode == "queued" {
					w = auditlog.New(auditlog.Config{Store: st, Logger: quiet})
				}
				b.SetParallelism(4) // 8 writers on 2 CPUs
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					ctx := context.Background()
					for pb.Next() {
						if w != nil {
							w.Record(ctx, e)
							continue
						}
						wsID, err := st.BotWorkspace(ctx, e.BotID)
						if err == nil {
							err = st.Audit(ctx, wsID, e)
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
				if w != nil {
					if err := w.Close(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
			})
		}
	}
}
