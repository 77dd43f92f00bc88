package transfer_test

import (
	"context"
	"os"
	"strconv"
	"testing"

	"parley/transfer"
	"parley/transfer/transfertest"
)

// BenchmarkImport imports a generated Slack export of
// PARLEY_IMPORT_MESSAGES messages (default 10,000) into a fresh store per
// iteration and reports messages per second (docs/benchmarks.md "Import"):
//
//	PARLEY_IMPORT_MESSAGES=100000 go test ./transfer -run '^$' -bench Import -benchtime 1x
func BenchmarkImport(b *testing.B) {
	n := 10_000
	if v := os.Getenv("PARLEY_IMPORT_MESSAGES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	ex := transfertest.Generate(transfertest.Config{Seed: 9, Messages: n, Days: 365, Users: 200, NoEdge: true})
	for _, name := range []string{"SQLite", "Postgres"} {
		open := stores()[name]
		b.Run(name, func(b *testing.B) {
			msgs := 0
			for range b.N {
				b.StopTimer()
				e := newEnv(b, open)
				src := readSlack(b, ex)
				b.StartTimer()
				sum, err := transfer.Import(context.Background(), e.s, src, transfer.Options{OwnerID: e.owner.ID, Slug: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				msgs += sum.Messages
			}
			b.ReportMetric(float64(msgs)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
