package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"parley"
	"parley/internal/testpg"
	"parley/sqlstore"
	"parley/storetest"
)

// Search benchmark; docs/benchmarks.md ("Search") has the command and the
// results. A workspace of searchChannels channels (public, private, DMs)
// and a second workspace holding a fifth of the messages get N messages
// (PARLEY_SEARCH_BENCH_N, default 1,000,000) bulk-inserted straight into
// the messages table, so that the search index is built by the same
// triggers (SQLite) and generated column (PostgreSQL) as in production.
// Words follow a Zipf law over a made-up vocabulary: the commonest word is
// in most messages, the rarest in a handful. A member of the first
// workspace then searches, one query at a time, by kind: rare words (about
// 18 matches each), common words (the ten commonest), two common words,
// prefixes (the last word as typed, 4 letters) and three phrases (in 1%,
// 0.1% and 0.01% of the messages); p50 and p99 per kind are reported as
// metrics.

const (
	searchVocab         = 30_000
	searchPublic        = 200
	searchPrivate       = 40 // the searcher is in searchPrivateJoined of them
	searchPrivateJoined = 10
	searchDMs           = 20 // the searcher is in half of them
	searchOtherChannels = 20 // in the other workspace
	searchBatchRows     = 500
	searchTxRows        = 50_000
)

func searchBenchN(b *testing.B) int {
	n := 1_000_000
	if v := os.Getenv("PARLEY_SEARCH_BENCH_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("PARLEY_SEARCH_BENCH_N=%q: want a positive count", v)
		}
	}
	return n
}

// searchWord returns the made-up word of rank i (0 is the commonest):
// syllables, so that prefixes behave like those of real words, and never
// one of the phrase words below.
func searchWord(i int) string {
	syl := []string{"ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qu", "bi", "do", "fe", "gu", "ho", "ja", "wu", "xi", "yo"}
	var b strings.Builder
	i++
	for i > 0 {
		b.WriteString(syl[i%len(syl)])
		i /= len(syl)
	}
	return b.String()
}

// Phrases injected into a share of messages, from words outside the
// vocabulary.
var searchPhrases = []struct {
	kind  string
	text  string
	every int // one message in every
}{
	{"phrase-1%", "deploy failed", 100},
	{"phrase-0.1%", "out of memory", 1_000},
	{"phrase-0.01%", "certificate expired yesterday", 10_000},
}

type searchBench struct {
	st       parley.Store
	searcher *parley.User
	ws       *parley.Workspace
}

// setupSearchBench builds the workspaces through the store and returns the
// channels messages go to: the first workspace's, then the other's.
func setupSearchBench(b testing.TB, st parley.Store) (*searchBench, []*parley.Channel, []*parley.Channel) {
	b.Helper()
	ctx := context.Background()
	owner := storetest.MustUser(b, st, "owner")
	searcher := storetest.MustUser(b, st, "searcher")
	ws := storetest.MustWorkspace(b, st, owner)
	storetest.MustJoinWorkspace(b, st, ws, owner, searcher)
	var mine []*parley.Channel
	for i := range searchPublic {
		mine = append(mine, storetest.MustChannel(b, st, ws, owner, fmt.Sprintf("pub-%d", i), parley.KindPublic))
	}
	for i := range searchPrivate {
		ch := storetest.MustChannel(b, st, ws, owner, fmt.Sprintf("priv-%d", i), parley.KindPrivate)
		if i < searchPrivateJoined {
			if _, err := st.AddMembers(ctx, owner.ID, ch.ID, []string{searcher.ID}); err != nil {
				b.Fatal(err)
			}
		}
		mine = append(mine, ch)
	}
	for i := range searchDMs {
		peer := storetest.MustUser(b, st, "peer")
		storetest.MustJoinWorkspace(b, st, ws, owner, peer)
		with := []string{peer.ID}
		actor := owner.ID
		if i%2 == 0 {
			actor = searcher.ID
		}
		ch, _, err := st.OpenDM(ctx, actor, ws.ID, with)
		if err != nil {
			b.Fatal(err)
		}
		mine = append(mine, ch)
	}
	otherOwner := storetest.MustUser(b, st, "other")
	other := storetest.MustWorkspace(b, st, otherOwner)
	var theirs []*parley.Channel
	for i := range searchOtherChannels {
		theirs = append(theirs, storetest.MustChannel(b, st, other, otherOwner, fmt.Sprintf("o-%d", i), parley.KindPublic))
	}
	return &searchBench{st: st, searcher: searcher, ws: ws}, mine, theirs
}

// seedSearch inserts n messages through db, oldest first, in transactions
// of searchTxRows rows and statements of searchBatchRows rows. SQLite
// takes ? placeholders (it resolves $n by name, slowly in long statements).
func seedSearch(b testing.TB, db *sql.DB, pg bool, n int, mine, theirs []*parley.Channel) {
	b.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rng, 1.1, 1, searchVocab-1)
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	const cols = 7
	seqs := map[string]int64{}
	var (
		tx   *sql.Tx
		args []any
		err  error
	)
	flush := func() {
		if len(args) == 0 {
			return
		}
		var q strings.Builder
		q.WriteString(`INSERT INTO messages (workspace_id, id, channel_id, seq, user_id, text, created_at) VALUES `)
		for r := 0; r < len(args)/cols; r++ {
			if r > 0 {
				q.WriteByte(',')
			}
			q.WriteByte('(')
			for c := 0; c < cols; c++ {
				if c > 0 {
					q.WriteByte(',')
				}
				if pg {
					fmt.Fprintf(&q, "$%d", r*cols+c+1)
				} else {
					q.WriteByte('?')
				}
			}
			q.WriteByte(')')
		}
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			b.Fatalf("seed: %v", err)
		}
		args = args[:0]
	}
	var text strings.Builder
	for i := 0; i < n; i++ {
		if i%searchTxRows == 0 {
			if tx != nil {
				flush()
				if err := tx.Commit(); err != nil {
					b.Fatalf("seed: %v", err)
				}
			}
			if tx, err = db.BeginTx(ctx, nil); err != nil {
				b.Fatalf("seed: %v", err)
			}
		}
		var ch *parley.Channel
		if i%5 == 4 {
			ch = theirs[rng.IntN(len(theirs))]
		} else {
			ch = mine[rng.IntN(len(mine))]
		}
		seqs[ch.ID]++
		text.Reset()
		words := 4 + rng.IntN(21)
		for w := 0; w < words; w++ {
			if w > 0 {
				text.WriteByte(' ')
			}
			text.WriteString(searchWord(int(zipf.Uint64())))
		}
		for _, p := range searchPhrases {
			if rng.IntN(p.every) == 0 {
				text.WriteString(" " + p.text)
			}
		}
		args = append(args, ch.WorkspaceID, parley.NewID(parley.PrefixMessage), ch.ID, seqs[ch.ID],
			ch.CreatedBy, text.String(), base+int64(i)*1000)
		if len(args) == searchBatchRows*cols {
			flush()
		}
	}
	flush()
	if err := tx.Commit(); err != nil {
		b.Fatalf("seed: %v", err)
	}
	// Channels' last_seq follow their messages, as posting would leave them.
	for id, seq := range seqs {
		q := `UPDATE channels SET last_seq = ? WHERE id = ?`
		if pg {
			q = `UPDATE channels SET last_seq = $1 WHERE id = $2`
		}
		if _, err := db.ExecContext(ctx, q, seq, id); err != nil {
			b.Fatalf("seed: %v", err)
		}
	}
}

// searchQueries returns the benchmark's queries by kind.
func searchQueries() [][2]string {
	var qs [][2]string
	for i := range 20 {
		qs = append(qs, [2]string{"rare", searchWord(20_000+i*401) + " "})
		qs = append(qs, [2]string{"common", searchWord(i%10) + " "})
		qs = append(qs, [2]string{"two-common", searchWord(i%5) + " " + searchWord(5+i%7) + " "})
		w := searchWord(100 + i*97)
		qs = append(qs, [2]string{"prefix", w[:min(len(w), 4)]})
	}
	for _, p := range searchPhrases {
		qs = append(qs, [2]string{p.kind, `"` + p.text + `"`})
	}
	return qs
}

func BenchmarkSearch(b *testing.B) {
	n := searchBenchN(b)
	b.Run("sqlite", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "parley.db")
		st := mustOpen(b, sqlstore.Config{Path: path})
		sb, mine, theirs := setupSearchBench(b, st)
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=synchronous(OFF)&_txlock=immediate")
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		start := time.Now()
		seedSearch(b, db, false, n, mine, theirs)
		seed := time.Since(start)
		if _, err := db.Exec(`ANALYZE`); err != nil {
			b.Fatal(err)
		}
		var fts, docs int64
		if err := db.QueryRow(`SELECT
				(SELECT SUM(pgsize) FROM dbstat WHERE name LIKE 'message_search%' AND name <> 'message_search_docs'),
				(SELECT SUM(pgsize) FROM dbstat WHERE name = 'message_search_docs' OR name LIKE 'sqlite_autoindex_message_search_docs%')`).
			Scan(&fts, &docs); err != nil {
			b.Fatalf("index size: %v", err)
		}
		b.Logf("sqlite: seeded %d messages in %v (%.0f/s); FTS5 index %.1f MB, document map %.1f MB",
			n, seed.Round(time.Millisecond), float64(n)/seed.Seconds(), float64(fts)/1e6, float64(docs)/1e6)
		sb.run(b)
	})
	b.Run("postgres", func(b *testing.B) {
		url := testpg.New(b)
		st := mustOpen(b, sqlstore.Config{PostgresURL: url})
		sb, mine, theirs := setupSearchBench(b, st)
		db, err := sql.Open("pgx", url)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		start := time.Now()
		seedSearch(b, db, true, n, mine, theirs)
		seed := time.Since(start)
		analyze(b, url)
		var gin, col int64
		if err := db.QueryRow(`SELECT pg_relation_size('messages_search'),
				(SELECT SUM(pg_column_size(search)) FROM messages)`).Scan(&gin, &col); err != nil {
			b.Fatalf("index size: %v", err)
		}
		b.Logf("postgres: seeded %d messages in %v (%.0f/s); GIN index %.1f MB, tsvector column %.1f MB",
			n, seed.Round(time.Millisecond), float64(n)/seed.Seconds(), float64(gin)/1e6, float64(col)/1e6)
		sb.run(b)
	})
}

// run measures each kind of query as a sub-benchmark, cycling through the
// kind's queries, and reports p50 and p99 in microseconds and the mean
// results per page.
func (sb *searchBench) run(b *testing.B) {
	ctx := context.Background()
	byKind := map[string][]string{}
	var kinds []string
	for _, q := range searchQueries() {
		if _, ok := byKind[q[0]]; !ok {
			kinds = append(kinds, q[0])
		}
		byKind[q[0]] = append(byKind[q[0]], q[1])
	}
	for _, kind := range kinds {
		qs := byKind[kind]
		b.Run(kind, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			results := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				page, err := sb.st.Search(ctx, sb.searcher.ID, sb.ws.ID, parley.SearchQuery{Q: qs[i%len(qs)]})
				lat = append(lat, time.Since(t0))
				if err != nil {
					b.Fatalf("search %q: %v", qs[i%len(qs)], err)
				}
				results += len(page.Results)
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(results)/float64(b.N), "results/op")
		})
	}
}
