package sqlstore

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// PostgreSQL estimates the matches of an AND or a phrase as the product of
// its words' frequencies, as if words were independent. Words that go
// together ("deploy failed") are found thousands of times more often than
// that, and the planner then fetches and sorts every match through the GIN
// index when walking the newest messages would have filled a page after a
// few thousand rows (docs/benchmarks.md, "Search"). termStats reads the
// same statistics the planner has (pg_stats' most common elements of the
// search column) and judges a query by its rarest term instead, assuming
// the terms go together; search.go then asks for the walk outright.

// termStatsTTL is how long the statistics are kept; ANALYZE (autovacuum)
// changes them rarely.
const termStatsTTL = 5 * time.Minute

// searchVisibleShare is the share of a workspace's messages assumed readable
// by the searcher when judging how far a newest-first walk goes.
const searchVisibleShare = 0.5

type termStats struct {
	mu   sync.Mutex
	at   time.Time          // guarded by mu; zero: never loaded
	freq map[string]float64 // guarded by mu; share of messages holding the word
	rows float64            // guarded by mu; messages in the table (estimate)
}

// snapshot returns the current statistics, reloading them when stale. A
// failed load is logged and leaves the planner to decide.
func (s *Store) termFrequencies(ctx context.Context) (map[string]float64, float64) {
	t := &s.terms
	t.mu.Lock()
	defer t.mu.Unlock()
	if now := s.now(); t.at.IsZero() || now.Sub(t.at) > termStatsTTL {
		freq, rows, err := loadTermStats(ctx, s.rdb)
		if err != nil {
			s.log.Warn("search: load term statistics", "err", err)
		}
		t.freq, t.rows, t.at = freq, rows, now
	}
	return t.freq, t.rows
}

func loadTermStats(ctx context.Context, q querier) (map[string]float64, float64, error) {
	var rows float64
	if err := q.QueryRowContext(ctx,
		`SELECT GREATEST(reltuples, 0)::float8 FROM pg_class WHERE oid = 'messages'::regclass`).Scan(&rows); err != nil {
		return nil, 0, fmt.Errorf("messages size: %w", err)
	}
	// most_common_elem_freqs ends with three summary numbers, which unnest
	// pairs with no element.
	r, err := q.QueryContext(ctx, `SELECT u.e, u.f FROM pg_stats s,
			unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) AS u(e, f)
		WHERE s.schemaname = current_schema() AND s.tablename = 'messages' AND s.attname = 'search'
		  AND u.e IS NOT NULL`)
	if err != nil {
		return nil, 0, fmt.Errorf("most common words: %w", err)
	}
	defer r.Close()
	freq := map[string]float64{}
	for r.Next() {
		var e string
		var f float64
		if err := r.Scan(&e, &f); err != nil {
			return nil, 0, fmt.Errorf("most common words: %w", err)
		}
		freq[e] = f
	}
	return freq, rows, r.Err()
}

// walkByRecency reports whether a page of matches of terms is better found
// by walking the workspace's newest messages than through the GIN index,
// judging every term by its own frequency (words going together): only
// when every term is among the common words (a prefix or a rarer word may
// match little, which the GIN index finds fast) and the walk would read
// fewer rows than the index would fetch.
func walkByRecency(terms []searchTerm, freq map[string]float64, rows float64, limit int) bool {
	if len(freq) == 0 || rows <= 0 {
		return false
	}
	least := 1.0 // the rarest term's share, words of a phrase taken together
	for _, t := range terms {
		if t.prefix {
			return false
		}
		for _, tok := range t.tokens {
			f, ok := freq[lowerToken(tok)]
			if !ok {
				return false
			}
			least = min(least, f)
		}
	}
	walk := float64(limit+1) / (least * searchVisibleShare)
	return walk < least*rows
}
