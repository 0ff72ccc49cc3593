package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

const day = 24 * time.Hour

// retain is the default policy of the worker: content 30 days, rows 90, quarantine 30,
// audit a year.
var retain = store.RetentionPolicy{Content: 30 * day, Rows: 90 * day, Quarantine: 30 * day, Audit: 365 * day}

func (e *env) purge(now time.Time, p store.RetentionPolicy, class string, limit int) int {
	e.t.Helper()
	n, err := e.store.PurgeBatch(e.ctx, now, p, class, limit)
	if err != nil {
		e.t.Fatalf("purge %s: %v", class, err)
	}
	return n
}

// purgeAll runs every class's batches until each returns fewer than the limit.
func (e *env) purgeAll(now time.Time, p store.RetentionPolicy) map[string]int {
	e.t.Helper()
	out := map[string]int{}
	for _, class := range store.RetentionClasses {
		for {
			n := e.purge(now, p, class, 0)
			out[class] += n
			if n < store.DefaultPurgeLimit {
				break
			}
		}
	}
	return out
}

// messageKeys are a bot's messages, oldest first.
func (e *env) messageKeys(b *bot) []string {
	e.t.Helper()
	var keys []string
	rows, err := e.pool.Query(e.ctx, "SELECT message_key FROM inbound_messages WHERE account_key = $1 ORDER BY inbox_seq", b.key)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			e.t.Fatal(err)
		}
		keys = append(keys, k)
	}
	return keys
}

func (e *env) erased(key string) bool {
	e.t.Helper()
	return e.count("SELECT count(*) FROM inbound_messages WHERE message_key = $1 AND erased_at IS NOT NULL AND payload IS NULL", key) == 1
}

func TestRetentionErasesContentPastItsHorizonAndNothingYoungerNorAnOpenWindowsMessage(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, heldLimits(nil))
	user := e.userConversation(e.register(), "the user")
	keys := e.messageKeys(user.b)
	if len(keys) != 2 {
		t.Fatalf("messages %v, want 2", keys)
	}
	// The first window was superseded at t0+1h by the second message, whose window is open.
	closed := t0.Add(time.Hour)
	before := e.accountRows(user.b.key)
	if n := e.purge(closed.Add(retain.Content-time.Second), retain, store.RetentionContent, 0); n != 0 {
		t.Fatalf("a second before the horizon, %d messages were erased", n)
	}
	if after := e.accountRows(user.b.key); after != before {
		t.Fatalf("a purge before the horizon changed the rows:\n%s\nwant\n%s", after, before)
	}
	if n := e.purge(closed.Add(retain.Content+time.Second), retain, store.RetentionContent, 0); n != 1 {
		t.Fatalf("past the horizon, %d messages were erased, want 1", n)
	}
	if !e.erased(keys[0]) || e.erased(keys[1]) {
		t.Fatalf("erased: first %v (want true), second %v (want false)", e.erased(keys[0]), e.erased(keys[1]))
	}
	// What forget erases is gone from the first message: its attachments, the content and
	// fingerprints of its replies and of its held reply.
	if n := e.count("SELECT count(*) FROM inbound_images WHERE message_key = $1", keys[0]); n != 0 {
		t.Errorf("%d attachment locators kept", n)
	}
	if n := e.count(`SELECT count(*) FROM send_attempts WHERE source_message_key = $1
		AND (erased_at IS NULL OR payload <> 'null'::jsonb OR fingerprint !~ '^0+$')`, keys[0]); n != 0 {
		t.Errorf("%d attempts keep their content", n)
	}
	if !e.sealedGone(user.held.HeldID) {
		t.Error("the held reply keeps its sealed text")
	}
	// The open window's message is never touched, however old.
	if n := e.purge(t0.Add(10*365*day), retain, store.RetentionContent, 0); n != 0 {
		t.Fatalf("an open window's message was erased (%d)", n)
	}
	if e.erased(keys[1]) {
		t.Fatal("the open window's message was erased")
	}
	if n := e.count("SELECT count(*) FROM reply_window_secrets WHERE reply_window_id = $1", user.open); n != 1 {
		t.Fatalf("the open window's context token is gone")
	}
}

func TestRetentionKeepsTheDedupeKeySoARedeliveredMessageIsStoredOnceAfterItsContentWasPurged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	first := b.msg("first words", t0)
	e.commit(b, t0, first)
	e.commit(b, t0.Add(time.Minute), b.msg("second words", t0.Add(time.Minute)))
	now := t0.Add(retain.Content + day)
	if n := e.purge(now, retain, store.RetentionContent, 0); n != 1 {
		t.Fatalf("erased %d, want the first message", n)
	}
	res := e.commit(b, now, first) // iLink hands the first message out again
	if res.Inserted != 0 || res.Duplicates != 1 || res.Deliverable != nil || res.OpenedWindowID != 0 {
		t.Fatalf("the redelivered message: %+v, want one duplicate and nothing new", res)
	}
	if n := e.count("SELECT count(*) FROM inbound_messages WHERE account_key = $1", b.key); n != 2 {
		t.Fatalf("%d messages stored, want 2", n)
	}
	if !e.erased(e.messageKeys(b)[0]) {
		t.Fatal("the redelivered message got content back")
	}
}

func TestRetentionBatchesAreBoundedByTheirLimitAndASecondPassPurgesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	for i := range 6 { // five superseded windows, the sixth open
		at := t0.Add(time.Duration(i) * time.Minute)
		e.commit(b, at, b.msg("words", at))
	}
	now := t0.Add(retain.Content + day)
	var batches []int
	for {
		n := e.purge(now, retain, store.RetentionContent, 2)
		if n > 2 {
			t.Fatalf("a batch of limit 2 erased %d", n)
		}
		batches = append(batches, n)
		if n < 2 {
			break
		}
	}
	if len(batches) != 3 || batches[0]+batches[1]+batches[2] != 5 {
		t.Fatalf("batches %v, want 2, 2, 1", batches)
	}
	if n := e.count("SELECT count(*) FROM inbound_messages WHERE account_key = $1 AND erased_at IS NOT NULL", b.key); n != 5 {
		t.Fatalf("%d messages erased, want 5", n)
	}
	before := e.digest()
	if got := e.purgeAll(now, retain); got[store.RetentionContent]+got[store.RetentionRows] != 0 {
		t.Fatalf("a second pass purged %v", got)
	}
	e.unchanged(before)
}

func TestRetentionDeletesRowsPastTheRowsHorizonWithTheirDependents(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, heldLimits(nil))
	user := e.userConversation(e.register(), "the user")
	keep := e.userConversation(e.register(), "a recent user")
	expiry := t0.Add(time.Hour + 24*time.Hour)
	if _, err := e.store.ExpireWindow(e.ctx, expiry, user.open); err != nil {
		t.Fatalf("expire: %v", err)
	}
	now := expiry.Add(retain.Rows + time.Second)
	keepBefore := e.accountRows(keep.b.key)
	// Content first (a row is deleted only once its content is erased), then rows one
	// message a batch: the first message's held reply rides an attempt of the second's window.
	if n := e.purge(now, retain, store.RetentionRows, 0); n != 0 {
		t.Fatalf("rows whose content is kept were deleted (%d)", n)
	}
	// Both messages of the user, and the first of the other user (superseded at t0+1h).
	if n := e.purge(now, retain, store.RetentionContent, 0); n != 3 {
		t.Fatalf("content of %d messages erased, want 3", n)
	}
	for range 3 {
		if n := e.purge(now, retain, store.RetentionRows, 1); n != 1 {
			t.Fatalf("a rows batch of limit 1 deleted %d", n)
		}
	}
	if n := e.purge(now, retain, store.RetentionRows, 1); n != 0 {
		t.Fatalf("a fourth rows batch deleted %d", n)
	}
	if n := e.purge(now, retain, store.RetentionQuarantine, 0); n != 2 { // both users' pages
		t.Fatalf("quarantined pages deleted: %d, want 2", n)
	}
	if rows := e.accountRows(user.b.key); rows != "" {
		t.Fatalf("rows left of the purged conversation:\n%s", rows)
	}
	// The other user's open window and its message stay, however old.
	if e.count("SELECT count(*) FROM inbound_messages WHERE account_key = $1", keep.b.key) != 1 {
		t.Fatalf("the recent user's open window's message is gone:\n%s\nwas\n%s", e.accountRows(keep.b.key), keepBefore)
	}
	if e.count("SELECT count(*) FROM reply_windows WHERE reply_window_id = $1 AND state = 'open'", keep.open) != 1 {
		t.Fatal("the recent user's open window is gone")
	}
}

func TestRetentionRefusesAnInvalidPolicyClassOrLimitAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		p     store.RetentionPolicy
		class string
		limit int
	}{
		{store.RetentionPolicy{Content: -time.Hour}, store.RetentionContent, 0},
		{store.RetentionPolicy{Content: 2 * day, Rows: day}, store.RetentionRows, 0},
		{store.RetentionPolicy{Rows: day}, store.RetentionRows, 0},
		{retain, "everything", 0},
		{retain, store.RetentionContent, store.MaxPurgeLimit + 1},
	} {
		_, err := e.store.PurgeBatch(e.ctx, t0, c.p, c.class, c.limit)
		wantCode(t, err, vocab.CodeInvalidInput)
	}
	if n, err := e.store.PurgeBatch(e.ctx, t0.Add(3650*day), store.RetentionPolicy{}, store.RetentionContent, 0); err != nil || n != 0 {
		t.Fatalf("keep forever purged %d, %v", n, err)
	}
}

// erasedShape is what stays of a message and of what hangs off it, without its keys,
// times and ids: the state an erasure leaves.
func (e *env) erasedShape(messageKey string, windowID int64) string {
	e.t.Helper()
	return e.lines("message: ", `SELECT concat_ws(',', status, payload IS NULL, failure_reason, erased_at IS NOT NULL)
		FROM inbound_messages WHERE message_key = $1`, messageKey) +
		e.lines("attempt: ", `SELECT concat_ws(',', status, payload::text, metadata::text, error_message, fingerprint, erased_at IS NOT NULL)
		FROM send_attempts WHERE source_message_key = $1 ORDER BY send_index`, messageKey) +
		e.lines("held: ", `SELECT concat_ws(',', status, ciphertext IS NULL, fingerprint, drop_reason <> '')
		FROM held_replies WHERE source_message_key = $1 ORDER BY held_seq`, messageKey) +
		e.lines("images: ", `SELECT count(*)::text FROM inbound_images WHERE message_key = $1`, messageKey) +
		e.lines("token: ", `SELECT count(*)::text FROM reply_window_secrets WHERE reply_window_id = $1`, windowID) +
		e.lines("sessions open: ", `SELECT count(*)::text FROM agent_sessions WHERE reply_window_id = $1 AND closed_at IS NULL`, windowID)
}

func TestRetentionErasesAMessagesContentToTheStateStarterForgetLeaves(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, heldLimits(nil))
	forgotten := e.userConversation(e.register(), "forgotten")
	purged := e.userConversation(e.register(), "purged")
	e.forget(store.ForgetInput{PeerID: forgotten.b.owner})
	// Only the purged user's closed window is due; the forgotten user's rows are erased.
	if n := e.purge(t0.Add(time.Hour+retain.Content+time.Second), retain, store.RetentionContent, 0); n != 1 {
		t.Fatalf("erased %d, want the purged user's first message", n)
	}
	want := e.erasedShape(e.messageKeys(forgotten.b)[0], forgotten.windows[0])
	got := e.erasedShape(e.messageKeys(purged.b)[0], purged.windows[0])
	if got != want {
		t.Fatalf("retention left\n%s\nforget left\n%s", got, want)
	}
	// And it is erased: payload NULL, erased_at set.
	if first, _, _ := strings.Cut(got, "\n"); !strings.HasPrefix(first, "message: ") || !strings.HasSuffix(first, ",t") ||
		!strings.Contains(first, ",t,") {
		t.Fatalf("the message is not erased: %s", got)
	}
}

// A batch of settled messages (the steady state: answered, behind a closed window) takes no
// account's lock, so a page commit holding its bot's account lock neither waits for the
// batch nor makes it wait.
func TestAPurgeOfSettledMessagesDoesNotWaitForTheirBotsPageCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, _ := e.deliver(b, "hello")
	key := res.Deliverable.MessageKey
	if _, err := e.store.FinishMessage(e.ctx, t0, key, vocab.MessageHandled, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.ExpireWindow(e.ctx, t0.Add(25*time.Hour), res.Deliverable.ReplyWindowID); err != nil {
		t.Fatal(err)
	}
	// A page commit of the bot under way: it holds the account's row lock.
	tx, err := e.pool.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(e.ctx) }()
	if _, err := tx.Exec(e.ctx, "SELECT 1 FROM accounts WHERE account_key = $1 FOR UPDATE", b.key); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	n, err := e.store.PurgeBatch(ctx, t0.Add(25*time.Hour+retain.Content+time.Second), retain, store.RetentionContent, 0)
	if err != nil {
		t.Fatalf("the purge of a settled message waited for the page commit's account lock: %v", err)
	}
	if n != 1 || !e.erased(key) {
		t.Fatalf("erased %d, message erased %v; want the one settled message", n, e.erased(key))
	}
}
