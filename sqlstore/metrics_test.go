package sqlstore_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"parley"
	"parley/sqlstore"
)

// opCount is how many operations op on dialect parley_store_op_seconds has
// observed so far (the metrics are process-wide: tests compare before and
// after).
func opCount(t *testing.T, name, op, dialect string) uint64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(sqlstore.Collectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label(m, "op") == op && label(m, "dialect") == dialect {
				if h := m.GetHistogram(); h != nil {
					return h.GetSampleCount()
				}
				return uint64(m.GetCounter().GetValue())
			}
		}
	}
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Every named write is timed, by operation and dialect: through write
// (create user, create workspace) and through writeChannel (post message;
// on PostgreSQL that is a group-commit lane). Refusals are timed but are
// not errors.
func TestStoreOpMetrics(t *testing.T) {
	for _, tc := range []struct {
		dialect string
		open    func(testing.TB, parley.EventPublisher) parley.Store
	}{
		{"sqlite", openSQLite},
		{"postgres", openPostgres},
	} {
		t.Run(tc.dialect, func(t *testing.T) {
			s := tc.open(t, nil)
			ctx := context.Background()
			type obs struct{ name, op string }
			watch := []obs{
				{"parley_store_op_seconds", "create user"},
				{"parley_store_op_seconds", "create workspace"},
				{"parley_store_op_seconds", "create channel"},
				{"parley_store_op_seconds", "post message"},
				{"parley_store_op_errors_total", "post message"},
			}
			before := map[obs]uint64{}
			for _, w := range watch {
				before[w] = opCount(t, w.name, w.op, tc.dialect)
			}

			u, err := s.CreateUser(ctx, parley.NewUser{Email: "m@example.com", Name: "M", Handle: "metrics-user", PasswordHash: "x"})
			if err != nil {
				t.Fatal(err)
			}
			ws, err := s.CreateWorkspace(ctx, u.ID, "Metrics", "metrics")
			if err != nil {
				t.Fatal(err)
			}
			ch, err := s.CreateChannel(ctx, u.ID, ws.ID, parley.NewChannel{Name: "timed", Kind: parley.KindPublic})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if _, _, err := s.PostMessage(ctx, u.ID, ch.ID, parley.NewMessage{Text: "timed " + string(rune('a'+i))}); err != nil {
					t.Fatal(err)
				}
			}
			// A refusal: timed, not an error.
			if _, _, err := s.PostMessage(ctx, u.ID, "no-such-channel", parley.NewMessage{Text: "x"}); parley.ErrorCode(err) == parley.EINTERNAL {
				t.Fatalf("post to an unknown channel: %v", err)
			}

			want := map[obs]uint64{watch[0]: 1, watch[1]: 1, watch[2]: 1, watch[3]: 4, watch[4]: 0}
			for _, w := range watch {
				if got := opCount(t, w.name, w.op, tc.dialect) - before[w]; got != want[w] {
					t.Errorf("%s{op=%q,dialect=%q} moved by %d, want %d", w.name, w.op, tc.dialect, got, want[w])
				}
			}
		})
	}
}
