package store_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// newOneConnectionEnv is an environment whose pool holds one connection: the statements
// it prepares are the ones the store runs.
func newOneConnectionEnv(t *testing.T) *env {
	t.Helper()
	pool := dbtest.NewPoolWith(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	s, err := store.New(pool, testKeys, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: t.Context(), pool: pool, store: s}
}

// preparedStatement is one row of pg_prepared_statements of the test's connection.
type preparedStatement struct {
	name          string // the sqlc query name, or the statement's first line
	paramTypes    []string
	custom, plans int64
}

// hotPathStatements runs page commits (with duplicates, images, a merged backlog and a
// superseded window), the agent's hand-off and sends (reserve and start, complete) on one
// connection, many times each, and returns the statements that connection prepared.
func hotPathStatements(t *testing.T) []preparedStatement {
	t.Helper()
	e := newOneConnectionEnv(t)
	pool := e.pool
	b := e.register()
	for i := range 12 {
		now := t0.Add(time.Duration(i) * time.Minute)
		older := b.msg("merged", now.Add(-time.Second))
		older.Payload.Attachments = []store.Attachment{{Kind: "image", Position: 0}}
		older.Images = []store.ImageLocator{{Position: 0, Locator: sealing.NewSecret("cdn-locator")}}
		newer := b.msg("delivered", now)
		res := e.commit(b, now, older, newer)
		e.commit(b, now, newer) // iLink hands the page out again
		tok := sealing.NewSecret("hot-path-session-" + b.key + "-" + newer.ProviderMessageID)
		opened, err := e.store.OpenAgentSession(e.ctx, now, store.OpenSessionInput{ReplyWindowID: res.Deliverable.ReplyWindowID, Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		for j := range 2 {
			prep, err := e.store.ReserveAndStart(e.ctx, now, store.ReplyInput{Session: store.BySessionID(opened.Session.SessionID),
				ReplyWindowID: res.Deliverable.ReplyWindowID, RequestID: "hot/" + newer.ProviderMessageID + "/" + string(rune('a'+j)),
				Content: text("reply")}, store.SendPacing{})
			if err != nil || prep.Started == nil {
				t.Fatalf("reserve and start: %+v %v", prep, err)
			}
			if _, err := e.store.CompleteSend(e.ctx, now, store.Completion{AttemptID: prep.Attempt.AttemptID,
				Status: vocab.AttemptSent, ProviderMessageID: "pm-" + prep.Attempt.AttemptID}); err != nil {
				t.Fatal(err)
			}
		}
	}
	rows, err := pool.Query(e.ctx, `SELECT statement, parameter_types::text[], custom_plans, generic_plans + custom_plans
		FROM pg_prepared_statements`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []preparedStatement
	for rows.Next() {
		var st string
		var ps preparedStatement
		if err := rows.Scan(&st, &ps.paramTypes, &ps.custom, &ps.plans); err != nil {
			t.Fatal(err)
		}
		ps.name, _, _ = strings.Cut(strings.TrimPrefix(st, "-- name: "), "\n")
		out = append(out, ps)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The hot path's statements bind their parameters as base types and keep a generic plan.
//
//   - A parameter PostgreSQL infers as one of the rule domains (migration 00007: a value
//     assigned to a domain column) is parsed by the domain's input function, which looks
//     the domain up again on every call; cast to its base type, the value is checked once,
//     where it is assigned.
//   - A prepared statement is planned for its first five runs on a connection; then
//     PostgreSQL keeps a generic plan unless a plan made for the values at hand looks
//     cheaper, and then plans every run again. An array parameter (the page's message
//     keys, the windows to retire) looked cheaper with one element than a generic plan
//     made for ten, so those statements were planned on every page.
func TestHotPathStatementsBindBaseTypesAndKeepAGenericPlan(t *testing.T) {
	t.Parallel()
	statements := hotPathStatements(t)
	if len(statements) < 20 {
		t.Fatalf("the hot path prepared %d statements, want the page's, the hand-off's and the send's", len(statements))
	}
	for _, ps := range statements {
		for _, typ := range ps.paramTypes {
			if strings.HasPrefix(typ, "ilk_") {
				t.Errorf("%s binds a parameter of domain %s (parameter types %v)", ps.name, typ, ps.paramTypes)
			}
		}
		if ps.custom > 5 {
			t.Errorf("%s was planned for its values %d times in %d runs", ps.name, ps.custom, ps.plans)
		}
	}
}

// The single-column rules moved to domains (migration 00007) still refuse what the table
// CHECK constraints refused, on insert and on update, and the rules that tie columns
// together are still table constraints.
func TestSchemaRulesStillRefuseBadValues(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, tok := e.deliver(b, "hello")
	a, err := e.reserve(t0, storeReply(tok, "reply"))
	if err != nil {
		t.Fatal(err)
	}
	msg, win := res.Deliverable.MessageKey, res.Deliverable.ReplyWindowID
	for _, c := range []struct {
		rule string
		sql  string
		arg  any
	}{
		{"account status", `UPDATE accounts SET status = 'gone' WHERE account_key = $1`, b.key},
		{"account generation", `UPDATE accounts SET generation = 0 WHERE account_key = $1`, b.key},
		{"cursor length", `UPDATE accounts SET cursor = repeat('c', 262145) WHERE account_key = $1`, b.key},
		{"base url", `UPDATE accounts SET base_url = 'ftp://x' WHERE account_key = $1`, b.key},
		{"provider account id", `UPDATE accounts SET provider_account_id = '' WHERE account_key = $1`, b.key},
		{"message status", `UPDATE inbound_messages SET status = 'lost' WHERE message_key = $1`, msg},
		{"message key", `INSERT INTO inbound_messages (message_key, account_key, peer_id, provider_message_id, sent_at, status, payload, created_at, updated_at)
			SELECT 'im_bad', account_key, peer_id, 'p-bad', now(), 'received', '{}', now(), now() FROM inbound_messages WHERE message_key = $1`, msg},
		// The key is the hash of the account and the iLink id: another id under the same key
		// (a second copy of one iLink message under a key of its own is the same rule).
		{"message key derived from its iLink id", `UPDATE inbound_messages SET provider_message_id = provider_message_id || '0' WHERE message_key = $1`, msg},
		{"window state", `UPDATE reply_windows SET state = 'closed' WHERE reply_window_id = $1`, win},
		{"reserved", `UPDATE reply_windows SET reserved = -1 WHERE reply_window_id = $1`, win},
		{"max sends", `UPDATE reply_windows SET max_sends = 1001 WHERE reply_window_id = $1`, win},
		{"quota", `UPDATE reply_windows SET transmitted = max_sends WHERE reply_window_id = $1`, win},
		{"retired window holds no reservation", `UPDATE reply_windows SET state = 'expired' WHERE reply_window_id = $1`, win},
		{"attempt status", `UPDATE send_attempts SET status = 'lost' WHERE attempt_id = $1`, a.AttemptID},
		{"fail type", `UPDATE send_attempts SET fail_type = 'other' WHERE attempt_id = $1`, a.AttemptID},
		{"fingerprint", `UPDATE send_attempts SET fingerprint = 'xyz' WHERE attempt_id = $1`, a.AttemptID},
		{"send index", `UPDATE send_attempts SET send_index = 1000 WHERE attempt_id = $1`, a.AttemptID},
		{"client message id derived from the attempt", `UPDATE send_attempts SET client_message_id = 'ilinkflow:' || repeat('0', 32) WHERE attempt_id = $1`, a.AttemptID},
	} {
		before := e.digest()
		_, err := e.pool.Exec(e.ctx, c.sql, c.arg)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23514" {
			t.Errorf("%s: %v, want a check violation (23514)", c.rule, err)
		}
		e.unchanged(before)
	}
}

// A page's reads probe the inbox by key once it holds a few hundred messages. Their plans
// are made when the tables are small and kept as the tables grow (until autovacuum next
// gathers statistics), so a plan that scans a table is a cost that grows with the inbox.
// Planned as joins, the page's known messages and the open window's unanswered message
// were scans of the whole inbox at three hundred messages: the planner guessed ten keys
// per page and a scan of a small table looked as cheap as ten probes.
func TestPageReadsProbeTheInboxByKeyOnceItHoldsAFewHundredMessages(t *testing.T) {
	t.Parallel()
	e := newOneConnectionEnv(t)
	pool := e.pool
	b := e.register()
	for i := range 300 {
		now := t0.Add(time.Duration(i) * time.Second)
		res := e.commit(b, now, b.msg("hello", now))
		if _, err := pool.Exec(e.ctx, `UPDATE inbound_messages SET status = 'handled' WHERE message_key = $1`, res.Deliverable.MessageKey); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(e.ctx, `ANALYZE inbound_messages, reply_windows, inbound_images`); err != nil {
		t.Fatal(err)
	}
	args := map[string]string{
		"PageKnownMessages":     `('{im_00000000000000000000000000000000}')`,
		"ReceivedBacklog":       `('` + b.key + `', '` + b.owner + `')`,
		"ReceivedBacklogImages": `('` + b.key + `', '` + b.owner + `')`,
	}
	for query, text := range genericPlans(t, e, args) {
		for _, table := range []string{"inbound_messages", "reply_windows"} {
			if strings.Contains(text, "Seq Scan on "+table) {
				t.Errorf("%s scans %s with 300 messages stored:\n%s", query, table, text)
			}
		}
	}
}

// genericPlans explains the generic plan of each statement named in args (sqlc query
// names, with the arguments of EXECUTE) as the environment's one connection prepared it.
func genericPlans(t *testing.T, e *env, args map[string]string) map[string]string {
	t.Helper()
	conn, err := e.pool.Acquire(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	rows, err := conn.Query(e.ctx, `SELECT name, statement FROM pg_prepared_statements`)
	if err != nil {
		t.Fatal(err)
	}
	execute := map[string]string{}
	for rows.Next() {
		var name, st string
		if err := rows.Scan(&name, &st); err != nil {
			t.Fatal(err)
		}
		query, _, _ := strings.Cut(strings.TrimPrefix(st, "-- name: "), " ")
		if a, ok := args[query]; ok {
			execute[query] = name + a
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(e.ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = conn.Exec(e.ctx, `RESET plan_cache_mode`) }()
	plans := map[string]string{}
	for query := range args {
		ex, ok := execute[query]
		if !ok {
			t.Fatalf("the test did not prepare %s", query)
		}
		lines, err := conn.Query(e.ctx, `EXPLAIN EXECUTE `+ex)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := pgx.CollectRows(lines, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		plans[query] = strings.Join(plan, "\n")
	}
	return plans
}

// A completion and a reservation that starts at once find their window and account by
// key. Joined, the small accounts and reply_windows tables of a gateway with a few bots
// were hashed, and the hash table was built again for every send.
func TestSendStatementsFindTheirWindowAndAccountByKey(t *testing.T) {
	t.Parallel()
	e := newOneConnectionEnv(t)
	for range 16 {
		b := e.register()
		_, tok := e.deliver(b, "hello")
		for i := range 3 {
			in := storeReply(tok, "reply")
			in.RequestID = "test:" + b.key + "/" + string(rune('a'+i))
			prep, err := e.store.ReserveAndStart(e.ctx, t0, in, store.SendPacing{})
			if err != nil {
				t.Fatal(err)
			}
			if prep.Started == nil {
				t.Fatalf("send %d of %s did not start: %+v", i, b.key, prep)
			}
			if _, err := e.store.CompleteSend(e.ctx, t0, store.Completion{AttemptID: prep.Attempt.AttemptID,
				Status: vocab.AttemptSent, ProviderMessageID: "pm-" + prep.Attempt.AttemptID}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := e.pool.Exec(e.ctx, `ANALYZE accounts, reply_windows, send_attempts`); err != nil {
		t.Fatal(err)
	}
	plans := genericPlans(t, e, map[string]string{
		"ReserveStartedWindowSend": `(NULL, 1, 0)`,
		"CompleteSendingAttempt":   `(NULL, NULL, NULL, NULL, NULL, NULL, 'sa_00000000000000000000000000000')`,
	})
	for query, plan := range plans {
		if strings.Contains(plan, "Hash") {
			t.Errorf("%s hashes a table with 16 bots:\n%s", query, plan)
		}
	}
}

// The retention purge and a forget delete inbound messages, and PostgreSQL checks each
// deleted row's key against agent_sessions (its foreign key to inbound_messages) with the
// query below. That check finds the message's sessions by index
// (agent_sessions_by_message), not by a scan of every session ever opened: a scan per
// deleted row makes a purge's cost grow with the months of data kept.
func TestDeletingAMessageFindsItsSessionsByIndex(t *testing.T) {
	t.Parallel()
	e := newOneConnectionEnv(t)
	b := e.register()
	for i := range 300 {
		now := t0.Add(time.Duration(i) * time.Second)
		res := e.commit(b, now, b.msg("hello", now))
		tok := sealing.NewSecret("purge-session-token-" + strconv.Itoa(i))
		if _, err := e.store.OpenAgentSession(e.ctx, now, store.OpenSessionInput{ReplyWindowID: res.Deliverable.ReplyWindowID, Token: tok}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.FinishMessage(e.ctx, now, res.Deliverable.MessageKey, vocab.MessageHandled, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.pool.Exec(e.ctx, `ANALYZE agent_sessions`); err != nil {
		t.Fatal(err)
	}
	// The query of PostgreSQL's foreign-key check (ri_triggers.c, RI_FKey_noaction_del).
	lines, err := e.pool.Query(e.ctx, `EXPLAIN SELECT 1 FROM ONLY agent_sessions x WHERE source_message_key = $1 FOR KEY SHARE OF x`,
		"im_00000000000000000000000000000000")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(lines, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if text := strings.Join(plan, "\n"); strings.Contains(text, "Seq Scan on agent_sessions") {
		t.Errorf("the foreign-key check of a deleted message scans agent_sessions with 300 sessions stored:\n%s", text)
	}
}
