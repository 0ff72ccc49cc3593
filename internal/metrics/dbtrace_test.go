package metrics_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/metrics"
)

// A pool traced by the registry counts each round trip once: a statement, BEGIN and
// COMMIT one each, a batch one for all its statements.
func TestEveryPostgreSQLRoundTripIsCountedOnceByKind(t *testing.T) {
	reg, err := metrics.New(quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(context.Background())
	pool := dbtest.NewPoolWith(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = reg.DBTracer() })
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	count := func(kind string) float64 {
		t.Helper()
		mfs, err := reg.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "ilinkflow_db_round_trips_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "kind" && l.GetValue() == kind {
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		t.Fatalf("ilinkflow_db_round_trips_total{kind=%q} not served", kind)
		return 0
	}
	q0, b0 := count("query"), count("batch")

	if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 2"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	b := &pgx.Batch{}
	b.Queue("SELECT 3")
	b.Queue("SELECT 4")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if got := count("query") - q0; got != 4 { // SELECT 1, BEGIN, SELECT 2, COMMIT
		t.Errorf("query round trips = %v, want 4", got)
	}
	if got := count("batch") - b0; got != 1 {
		t.Errorf("batch round trips = %v, want 1", got)
	}
}
