package store_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func seq(n int64) *int64 { return &n }

// moveCursor commits an empty page: the poller's commit of a long poll that brought no
// message, which only moves the cursor.
func (e *env) moveCursor(key string, generation int32, expected, next string) error {
	_, err := e.store.CommitPage(e.ctx, t0, store.PageInput{AccountKey: key, Generation: generation,
		ExpectedCursor: expected, NextCursor: next})
	return err
}

func TestCursorMovesOnlyByCompareAndSet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	if err := e.moveCursor(b.key, 1, "", "Ck1"); err != nil {
		t.Fatal(err)
	}
	before := e.digest()
	err := e.moveCursor(b.key, 1, "", "Ck2")
	wantCode(t, err, vocab.CodeCursorConflict)
	err = e.moveCursor(b.key, 2, "Ck1", "Ck2")
	wantCode(t, err, vocab.CodeGenerationConflict)
	err = e.moveCursor(store.AccountKey("nobody@im.bot"), 1, "Ck1", "Ck2")
	wantCode(t, err, vocab.CodeAccountNotFound)
	e.unchanged(before)
	if _, err := e.store.PauseAccount(e.ctx, t0, b.key, 1, t0.Add(time.Hour), "test"); err != nil {
		t.Fatal(err)
	}
	// A pause does not stop the page in flight: it is fenced by generation and cursor only.
	if err = e.moveCursor(b.key, 1, "Ck1", "Ck2"); err != nil {
		t.Fatalf("the cursor of a page in flight when the account was paused: %v", err)
	}
	a, err := e.store.GetAccount(e.ctx, b.key)
	if err != nil || a.Cursor != "Ck2" {
		t.Fatalf("cursor %q (%v)", a.Cursor, err)
	}
}

func TestCursorOver256KiBOrWithNULIsInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	before := e.digest()
	for _, bad := range []string{strings.Repeat("C", 256*1024+1), "Ck\x00x", "\xff\xfe"} {
		err := e.moveCursor(b.key, 1, "", bad)
		wantCode(t, err, vocab.CodeInvalidInput)
		_, err = e.store.CommitPage(e.ctx, t0, store.PageInput{AccountKey: b.key, Generation: 1, NextCursor: bad,
			Entries: []store.PageEntry{b.msg("x", t0)}})
		wantCode(t, err, vocab.CodeInvalidInput)
	}
	e.unchanged(before)
	if err := e.moveCursor(b.key, 1, "", strings.Repeat("C", 256*1024)); err != nil {
		t.Fatalf("a 256 KiB cursor is allowed: %v", err)
	}
}

func TestPageEntriesAreValidatedBeforeAnythingIsWritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	cases := []struct {
		name   string
		mutate func(*store.PageEntry)
		code   vocab.Code
	}{
		{"missing context token", func(p *store.PageEntry) { p.ContextToken = sealing.Secret{} }, vocab.CodeInvalidInput},
		{"image attachment without locator", func(p *store.PageEntry) {
			p.Payload.Attachments = []store.Attachment{{Kind: "image", Position: 0}}
		}, vocab.CodeInvalidInput},
		{"locator without image attachment", func(p *store.PageEntry) {
			p.Images = []store.ImageLocator{{Position: 0, Locator: sealing.NewSecret("loc")}}
		}, vocab.CodeInvalidInput},
		{"locator at another position", func(p *store.PageEntry) {
			p.Payload.Attachments = []store.Attachment{{Kind: "image", Position: 0}}
			p.Images = []store.ImageLocator{{Position: 1, Locator: sealing.NewSecret("loc")}}
		}, vocab.CodeInvalidInput},
		{"message of another peer", func(p *store.PageEntry) { p.PeerID = "o9-stranger@im.wechat" }, vocab.CodePairMismatch},
		{"message cursor differs from page cursor", func(p *store.PageEntry) { p.Cursor = "Ck-other" }, vocab.CodeCursorConflict},
		{"negative provider sequence", func(p *store.PageEntry) { p.ProviderSeq = seq(-1) }, vocab.CodeInvalidInput},
		{"empty provider message id", func(p *store.PageEntry) { p.ProviderMessageID = "" }, vocab.CodeInvalidInput},
		{"unbounded provider message id", func(p *store.PageEntry) { p.ProviderMessageID = strings.Repeat("9", 257) }, vocab.CodeInvalidInput},
		{"control character in id", func(p *store.PageEntry) { p.ProviderMessageID = "12\n3" }, vocab.CodeInvalidInput},
		{"sent-at 6 minutes in the future", func(p *store.PageEntry) { p.SentAt = t0.Add(6 * time.Minute) }, vocab.CodeInvalidInput},
		{"unknown attachment kind", func(p *store.PageEntry) { p.Payload.Attachments = []store.Attachment{{Kind: "sticker"}} }, vocab.CodeInvalidInput},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			good := b.msg("first is fine", t0)
			bad := b.msg("second is not", t0)
			c.mutate(&bad)
			before := e.digest()
			_, err := e.store.CommitPage(e.ctx, t0, store.PageInput{AccountKey: b.key, Generation: 1,
				ExpectedCursor: b.cursor, NextCursor: "Ck-next", Entries: []store.PageEntry{good, bad}})
			wantCode(t, err, c.code)
			e.unchanged(before)
		})
	}
	// Within the clock-skew bound, a future sent-at is accepted.
	e.commit(b, t0, b.msg("slightly ahead", t0.Add(4*time.Minute)))
}

func TestDuplicateWithConflictingIdentityIsDedupeInvariant(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	m := b.msg("original", t0)
	e.commit(b, t0, m)
	// The stored identity no longer matches what iLink sends for that id (a corrupted row
	// or a hash collision): the page must fail whole.
	if _, err := e.pool.Exec(e.ctx, "UPDATE inbound_messages SET peer_id = 'o9-corrupted@im.wechat'"); err != nil {
		t.Fatal(err)
	}
	before := e.digest()
	_, err := e.tryCommit(b, t0, b.msg("new one", t0), m)
	wantCode(t, err, vocab.CodeDedupeInvariant)
	e.unchanged(before)

	// A duplicate whose message lost its reply window is refused the same way.
	e2 := newEnv(t)
	b2 := e2.register()
	m2 := b2.msg("original", t0)
	e2.commit(b2, t0, m2)
	if _, err := e2.pool.Exec(e2.ctx, "DELETE FROM reply_window_secrets; DELETE FROM reply_windows"); err != nil {
		t.Fatal(err)
	}
	before = e2.digest()
	_, err = e2.tryCommit(b2, t0, m2)
	wantCode(t, err, vocab.CodeDedupeInvariant)
	e2.unchanged(before)
}

func TestDuplicateEntryIsStoredOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	m := b.msg("hello", t0)
	first := e.commit(b, t0, m)
	copyWithNewToken := m
	copyWithNewToken.ContextToken = sealing.NewSecret("CK-another-token")
	res := e.commit(b, t0, copyWithNewToken, copyWithNewToken)
	if res.Inserted != 0 || res.Duplicates != 2 || res.Deliverable != nil {
		t.Fatalf("duplicates produced %+v", res)
	}
	if n := e.count("SELECT count(*) FROM inbound_messages"); n != 1 {
		t.Fatalf("%d inbox rows, want 1", n)
	}
	// The token a send to the window uses is the first copy's.
	tok := sealing.NewSecret("duplicate-session-token")
	if _, err := e.store.OpenAgentSession(e.ctx, t0, store.OpenSessionInput{ReplyWindowID: first.Deliverable.ReplyWindowID, Token: tok}); err != nil {
		t.Fatal(err)
	}
	p, err := e.store.ReserveAndStart(e.ctx, t0, storeReply(tok, "reply"), store.SendPacing{})
	if err != nil || p.Started == nil || p.Started.ContextToken.Reveal() != m.ContextToken.Reveal() {
		t.Fatalf("duplicate changed the window's token (%v)", err)
	}
}

func TestNewerMessageSupersedesOpenWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	first, tok := e.deliver(b, "one")
	if _, err := e.reserve(t0, storeReply(tok, "pending")); err != nil {
		t.Fatal(err)
	}
	second := e.commit(b, t0.Add(time.Second), b.msg("two", t0.Add(time.Second)))
	if second.Deliverable == nil || len(second.RetiredWindowIDs) != 1 || second.RetiredWindowIDs[0] != first.Deliverable.ReplyWindowID {
		t.Fatalf("second page %+v", second)
	}
	assertRetired(t, e, first.Deliverable.ReplyWindowID, vocab.WindowSuperseded)
	if second.OpenedWindowID != second.Deliverable.ReplyWindowID {
		t.Fatal("the deliverable's window must be the opened one")
	}
}

func TestOlderMessageGetsWindowBornSuperseded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	newer := e.commit(b, t0, b.msg("newer", t0))
	res := e.commit(b, t0, b.msg("older", t0.Add(-time.Minute)))
	if res.Deliverable != nil || res.OpenedWindowID != 0 || len(res.RetiredWindowIDs) != 0 || res.Absorbed != 1 {
		t.Fatalf("older message produced %+v", res)
	}
	open, err := e.store.GetWindow(e.ctx, newer.Deliverable.ReplyWindowID)
	if err != nil || open.State != vocab.WindowOpen {
		t.Fatalf("the newer window must stay open (%v)", err)
	}
	var state string
	var secrets int
	if err := e.pool.QueryRow(e.ctx, `SELECT w.state, (SELECT count(*) FROM reply_window_secrets s WHERE s.reply_window_id = w.reply_window_id)
		FROM reply_windows w JOIN inbound_messages m ON m.message_key = w.source_message_key
		WHERE m.payload IS NULL`).Scan(&state, &secrets); err != nil {
		t.Fatal(err)
	}
	if state != vocab.WindowSuperseded || secrets != 0 {
		t.Fatalf("older message's window is %s with %d secrets, want superseded with none", state, secrets)
	}
}

func TestNewerMeansProviderSeqThenSentAtThenNumericID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	// Provider sequence beats sent-at.
	a := b.msg("seq 5, later clock", t0.Add(time.Minute))
	a.ProviderSeq = seq(5)
	c := b.msg("seq 6, earlier clock", t0)
	c.ProviderSeq = seq(6)
	res := e.commit(b, t0.Add(2*time.Minute), a, c)
	if got := e.deliverableSummary(res); !strings.HasSuffix(got, "seq 6, earlier clock") {
		t.Fatalf("seq 6 must own the window; summary %q", got)
	}
	// Same sent-at, same page, no sequence: higher numeric id wins, whatever the page order.
	hi := b.msg("higher id", t0.Add(time.Hour))
	lo := b.msg("lower id", t0.Add(time.Hour))
	hi.ProviderMessageID, lo.ProviderMessageID = "18446744073709551615", "9223372036854775808"
	res = e.commit(b, t0.Add(time.Hour), hi, lo)
	w, err := e.store.GetWindow(e.ctx, res.Deliverable.ReplyWindowID)
	if err != nil || w.ProviderMessageID != "18446744073709551615" {
		t.Fatalf("window owner %q (%v), want the higher uint64 id", w.ProviderMessageID, err)
	}
}

func (e *env) deliverableSummary(res store.PageResult) string {
	e.t.Helper()
	if res.Deliverable == nil {
		e.t.Fatalf("no deliverable in %+v", res)
	}
	m, err := e.store.GetMessage(e.ctx, res.Deliverable.MessageKey)
	if err != nil {
		e.t.Fatal(err)
	}
	return m.Payload.Summary
}

func TestWindowExpiresAtMinOfSentAtAndNowPlusLifetime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res := e.commit(b, t0, b.msg("sent an hour ago", t0.Add(-time.Hour)))
	w, _ := e.store.GetWindow(e.ctx, res.Deliverable.ReplyWindowID)
	if !w.ExpiresAt.Equal(t0.Add(23 * time.Hour)) {
		t.Fatalf("expires %v, want sent-at + 24h", w.ExpiresAt)
	}
	res = e.commit(b, t0, b.msg("sent in the future", t0.Add(3*time.Minute)))
	w, _ = e.store.GetWindow(e.ctx, res.Deliverable.ReplyWindowID)
	if !w.ExpiresAt.Equal(t0.Add(24 * time.Hour)) {
		t.Fatalf("expires %v, want now + 24h", w.ExpiresAt)
	}
}

func TestOnlyOpenWindowOwnerIsDeliverableAndOthersAreMergedInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	m3 := b.msg("third", t0.Add(3*time.Second))
	m1 := b.msg("first", t0.Add(1*time.Second))
	m2 := b.msg("second", t0.Add(2*time.Second))
	res := e.commit(b, t0.Add(time.Minute), m3, m1, m2)
	if res.Inserted != 3 || res.Absorbed != 2 {
		t.Fatalf("page %+v", res)
	}
	if got := e.deliverableSummary(res); got != "first\nsecond\nthird" {
		t.Fatalf("merged summary %q", got)
	}
	if n := e.count("SELECT count(*) FROM inbound_messages WHERE status = 'absorbed' AND payload IS NULL"); n != 2 {
		t.Fatalf("%d absorbed, want 2", n)
	}
}

func TestBacklogOfUndeliveredMessagesIsMergedIntoTheNewest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	e.commit(b, t0, b.msg("backlog one", t0))
	e.commit(b, t0.Add(time.Second), b.msg("backlog two", t0.Add(time.Second)))
	res := e.commit(b, t0.Add(2*time.Second), b.msg("now", t0.Add(2*time.Second)))
	if got := e.deliverableSummary(res); got != "backlog one\nbacklog two\nnow" {
		// "backlog one" was merged into "backlog two" by the second page; it carries over.
		t.Fatalf("merged summary %q", got)
	}
	if n := e.count("SELECT count(*) FROM inbound_messages WHERE status = 'received'"); n != 1 {
		t.Fatalf("%d messages still received, want only the deliverable", n)
	}
}

func TestMessagesHandedToAnAgentAndAnsweredAreNotMerged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	first, tok := e.deliver(b, "being processed")
	a, err := e.reserve(t0, storeReply(tok, "an answer"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.start(t0, store.ByToken(tok), a.AttemptID); err != nil {
		t.Fatal(err)
	}
	res := e.commit(b, t0.Add(time.Second), b.msg("new", t0.Add(time.Second)))
	if got := e.deliverableSummary(res); got != "new" {
		t.Fatalf("summary %q merged a message the agent already answered", got)
	}
	m, _ := e.store.GetMessage(e.ctx, first.Deliverable.MessageKey)
	if m.Status != vocab.MessageProcessing || m.Payload == nil {
		t.Fatalf("processing message changed: %+v", m)
	}
}

// A status never claims what did not happen: a message handed to an agent whose window a
// newer message supersedes before any reply of it was transmitted can no longer be
// answered (its replies would be refused), so it goes with the next delivery of the
// conversation (absorbed) and cannot be marked handled afterwards.
func TestAHandedOutMessageSupersededBeforeAnyReplyGoesWithTheNextDelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	first, tok := e.deliver(b, "asked first")
	res := e.commit(b, t0.Add(time.Second), b.msg("asked again", t0.Add(time.Second)))
	if got := e.deliverableSummary(res); got != "asked first\nasked again" {
		t.Fatalf("summary %q: the unanswered message must go with the next delivery", got)
	}
	m, _ := e.store.GetMessage(e.ctx, first.Deliverable.MessageKey)
	if m.Status != vocab.MessageAbsorbed {
		t.Fatalf("superseded unanswered message is %s, want absorbed", m.Status)
	}
	_, err := e.store.FinishMessage(e.ctx, t0, first.Deliverable.MessageKey, vocab.MessageHandled, "")
	wantCode(t, err, vocab.CodeAttemptConflict)
	_, err = e.store.ReserveAndStart(e.ctx, t0, storeReply(tok, "too late"), store.SendPacing{})
	wantCode(t, err, vocab.CodeReplyWindowInactive)
}

func withImages(m store.PageEntry, n int) store.PageEntry {
	for i := 0; i < n; i++ {
		m.Payload.Attachments = append(m.Payload.Attachments, store.Attachment{Kind: "image", Position: i})
		m.Images = append(m.Images, store.ImageLocator{Position: int32(i), Locator: sealing.NewSecret(fmt.Sprintf("loc-%s-%d", m.ProviderMessageID, i))})
	}
	return m
}

func TestBacklogMergeOfSixImagesKeepsLatestFourRenumbered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	old := withImages(b.msg("three old images", t0), 3)
	e.commit(b, t0, old)
	mid := withImages(b.msg("two images", t0.Add(time.Second)), 2)
	last := withImages(b.msg("one image", t0.Add(2*time.Second)), 1)
	res := e.commit(b, t0.Add(3*time.Second), mid, last)
	got := e.deliverableSummary(res)
	want := "three old images\ntwo images\none image\n[iLink images: attached the latest 4 of 6]"
	if got != want {
		t.Fatalf("summary %q, want %q", got, want)
	}
	key := res.Deliverable.MessageKey
	if n := e.count("SELECT count(*) FROM inbound_images"); n != 4 {
		t.Fatalf("%d image rows, want 4", n)
	}
	// The deliverable's own image first, then the latest of the rest.
	wantLocators := []string{
		"loc-" + last.ProviderMessageID + "-0",
		"loc-" + mid.ProviderMessageID + "-0",
		"loc-" + mid.ProviderMessageID + "-1",
		"loc-" + old.ProviderMessageID + "-0",
	}
	tok := sealing.NewSecret("backlog-session-token")
	if _, err := e.store.OpenAgentSession(e.ctx, t0, store.OpenSessionInput{ReplyWindowID: res.Deliverable.ReplyWindowID, Token: tok}); err != nil {
		t.Fatal(err)
	}
	for pos, want := range wantLocators {
		loc, err := e.store.GetAttachment(e.ctx, t0, store.ByToken(tok), key, pos)
		if err != nil {
			t.Fatalf("image %d: %v", pos, err)
		}
		if loc.Attachment.Position != pos || loc.Locator.Reveal() != want {
			t.Fatalf("image %d is %q at position %d, want %q", pos, loc.Locator.Reveal(), loc.Attachment.Position, want)
		}
	}
	m, _ := e.store.GetMessage(e.ctx, key)
	if len(m.Payload.Attachments) != 4 || m.Payload.Attachments[3].Position != 3 {
		t.Fatalf("attachments %+v", m.Payload.Attachments)
	}
}

func TestMergedSummaryIsCappedKeepingNewestText(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.MaxMergedSummaryBytes = 1024
	e := newEnvWith(t, limits)
	b := e.register()
	for i := 0; i < 10; i++ {
		at := t0.Add(time.Duration(i) * time.Second)
		e.commit(b, at, b.msg(fmt.Sprintf("msg %d %s", i, strings.Repeat("x", 200)), at))
	}
	var summary string
	if err := e.pool.QueryRow(e.ctx, "SELECT payload->>'summary' FROM inbound_messages WHERE status = 'received'").Scan(&summary); err != nil {
		t.Fatal(err)
	}
	if len(summary) > 1024 || !strings.HasSuffix(summary, "msg 9 "+strings.Repeat("x", 200)) ||
		!strings.HasPrefix(summary, "[ilinkflow: ") || !strings.Contains(summary, "earlier messages left out]") {
		t.Fatalf("capped summary (%d bytes) %q", len(summary), summary)
	}
}

func TestDeferredMessagesAreStoredWindowedCountedNotDeliverable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	cut := t0.Add(-time.Minute)
	m := b.msg("backlog from downtime", t0.Add(-time.Hour))
	m.Cursor = b.cursor
	res, err := e.store.CommitPage(e.ctx, t0, store.PageInput{AccountKey: b.key, Generation: 1, ExpectedCursor: "",
		NextCursor: "Ck1", Entries: []store.PageEntry{m}, DeferredBefore: &cut})
	if err != nil {
		t.Fatal(err)
	}
	b.cursor = "Ck1"
	if res.Deliverable != nil || res.Deferred != 1 || res.Inserted != 1 || res.OpenedWindowID == 0 {
		t.Fatalf("deferred page %+v", res)
	}
	if n := e.count("SELECT count(*) FROM inbound_messages WHERE deferred AND status = 'received'"); n != 1 {
		t.Fatal("deferred message is not stored as deferred")
	}
	w, err := e.store.GetWindow(e.ctx, res.OpenedWindowID)
	if err != nil || w.State != vocab.WindowOpen {
		t.Fatalf("deferred message must still own a window (%v)", err)
	}
}

// The commit and the open-window listing describe a window the same way (one rule for
// "deliverable"): a message awaiting an agent is deliverable; a deferred one, or one an
// agent finished, is not.
func TestOpenedWindowsAreDeliverableOnlyWhileTheirMessageAwaitsAnAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	awaiting, deferred, finished := e.register(), e.register(), e.register()
	listed := func() map[string]store.OpenedWindow {
		t.Helper()
		ws, err := e.store.ListOpenWindows(e.ctx, "", time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]store.OpenedWindow{}
		for _, w := range ws {
			out[w.AccountKey] = w
		}
		return out
	}
	res := e.commit(awaiting, t0, awaiting.msg("hello", t0))
	if o := res.Opened; o == nil || !o.Deliverable || o.ReplyWindowID != res.Deliverable.ReplyWindowID ||
		!o.ExpiresAt.Equal(t0.Add(24*time.Hour)) || o.MaxSends != 10 || o.SendsUsed != 0 || o.MessageKey != res.Deliverable.MessageKey {
		t.Fatalf("opened %+v for %+v", res.Opened, res)
	}
	cutoff := t0.Add(time.Minute)
	deferredRes, err := e.store.CommitPage(e.ctx, t0, store.PageInput{AccountKey: deferred.key, Generation: deferred.generation,
		ExpectedCursor: "", NextCursor: "c1", Entries: []store.PageEntry{deferred.msg("old", t0)}, DeferredBefore: &cutoff})
	if err != nil || deferredRes.Opened == nil || deferredRes.Opened.Deliverable || deferredRes.Deliverable != nil {
		t.Fatalf("deferred page %+v %v", deferredRes, err)
	}
	fin, _ := e.deliver(finished, "done soon")
	if _, err := e.store.FinishMessage(e.ctx, t0, fin.Deliverable.MessageKey, vocab.MessageHandled, ""); err != nil {
		t.Fatal(err)
	}
	got := listed()
	committed := *res.Opened
	if w := got[awaiting.key]; !w.ExpiresAt.Equal(committed.ExpiresAt) || func() bool { w.ExpiresAt = committed.ExpiresAt; return w != committed }() {
		t.Errorf("awaiting: listed %+v, committed %+v", w, *res.Opened)
	}
	if w := got[deferred.key]; w.ReplyWindowID == 0 || w.Deliverable {
		t.Errorf("deferred: listed %+v", w)
	}
	if w := got[finished.key]; w.ReplyWindowID == 0 || w.Deliverable {
		t.Errorf("finished: listed %+v", w)
	}
}

// A page's messages take their inbox sequences, and their windows their ids, in the order
// iLink handed the page out (not by key, provider order or time), and each window records
// its message's inbox sequence.
func TestPageMessagesTakeInboxSequencesAndWindowIDsInPageOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	var entries []store.PageEntry
	for i := range 10 {
		entries = append(entries, b.msg("page message "+strconv.Itoa(i), t0.Add(time.Duration(10-i)*time.Second)))
	}
	slices.Reverse(entries[3:7]) // page order is neither provider order nor time order
	var want strings.Builder
	for _, m := range entries {
		want.WriteString(m.ProviderMessageID + "\n")
	}
	if res := e.commit(b, t0.Add(time.Minute), entries...); res.Inserted != len(entries) {
		t.Fatalf("page %+v", res)
	}
	if got := e.lines("", `SELECT provider_message_id FROM inbound_messages WHERE account_key = $1 ORDER BY inbox_seq`, b.key); got != want.String() {
		t.Fatalf("inbox order:\n%s\nwant page order:\n%s", got, want.String())
	}
	if got := e.lines("", `SELECT provider_message_id FROM reply_windows WHERE account_key = $1 ORDER BY reply_window_id`, b.key); got != want.String() {
		t.Fatalf("window order:\n%s\nwant page order:\n%s", got, want.String())
	}
	if n := e.count(`SELECT count(*) FROM reply_windows AS w JOIN inbound_messages AS m ON m.message_key = w.source_message_key
		WHERE w.account_key = $1 AND w.source_inbox_seq = m.inbox_seq`, b.key); n != len(entries) {
		t.Fatalf("%d of %d windows record their message's inbox sequence", n, len(entries))
	}
}
