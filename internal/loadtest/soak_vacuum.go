package loadtest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// vacuumStandIn does for the soak's schema what PostgreSQL's autovacuum daemon would do
// when the server runs with it off: every naptime it vacuums each table whose dead tuples
// (or tuples inserted since its last vacuum) pass the daemon's threshold, and analyzes
// each whose changes since its last analyze pass the analyze threshold, with the daemon's
// cost delay and limit, one table at a time (as one worker would). The thresholds are the
// server's autovacuum_* settings; the tables set none of their own.
type vacuumStandIn struct {
	admin   *pgxpool.Pool
	schema  string
	naptime time.Duration
	set     autovacuumSettings

	mu                sync.Mutex
	vacuums, analyzes int
	firstErr          error
}

// autovacuumSettings are the server's autovacuum thresholds and cost limits.
type autovacuumSettings struct {
	vacuumThreshold, vacuumScale   float64
	insertThreshold, insertScale   float64
	analyzeThreshold, analyzeScale float64
	costDelayMS, costLimit         float64
	naptime                        time.Duration
}

// readServer reads whether the server runs autovacuum, and readies the stand-in when it
// does not and the soak may stand in.
func (sk *soak) readServer(ctx context.Context) error {
	if err := sk.admin.QueryRow(ctx, "SHOW autovacuum").Scan(&sk.rep.Autovacuum); err != nil {
		return fmt.Errorf("soak: read the server's autovacuum setting: %w", err)
	}
	if sk.rep.Autovacuum == "on" || !sk.cfg.VacuumStandIn {
		return nil
	}
	set, err := readAutovacuumSettings(ctx, sk.admin)
	if err != nil {
		return err
	}
	naptime := sk.cfg.VacuumNaptime
	if naptime <= 0 {
		naptime = set.naptime
	}
	sk.standIn = &vacuumStandIn{admin: sk.admin, schema: sk.schema, naptime: naptime, set: set}
	sk.rep.StandIn, sk.rep.StandInNaptime = true, naptime.Seconds()
	return nil
}

// readAutovacuumSettings reads the daemon's settings from pg_settings (a cost limit of -1
// is vacuum_cost_limit's, as the daemon takes it).
func readAutovacuumSettings(ctx context.Context, pool *pgxpool.Pool) (autovacuumSettings, error) {
	var s autovacuumSettings
	rows, err := pool.Query(ctx, `SELECT name, setting FROM pg_settings WHERE name LIKE 'autovacuum%' OR name = 'vacuum_cost_limit'`)
	if err != nil {
		return s, fmt.Errorf("soak: read the autovacuum settings: %w", err)
	}
	got := map[string]float64{}
	for rows.Next() {
		var name, setting string
		if err := rows.Scan(&name, &setting); err != nil {
			rows.Close()
			return s, fmt.Errorf("soak: read the autovacuum settings: %w", err)
		}
		if v, err := strconv.ParseFloat(setting, 64); err == nil {
			got[name] = v
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s, fmt.Errorf("soak: read the autovacuum settings: %w", err)
	}
	s = autovacuumSettings{
		vacuumThreshold: got["autovacuum_vacuum_threshold"], vacuumScale: got["autovacuum_vacuum_scale_factor"],
		insertThreshold: got["autovacuum_vacuum_insert_threshold"], insertScale: got["autovacuum_vacuum_insert_scale_factor"],
		analyzeThreshold: got["autovacuum_analyze_threshold"], analyzeScale: got["autovacuum_analyze_scale_factor"],
		costDelayMS: got["autovacuum_vacuum_cost_delay"], costLimit: got["autovacuum_vacuum_cost_limit"],
		naptime: time.Duration(got["autovacuum_naptime"] * float64(time.Second)),
	}
	if s.costLimit <= 0 {
		s.costLimit = got["vacuum_cost_limit"]
	}
	if s.naptime <= 0 {
		s.naptime = time.Minute
	}
	return s, nil
}

// run stands in every naptime until ctx ends.
func (v *vacuumStandIn) run(ctx context.Context) {
	t := time.NewTicker(v.naptime)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := v.round(ctx); err != nil && ctx.Err() == nil {
			v.mu.Lock()
			if v.firstErr == nil {
				v.firstErr = err
			}
			v.mu.Unlock()
		}
	}
}

// round vacuums and analyzes the tables past the daemon's thresholds, on one connection.
func (v *vacuumStandIn) round(ctx context.Context) error {
	conn, err := v.admin.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	type due struct {
		name            string
		vacuum, analyze bool
	}
	var tables []due
	rows, err := conn.Query(ctx, `SELECT t.relname,
			t.n_dead_tup > $2 + $3 * greatest(c.reltuples, 0)
				OR t.n_ins_since_vacuum > $4 + $5 * greatest(c.reltuples, 0),
			t.n_mod_since_analyze > $6 + $7 * greatest(c.reltuples, 0)
		FROM pg_stat_user_tables AS t JOIN pg_class AS c ON c.oid = t.relid
		WHERE t.schemaname = $1 ORDER BY t.relname`, v.schema,
		v.set.vacuumThreshold, v.set.vacuumScale, v.set.insertThreshold, v.set.insertScale,
		v.set.analyzeThreshold, v.set.analyzeScale)
	if err != nil {
		return err
	}
	for rows.Next() {
		var d due
		if err := rows.Scan(&d.name, &d.vacuum, &d.analyze); err != nil {
			rows.Close()
			return err
		}
		if d.vacuum || d.analyze {
			tables = append(tables, d)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(tables) == 0 {
		return nil
	}
	// The daemon's cost-based delay: a manual VACUUM runs without one.
	for _, set := range []string{fmt.Sprintf("SET vacuum_cost_delay = '%gms'", v.set.costDelayMS),
		fmt.Sprintf("SET vacuum_cost_limit = %d", int(v.set.costLimit))} {
		if _, err := conn.Exec(ctx, set); err != nil {
			return fmt.Errorf("soak: %s: %w", set, err)
		}
	}
	defer func() {
		rctx := context.WithoutCancel(ctx)
		_, _ = conn.Exec(rctx, "RESET vacuum_cost_delay")
		_, _ = conn.Exec(rctx, "RESET vacuum_cost_limit")
	}()
	for _, d := range tables {
		name := pgx.Identifier{v.schema, d.name}.Sanitize()
		stmt := "ANALYZE " + name
		switch {
		case d.vacuum && d.analyze:
			stmt = "VACUUM (ANALYZE) " + name
		case d.vacuum:
			stmt = "VACUUM " + name
		}
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("soak: %s: %w", stmt, err)
		}
		v.mu.Lock()
		if d.vacuum {
			v.vacuums++
		}
		if d.analyze {
			v.analyzes++
		}
		v.mu.Unlock()
	}
	return nil
}

// counts returns the vacuums and analyzes run so far, and the first round's failure.
func (v *vacuumStandIn) counts() (vacuums, analyzes int, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.vacuums, v.analyzes, v.firstErr
}
