package store_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// t0 is the fixed "now" of the tests: the store never reads the wall clock.
var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

var testKeys = testkit.Keyring

type env struct {
	t     testing.TB
	ctx   context.Context
	pool  *pgxpool.Pool
	store *store.Store
}

func newEnv(t testing.TB) *env {
	return newEnvWith(t, store.DefaultLimits())
}

// rawQuota are the default limits without final slots: every send of a window is open
// to any reply (the tests of the quota itself).
func rawQuota() store.Limits {
	l := store.DefaultLimits()
	l.FinalSlots = 0
	return l
}

func newEnvWith(t testing.TB, limits store.Limits) *env {
	t.Helper()
	pool := dbtest.NewPool(t)
	s, err := store.New(pool, testKeys, limits)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: context.Background(), pool: pool, store: s}
}

var botCounter atomic.Int64

// bot is a registered account with its test identities.
type bot struct {
	key, provider, owner string
	generation           int32
	cursor               string
	nextID               int64
}

func (e *env) register() *bot {
	e.t.Helper()
	n := botCounter.Add(1)
	b := &bot{
		provider: fmt.Sprintf("%012x@im.bot", n),
		owner:    fmt.Sprintf("o9cq8owner%018d@im.wechat", n),
		nextID:   7000000000000000000,
	}
	a, err := storetest.RegisterAccount(e.ctx, e.store, t0, store.ConfirmInput{
		ProviderAccountID: b.provider, OwnerPeerID: b.owner, BaseURL: "https://ilinkai.weixin.qq.com",
		BotToken: sealing.NewSecret(b.provider + ":tok" + strconv.FormatInt(n, 10)),
	})
	if err != nil {
		e.t.Fatalf("register: %v", err)
	}
	b.key, b.generation = a.AccountKey, a.Generation
	return b
}

// msg builds a page entry from the bot's owner with a fresh numeric id.
func (b *bot) msg(text string, sentAt time.Time) store.PageEntry {
	b.nextID++
	id := strconv.FormatInt(b.nextID, 10)
	return store.PageEntry{
		ProviderMessageID: id, PeerID: b.owner, SentAt: sentAt, Cursor: b.cursor,
		ContextToken: sealing.NewSecret("CKctx-" + id), Payload: store.Payload{Summary: text},
	}
}

// commit commits entries as the bot's next page and advances its cursor.
func (e *env) commit(b *bot, now time.Time, entries ...store.PageEntry) store.PageResult {
	e.t.Helper()
	res, err := e.tryCommit(b, now, entries...)
	if err != nil {
		e.t.Fatalf("commit page: %v", err)
	}
	return res
}

func (e *env) tryCommit(b *bot, now time.Time, entries ...store.PageEntry) (store.PageResult, error) {
	next := b.cursor + "Ck" + strconv.Itoa(len(b.cursor))
	for i := range entries {
		entries[i].Cursor = b.cursor
	}
	res, err := e.store.CommitPage(e.ctx, now, store.PageInput{
		AccountKey: b.key, Generation: b.generation, ExpectedCursor: b.cursor, NextCursor: next, Entries: entries,
	})
	if err == nil {
		b.cursor = next
	}
	return res, err
}

// deliver commits one message and opens an agent session on its window.
func (e *env) deliver(b *bot, text string) (store.PageResult, sealing.Secret) {
	e.t.Helper()
	res := e.commit(b, t0, b.msg(text, t0))
	if res.Deliverable == nil {
		e.t.Fatalf("message was not deliverable: %+v", res)
	}
	tok := sealing.NewSecret(fmt.Sprintf("session-token-%s-%d", b.key, b.nextID))
	if _, err := e.store.OpenAgentSession(e.ctx, t0, store.OpenSessionInput{ReplyWindowID: res.Deliverable.ReplyWindowID, Token: tok}); err != nil {
		e.t.Fatalf("open session: %v", err)
	}
	return res, tok
}

func text(s string) vocab.Content { return vocab.Content{Type: "text", Text: s} }

// lines runs a query of one text column in the test's schema and returns its rows, each
// after prefix and on a line of its own.
func (e *env) lines(prefix, query string, args ...any) string {
	e.t.Helper()
	rows, err := e.pool.Query(e.ctx, query, args...)
	if err != nil {
		e.t.Fatalf("query %q: %v", query, err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		e.t.Fatalf("query %q: %v", query, err)
	}
	var out strings.Builder
	for _, line := range got {
		out.WriteString(prefix + line + "\n")
	}
	return out.String()
}

// count runs a COUNT(*) query in the test's schema.
func (e *env) count(query string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(e.ctx, query, args...).Scan(&n); err != nil {
		e.t.Fatalf("count %q: %v", query, err)
	}
	return n
}

func wantCode(t testing.TB, err error, code vocab.Code) {
	t.Helper()
	if store.CodeOf(err) != code {
		t.Fatalf("got error %v, want code %s", err, code)
	}
}

func storeReply(tok sealing.Secret, s string) store.ReplyInput {
	return store.ReplyInput{Session: store.ByToken(tok), Content: text(s)}
}

var allTables = []string{
	"accounts", "account_secrets", "login_offers", "enrollment_audit", "inbound_messages",
	"inbound_images", "reply_windows", "reply_window_secrets", "send_attempts", "agent_sessions",
	"outbound_media",
}

// digest fingerprints every row of every table, so a test can assert that a failed
// operation wrote nothing.
func (e *env) digest() string {
	e.t.Helper()
	out := ""
	for _, table := range allTables {
		var d *string
		q := "SELECT md5(string_agg(t::text, '|' ORDER BY t::text)) FROM " + table + " t"
		if err := e.pool.QueryRow(e.ctx, q).Scan(&d); err != nil {
			e.t.Fatalf("digest %s: %v", table, err)
		}
		if d != nil {
			out += table + ":" + *d + ";"
		}
	}
	return out
}

// unchanged fails the test when the store changed since before was taken.
func (e *env) unchanged(before string) {
	e.t.Helper()
	if after := e.digest(); after != before {
		e.t.Fatalf("a failed operation wrote to the store")
	}
}
