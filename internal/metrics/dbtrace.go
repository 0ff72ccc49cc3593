package metrics

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
)

// DBTracer counts the worker's PostgreSQL round trips by kind: a query or statement
// (Exec, Query, QueryRow, BEGIN and COMMIT included), a batch (one round trip for all its
// statements), a prepare (pgx prepares a statement the first time a connection runs it),
// and a COPY. Set it as the pool's ConnConfig.Tracer. It records no SQL and no argument,
// only counts.
type DBTracer struct {
	query, batch, prepare, copyFrom prometheus.Counter
}

// newDBTracer registers ilinkflow_db_round_trips_total on reg.
func newDBTracer(reg prometheus.Registerer) (*DBTracer, error) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ilinkflow_db_round_trips_total",
		Help: "PostgreSQL round trips of the worker's pool, by kind (query, batch, prepare, copy).",
	}, []string{"kind"})
	if err := reg.Register(vec); err != nil {
		return nil, err
	}
	return &DBTracer{query: vec.WithLabelValues("query"), batch: vec.WithLabelValues("batch"),
		prepare: vec.WithLabelValues("prepare"), copyFrom: vec.WithLabelValues("copy")}, nil
}

// TraceQueryStart counts one query round trip.
func (t *DBTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	t.query.Inc()
	return ctx
}

// TraceQueryEnd does nothing.
func (t *DBTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart counts one batch round trip.
func (t *DBTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	t.batch.Inc()
	return ctx
}

// TraceBatchQuery does nothing: the statements of a batch share its round trip.
func (t *DBTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd does nothing.
func (t *DBTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TracePrepareStart counts one prepare round trip.
func (t *DBTracer) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	t.prepare.Inc()
	return ctx
}

// TracePrepareEnd does nothing.
func (t *DBTracer) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

// TraceCopyFromStart counts one COPY.
func (t *DBTracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	t.copyFrom.Inc()
	return ctx
}

// TraceCopyFromEnd does nothing.
func (t *DBTracer) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

// The interfaces pgx looks for on a tracer.
var (
	_ pgx.QueryTracer    = (*DBTracer)(nil)
	_ pgx.BatchTracer    = (*DBTracer)(nil)
	_ pgx.PrepareTracer  = (*DBTracer)(nil)
	_ pgx.CopyFromTracer = (*DBTracer)(nil)
)
