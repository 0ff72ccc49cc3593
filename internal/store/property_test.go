package store_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// propSeeds are the seeds of the property test; the first is the base seed. A failure
// names its seed (sub-test name and message) and the step, so it can be replayed.
var propSeeds = []uint64{20261130, 1, 7, 424242}

// propPagesPerSeed keeps the whole property test around 200 pages.
const propPagesPerSeed = 50

// propBots is how many accounts each seed drives (pages interleave between them).
const propBots = 3

type propSession struct {
	tok        sealing.Secret
	windowID   int64
	messageKey string
	finished   bool
}

type propPending struct {
	attemptID string
	session   *propSession
}

type propBot struct {
	*bot
	ids     []string // every provider message id committed, in commit order
	known   map[string]bool
	seqBase int64
}

// propOrder is what the store orders messages of a conversation by
// (docs/architecture.md#which-message-is-newer).
type propOrder struct {
	id     string
	seq    *int64
	sentAt time.Time
	step   int // the page it came in
}

// propNewer is the rule of docs/architecture.md#which-message-is-newer, written
// independently of the store: higher provider sequence when both have one, else later
// sent-at, else (same page) higher numeric message id.
func propNewer(c, o *propOrder) bool {
	if c.seq != nil && o.seq != nil && *c.seq != *o.seq {
		return *c.seq > *o.seq
	}
	if !c.sentAt.Equal(o.sentAt) {
		return c.sentAt.After(o.sentAt)
	}
	// Equal sent-at: when exactly one of the two has a sequence, the later position in the
	// same page wins (and an earlier page's window stays); otherwise the higher numeric id
	// wins, across pages too (iLink ids grow). This is the seed store's rule.
	if (c.seq == nil) != (o.seq == nil) {
		return c.step == o.step
	}
	if len(c.id) != len(o.id) {
		return len(c.id) > len(o.id)
	}
	return c.id > o.id
}

// propRun is the state of one seed's run: the model the invariants are checked against.
type propRun struct {
	t        *testing.T
	e        *env
	seed     uint64
	r        *rand.Rand
	step     int
	now      time.Time
	bots     []*propBot
	sessions []*propSession
	pending  []propPending
	finished map[string]bool // message keys the test finished (handled/failed)
	lastPage string          // description of the last page, for failure reports
	// what the run exercised, for the coverage log
	inserted, duplicates, deferred, deferredOpen, refusedPages int
}

func (p *propRun) fatalf(format string, args ...any) {
	p.t.Helper()
	p.t.Fatalf("seed=%d step=%d: %s\nlast page: %s", p.seed, p.step, fmt.Sprintf(format, args...), p.lastPage)
}

// TestPropertyPageCommitKeepsInvariants commits random pages (new messages, duplicates of
// earlier ids, out-of-order sent-at and provider sequences, images, deferred backlog) and
// random reply traffic (sessions, reservations, releases, sends, finishes) and checks the
// data-model invariants (docs/architecture.md#data-model, #store-rules) in SQL after
// every page.
func TestPropertyPageCommitKeepsInvariants(t *testing.T) {
	t.Parallel()
	for _, seed := range propSeeds {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			p := &propRun{t: t, e: newEnv(t), seed: seed, r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
				now: t0, finished: map[string]bool{}}
			for i := 0; i < propBots; i++ {
				p.bots = append(p.bots, &propBot{bot: p.e.register(), known: map[string]bool{}})
			}
			p.check()
			for p.step = 1; p.step <= propPagesPerSeed; p.step++ {
				p.now = p.now.Add(30 * time.Second)
				b := p.bots[p.r.IntN(len(p.bots))]
				switch x := p.r.Float64(); {
				case x < 0.05:
					p.failedPageWritesNothing(b)
				case x < 0.08:
					p.staleCursorWritesNothing(b)
				}
				p.commitRandomPage(b)
				p.replyTraffic()
				p.check()
			}
			p.logCoverage()
		})
	}
}

// TestPropertyNewerMessageFollowsTheOrderRule: the open window of a conversation belongs
// to the message that the order rule (docs/architecture.md#which-message-is-newer) makes
// newest, applied to each new message in page order against the open window: "higher provider sequence when both have one,
// else later sent-at, else (same page) higher numeric message id". Two minimal cases pin
// the tie-breaks; random pages on a coarse clock (many ties, mixed sequence presence)
// compare the store with that rule written independently (propNewer).
func TestPropertyNewerMessageFollowsTheOrderRule(t *testing.T) {
	t.Parallel()
	t.Run("tie across pages goes to the higher numeric id", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		b := e.register()
		e.commit(b, t0, b.msg("first", t0))
		second := b.msg("same sent-at, next page, higher id", t0)
		e.commit(b, t0, second)
		propWantOpenOwner(t, e, b, second.ProviderMessageID, "equal sent-at, no sequence: the higher numeric id is newer, across pages too")
	})
	t.Run("mixed sequence tie goes to the later position of the same page", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		b := e.register()
		lo := b.msg("sequence 3, lower id", t0)
		lo.ProviderSeq = propSeq(3)
		hi := b.msg("no sequence, higher id", t0)
		e.commit(b, t0, hi, lo)
		propWantOpenOwner(t, e, b, lo.ProviderMessageID, "only one has a sequence, same sent-at, same page: the later entry is newer")
		other := b.msg("no sequence, next page", t0)
		e.commit(b, t0, other)
		propWantOpenOwner(t, e, b, lo.ProviderMessageID, "only one has a sequence, same sent-at, earlier page: the open window stays")
	})
	for _, seed := range propSeeds {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(seed, 0x5eed))
			e := newEnv(t)
			b := e.register()
			var open *propOrder
			for step := 1; step <= 40; step++ {
				now := t0.Add(time.Duration(step) * time.Minute)
				var entries []store.PageEntry
				for n := 1 + r.IntN(4); n > 0; n-- {
					b.nextID += int64(r.IntN(3))
					m := b.msg("m", t0.Add(time.Duration(step/3+r.IntN(3))*time.Minute))
					if r.IntN(2) == 0 {
						m.ProviderSeq = propSeq(int64(step + r.IntN(4)))
					}
					entries = append(entries, m)
				}
				r.Shuffle(len(entries), func(i, j int) { entries[i], entries[j] = entries[j], entries[i] })
				before := open
				for _, en := range entries {
					c := &propOrder{id: en.ProviderMessageID, seq: en.ProviderSeq, sentAt: en.SentAt, step: step}
					if open == nil || propNewer(c, open) {
						open = c
					}
				}
				desc := propDescribe(&propBot{bot: b, known: map[string]bool{}}, entries, nil)
				e.commit(b, now, entries...)
				var got string
				if err := e.pool.QueryRow(e.ctx, `SELECT provider_message_id FROM reply_windows WHERE account_key = $1 AND state = 'open'`,
					b.key).Scan(&got); err != nil {
					t.Fatalf("seed=%d step=%d: open window: %v", seed, step, err)
				}
				if got != open.id {
					t.Fatalf("seed=%d step=%d: open window belongs to %s, the order rule says %s (open before the page: %s)\npage: %s",
						seed, step, got, propOrderString(open), propOrderString(before), desc)
				}
			}
		})
	}
}

func propSeq(n int64) *int64 { return &n }

// propWantOpenOwner fails unless the bot's conversation has exactly one open window and
// it belongs to the given provider message id.
func propWantOpenOwner(t *testing.T, e *env, b *bot, id, rule string) {
	t.Helper()
	var got string
	if err := e.pool.QueryRow(e.ctx, `SELECT provider_message_id FROM reply_windows WHERE account_key = $1 AND state = 'open'`,
		b.key).Scan(&got); err != nil {
		t.Fatalf("open window: %v", err)
	}
	if got != id {
		t.Fatalf("open window belongs to %s, want %s (%s)", got, id, rule)
	}
}

// propEntry builds a new message entry with random sent-at, provider sequence and images.
func (p *propRun) propEntry(b *propBot) store.PageEntry {
	b.nextID += int64(p.r.IntN(3)) // gaps in the numeric ids
	// sent-at within the last 10 minutes on a 30 s grid: ties and reordering are common.
	m := b.msg("m"+strconv.Itoa(p.step)+"-"+strconv.FormatInt(b.nextID%100000, 10), p.now.Add(-time.Duration(p.r.IntN(21))*30*time.Second))
	if p.r.Float64() < 0.1 { // a sender clock slightly ahead (within the allowed skew)
		m.SentAt = p.now.Add(time.Duration(1+p.r.IntN(9)) * 30 * time.Second)
	}
	if p.r.Float64() < 0.6 {
		s := b.seqBase + int64(p.r.IntN(8)) - 3
		if s < 0 {
			s = 0
		}
		m.ProviderSeq = &s
	}
	if p.r.Float64() < 0.3 {
		positions := p.r.Perm(8)[:1+p.r.IntN(3)]
		for _, pos := range positions {
			m.Payload.Attachments = append(m.Payload.Attachments, store.Attachment{Kind: "image", Position: pos})
			m.Images = append(m.Images, store.ImageLocator{Position: int32(pos),
				Locator: sealing.NewSecret(fmt.Sprintf("cdn-%s-%d", m.ProviderMessageID, pos))})
		}
	}
	if p.r.Float64() < 0.15 {
		m.Payload.Attachments = append(m.Payload.Attachments, store.Attachment{Kind: "file", Name: "report.pdf", Size: 1234})
	}
	return m
}

func (p *propRun) commitRandomPage(b *propBot) {
	n := p.r.IntN(7) // 0..6 entries; empty pages happen too
	var entries []store.PageEntry
	newIDs := map[string]bool{}
	for len(entries) < n {
		switch x := p.r.Float64(); {
		case x < 0.2 && len(b.ids) > 0: // duplicate of an earlier page's message (same peer)
			id := b.ids[p.r.IntN(len(b.ids))]
			entries = append(entries, store.PageEntry{ProviderMessageID: id, PeerID: b.owner,
				SentAt: p.now.Add(-time.Hour), ContextToken: sealing.NewSecret("CKdup-" + id), Payload: store.Payload{Summary: "dup"}})
		case x < 0.27 && len(entries) > 0: // duplicate inside the same page
			dup := entries[p.r.IntN(len(entries))]
			dup.Images, dup.Payload = nil, store.Payload{Summary: "dup in page"}
			entries = append(entries, dup)
		default:
			m := p.propEntry(b)
			newIDs[m.ProviderMessageID] = true
			entries = append(entries, m)
		}
	}
	p.r.Shuffle(len(entries), func(i, j int) { entries[i], entries[j] = entries[j], entries[i] })
	b.seqBase += int64(n)

	var deferredBefore *time.Time
	if p.r.Float64() < 0.15 {
		d := p.now.Add(-time.Duration(p.r.IntN(21)) * 30 * time.Second)
		deferredBefore = &d
	}
	wantDeferred := 0
	counted := map[string]bool{}
	for _, en := range entries {
		if newIDs[en.ProviderMessageID] && !counted[en.ProviderMessageID] {
			counted[en.ProviderMessageID] = true
			if deferredBefore != nil && en.SentAt.Before(*deferredBefore) {
				wantDeferred++
			}
		}
	}
	p.lastPage = propDescribe(b, entries, deferredBefore)

	absorbedBefore := p.e.count(`SELECT count(*) FROM inbound_messages WHERE account_key = $1 AND status = 'absorbed'`, b.key)
	for i := range entries {
		entries[i].Cursor = b.cursor
	}
	next := b.cursor + "Ck" + strconv.Itoa(p.step)
	res, err := p.e.store.CommitPage(p.e.ctx, p.now, store.PageInput{
		AccountKey: b.key, Generation: b.generation, ExpectedCursor: b.cursor, NextCursor: next,
		Entries: entries, DeferredBefore: deferredBefore,
	})
	if err != nil {
		p.fatalf("commit page: %v", err)
	}
	b.cursor = next
	p.inserted += res.Inserted
	p.duplicates += res.Duplicates
	p.deferred += res.Deferred
	if res.OpenedWindowID != 0 && res.Deliverable == nil {
		p.deferredOpen++
	}
	for id := range newIDs {
		b.ids = append(b.ids, id)
		b.known[id] = true
	}
	slices.Sort(b.ids[len(b.ids)-len(newIDs):]) // map order must not leak into the replay

	// Result counters.
	if res.Inserted+res.Duplicates != len(entries) {
		p.fatalf("Inserted %d + Duplicates %d != %d entries", res.Inserted, res.Duplicates, len(entries))
	}
	if res.Inserted != len(newIDs) {
		p.fatalf("Inserted %d, want %d new ids", res.Inserted, len(newIDs))
	}
	if res.Deferred != wantDeferred {
		p.fatalf("Deferred %d, want %d", res.Deferred, wantDeferred)
	}
	if res.Cursor != next {
		p.fatalf("result cursor %q, want %q", res.Cursor, next)
	}
	absorbedAfter := p.e.count(`SELECT count(*) FROM inbound_messages WHERE account_key = $1 AND status = 'absorbed'`, b.key)
	if absorbedAfter-absorbedBefore != res.Absorbed {
		p.fatalf("Absorbed %d, but %d messages became absorbed", res.Absorbed, absorbedAfter-absorbedBefore)
	}
	if res.Deliverable != nil {
		if res.OpenedWindowID != res.Deliverable.ReplyWindowID {
			p.fatalf("deliverable window %d but opened window %d", res.Deliverable.ReplyWindowID, res.OpenedWindowID)
		}
		if n := p.e.count(`SELECT count(*) FROM inbound_messages m JOIN reply_windows w ON w.source_message_key = m.message_key
			WHERE m.message_key = $1 AND w.reply_window_id = $2 AND w.state = 'open' AND m.status = 'received' AND NOT m.deferred
			AND m.provider_message_id = ANY($3)`, res.Deliverable.MessageKey, res.Deliverable.ReplyWindowID, propKeys(newIDs)); n != 1 {
			p.fatalf("deliverable %+v is not a new, received, undeferred message owning its open window", *res.Deliverable)
		}
	}
	if res.OpenedWindowID != 0 {
		if n := p.e.count(`SELECT count(*) FROM reply_windows WHERE reply_window_id = $1 AND state = 'open' AND provider_message_id = ANY($2)`,
			res.OpenedWindowID, propKeys(newIDs)); n != 1 {
			p.fatalf("opened window %d is not an open window of this page", res.OpenedWindowID)
		}
	} else if n := p.e.count(`SELECT count(*) FROM reply_windows WHERE account_key = $1 AND state = 'open' AND provider_message_id = ANY($2)`,
		b.key, propKeys(newIDs)); n != 0 {
		p.fatalf("the page left a window of its own open but reported none")
	}
	for _, id := range res.RetiredWindowIDs {
		if n := p.e.count(`SELECT count(*) FROM reply_windows WHERE reply_window_id = $1 AND state = 'superseded' AND NOT (provider_message_id = ANY($2))`,
			id, propKeys(newIDs)); n != 1 {
			p.fatalf("retired window %d is not a superseded window of an earlier page", id)
		}
	}

	if res.Deliverable != nil && p.r.Float64() < 0.5 {
		s := &propSession{tok: sealing.NewSecret(fmt.Sprintf("prop-session-%d-%d-%s", p.seed, p.step, b.key)),
			windowID: res.Deliverable.ReplyWindowID, messageKey: res.Deliverable.MessageKey}
		if _, err := p.e.store.OpenAgentSession(p.e.ctx, p.now, store.OpenSessionInput{ReplyWindowID: s.windowID, Token: s.tok}); err != nil {
			p.fatalf("open session on the deliverable window: %v", err)
		}
		p.sessions = append(p.sessions, s)
	}
}

// replyTraffic reserves, releases, sends and finishes at random through the sessions
// opened so far (many of them on windows that later pages retired).
func (p *propRun) replyTraffic() {
	if len(p.sessions) > 0 && p.r.Float64() < 0.6 {
		s := p.sessions[p.r.IntN(len(p.sessions))]
		for k := 1 + p.r.IntN(3); k > 0; k-- {
			a, err := p.e.reserve(p.now, storeReply(s.tok, "reply at step "+strconv.Itoa(p.step)))
			switch store.CodeOf(err) {
			case "":
				p.pending = append(p.pending, propPending{attemptID: a.AttemptID, session: s})
			case vocab.CodeInvalidAgentSession, vocab.CodeReplyWindowInactive, vocab.CodeReplyQuotaExhausted:
			default:
				p.fatalf("reserve: unexpected error %v", err)
			}
		}
	}
	if len(p.pending) > 0 && p.r.Float64() < 0.3 {
		i := p.r.IntN(len(p.pending))
		if _, err := p.e.store.ReleaseSend(p.e.ctx, p.now, p.pending[i].attemptID, "prop_release"); err != nil {
			p.fatalf("release: %v", err)
		}
		p.pending = slices.Delete(p.pending, i, i+1)
	}
	if len(p.pending) > 0 && p.r.Float64() < 0.4 {
		i := p.r.IntN(len(p.pending))
		pa := p.pending[i]
		p.pending = slices.Delete(p.pending, i, i+1)
		st, err := p.e.start(p.now, store.ByToken(pa.session.tok), pa.attemptID)
		switch store.CodeOf(err) {
		case "":
			if st.Started == nil {
				p.fatalf("start: %s did not start: %+v", pa.attemptID, st)
			}
			outcomes := []store.Completion{
				{Status: vocab.AttemptSent, ProviderMessageID: "pm-" + pa.attemptID},
				{Status: vocab.AttemptFailed, FailType: vocab.FailTransport, ErrorCode: "dial"},
				{Status: vocab.AttemptFailed, FailType: vocab.FailRejected, ErrorCode: "ret-2"},
				{Status: vocab.AttemptUnknown},
			}
			c := outcomes[p.r.IntN(len(outcomes))]
			c.AttemptID = pa.attemptID
			if _, err := p.e.store.CompleteSend(p.e.ctx, p.now, c); err != nil {
				p.fatalf("complete %s: %v", c.Status, err)
			}
		case vocab.CodeInvalidAgentSession, vocab.CodeReplyWindowInactive:
		default:
			p.fatalf("start: unexpected error %v", err)
		}
	}
	if len(p.sessions) > 0 && p.r.Float64() < 0.08 {
		s := p.sessions[p.r.IntN(len(p.sessions))]
		if !s.finished {
			status := vocab.MessageHandled
			if p.r.IntN(2) == 0 {
				status = vocab.MessageFailed
			}
			if _, err := p.e.store.FinishMessage(p.e.ctx, p.now, s.messageKey, status, "prop"); err != nil {
				// A handed-out message whose window a newer message superseded before any
				// reply was transmitted went into the next delivery: it cannot be finished.
				m, gerr := p.e.store.GetMessage(p.e.ctx, s.messageKey)
				if store.CodeOf(err) != vocab.CodeAttemptConflict || gerr != nil || m.Status != vocab.MessageAbsorbed {
					p.fatalf("finish %s: %v", status, err)
				}
			}
			s.finished = true
			p.finished[s.messageKey] = true
		}
	}
}

// failedPageWritesNothing commits a page whose last entry is invalid: nothing is written.
func (p *propRun) failedPageWritesNothing(b *propBot) {
	p.lastPage = "(refused) page whose second entry has an image locator at 999 without an attachment"
	before := p.e.digest()
	good := p.propEntry(b)
	bad := p.propEntry(b)
	bad.Images = append(bad.Images, store.ImageLocator{Position: 999, Locator: sealing.NewSecret("orphan")})
	cursor := b.cursor
	_, err := p.e.tryCommit(b.bot, p.now, good, bad)
	if store.CodeOf(err) != vocab.CodeInvalidInput || b.cursor != cursor {
		p.fatalf("page with an inconsistent image locator: got %v, want %s", err, vocab.CodeInvalidInput)
	}
	p.e.unchanged(before)
	p.refusedPages++
}

// staleCursorWritesNothing commits a page fetched with an old cursor: cursor_conflict.
func (p *propRun) staleCursorWritesNothing(b *propBot) {
	p.lastPage = "(refused) page fetched with a stale cursor"
	before := p.e.digest()
	m := p.propEntry(b)
	m.Cursor = b.cursor + "-stale"
	_, err := p.e.store.CommitPage(p.e.ctx, p.now, store.PageInput{AccountKey: b.key, Generation: b.generation,
		ExpectedCursor: m.Cursor, NextCursor: "elsewhere", Entries: []store.PageEntry{m}})
	if store.CodeOf(err) != vocab.CodeCursorConflict {
		p.fatalf("page with a stale cursor: got %v, want %s", err, vocab.CodeCursorConflict)
	}
	p.e.unchanged(before)
	p.refusedPages++
}

// check verifies every invariant of the schema with SQL.
func (p *propRun) check() {
	p.t.Helper()
	e := p.e
	// One open window per (account, peer).
	if n := e.count(`SELECT count(*) FROM (SELECT 1 FROM reply_windows WHERE state = 'open'
		GROUP BY account_key, peer_id HAVING count(*) > 1) x`); n != 0 {
		p.fatalf("%d conversations have more than one open window", n)
	}
	// Window counters within bounds.
	if n := e.count(`SELECT count(*) FROM reply_windows WHERE reserved < 0 OR transmitted < 0
		OR reserved + transmitted > max_sends OR reserved + transmitted > next_send_index`); n != 0 {
		p.fatalf("%d windows have counters out of bounds", n)
	}
	// Counters match the attempts: reserved = pending attempts; transmitted = started
	// attempts whose request may have left (a transport failure gives the send back).
	if n := e.count(`SELECT count(*) FROM reply_windows w WHERE
		w.reserved <> (SELECT count(*) FROM send_attempts a WHERE a.reply_window_id = w.reply_window_id AND a.status = 'pending')
		OR w.transmitted <> (SELECT count(*) FROM send_attempts a WHERE a.reply_window_id = w.reply_window_id
			AND (a.status IN ('sending', 'sent', 'unknown') OR (a.status = 'failed' AND a.fail_type IN ('rejected', 'throttled', 'stale_token'))))`); n != 0 {
		p.fatalf("%d windows have counters that disagree with their attempts", n)
	}
	if n := e.count(`SELECT count(*) FROM send_attempts a JOIN reply_windows w USING (reply_window_id)
		WHERE a.status = 'pending' AND w.state <> 'open'`); n != 0 {
		p.fatalf("%d pending attempts belong to retired windows", n)
	}
	// Secrets only while open, and always while open.
	if n := e.count(`SELECT count(*) FROM reply_window_secrets s JOIN reply_windows w USING (reply_window_id) WHERE w.state <> 'open'`); n != 0 {
		p.fatalf("%d retired windows still hold a context token", n)
	}
	if n := e.count(`SELECT count(*) FROM reply_windows w WHERE w.state = 'open'
		AND NOT EXISTS (SELECT 1 FROM reply_window_secrets s WHERE s.reply_window_id = w.reply_window_id)`); n != 0 {
		p.fatalf("%d open windows have no context token", n)
	}
	// Sessions close when their window retires.
	if n := e.count(`SELECT count(*) FROM agent_sessions s JOIN reply_windows w USING (reply_window_id)
		WHERE s.closed_at IS NULL AND w.state <> 'open'`); n != 0 {
		p.fatalf("%d open sessions belong to retired windows", n)
	}
	// Expiry is min(sent-at, now) + lifetime.
	if n := e.count(`SELECT count(*) FROM reply_windows WHERE expires_at <> least(issued_at, created_at) + interval '24 hours'`); n != 0 {
		p.fatalf("%d windows have an expiry other than min(sent-at, now) + 24h", n)
	}
	// Every message has exactly one window, every image its message.
	if n := e.count(`SELECT count(*) FROM inbound_messages m WHERE
		(SELECT count(*) FROM reply_windows w WHERE w.source_message_key = m.message_key) <> 1`); n != 0 {
		p.fatalf("%d messages do not have exactly one reply window", n)
	}
	if n := e.count(`SELECT count(*) FROM inbound_images i LEFT JOIN inbound_messages m USING (message_key) WHERE m.message_key IS NULL`); n != 0 {
		p.fatalf("%d image rows have no message", n)
	}
	// The inbox holds exactly the ids the test committed, once each, and the cursor moved.
	for _, b := range p.bots {
		var ids []string
		rows, err := e.pool.Query(e.ctx, `SELECT provider_message_id FROM inbound_messages WHERE account_key = $1 ORDER BY 1`, b.key)
		if err != nil {
			p.fatalf("list inbox: %v", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				p.fatalf("scan: %v", err)
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			p.fatalf("list inbox: %v", err)
		}
		want := slices.Sorted(func(yield func(string) bool) {
			for id := range b.known {
				if !yield(id) {
					return
				}
			}
		})
		if !slices.Equal(ids, want) {
			p.fatalf("inbox of %s holds %d ids %v, want %d ids %v", b.key, len(ids), ids, len(want), want)
		}
		if n := e.count(`SELECT count(*) FROM accounts WHERE account_key = $1 AND cursor = $2`, b.key, b.cursor); n != 1 {
			p.fatalf("cursor of %s is not %q", b.key, b.cursor)
		}
	}
	// Every message is deliverable (received/processing owning its open window),
	// absorbed, deferred, or finished by the test; payload and images agree.
	rows, err := e.pool.Query(e.ctx, `SELECT m.message_key, m.provider_message_id, m.status, m.deferred, m.payload, w.state,
		(SELECT count(*) FROM agent_sessions s WHERE s.reply_window_id = w.reply_window_id AND s.closed_at IS NULL),
		COALESCE((SELECT array_agg(i.position ORDER BY i.position) FROM inbound_images i WHERE i.message_key = m.message_key), '{}')
		FROM inbound_messages m JOIN reply_windows w ON w.source_message_key = m.message_key ORDER BY m.inbox_seq`)
	if err != nil {
		p.fatalf("list messages: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var key, id, status, state string
		var deferred bool
		var payload []byte
		var openSessions int
		var images []int32
		if err := rows.Scan(&key, &id, &status, &deferred, &payload, &state, &openSessions, &images); err != nil {
			p.fatalf("scan message: %v", err)
		}
		who := fmt.Sprintf("message %s (id %s, %s, deferred=%v, window %s)", key, id, status, deferred, state)
		switch status {
		case vocab.MessageReceived:
			if state != vocab.WindowOpen {
				p.fatalf("%s: an undelivered message must own the open window or be absorbed", who)
			}
		case vocab.MessageProcessing:
			// Handed to an agent: deliverable while its window is open; once a newer
			// message retired the window it stays the agent's, with its sessions closed.
			if state != vocab.WindowOpen && openSessions != 0 {
				p.fatalf("%s: %d sessions still open", who, openSessions)
			}
		case vocab.MessageAbsorbed:
			if payload != nil || deferred || len(images) != 0 {
				p.fatalf("%s: absorbed message keeps payload=%v deferred=%v images=%v", who, payload != nil, deferred, images)
			}
			if state == vocab.WindowOpen {
				p.fatalf("%s: absorbed message owns the open window", who)
			}
		case vocab.MessageHandled, vocab.MessageFailed:
			if !p.finished[key] {
				p.fatalf("%s: finished without the test finishing it", who)
			}
		default:
			p.fatalf("%s: unknown status", who)
		}
		if deferred && status != vocab.MessageReceived {
			p.fatalf("%s: only an undispatched message is deferred", who)
		}
		if status == vocab.MessageAbsorbed {
			continue
		}
		var pl store.Payload
		if err := json.Unmarshal(payload, &pl); err != nil {
			p.fatalf("%s: payload does not decode: %v", who, err)
		}
		var attached []int32
		for _, a := range pl.Attachments {
			if a.Kind == "image" {
				attached = append(attached, int32(a.Position))
			}
		}
		slices.Sort(attached)
		if !slices.Equal(attached, images) {
			p.fatalf("%s: image attachments at %v but image rows at %v", who, attached, images)
		}
		if len(images) > 4 {
			p.fatalf("%s: keeps %d images, at most 4", who, len(images))
		}
	}
	if err := rows.Err(); err != nil {
		p.fatalf("list messages: %v", err)
	}
}

// logCoverage logs what the run exercised, so a run that stopped exercising a rule shows.
func (p *propRun) logCoverage() {
	e := p.e
	var sb strings.Builder
	for _, q := range []struct{ label, sql string }{
		{"messages by status", `SELECT status || '=' || count(*) FROM inbound_messages GROUP BY status ORDER BY status`},
		{"deferred", `SELECT 'deferred=' || count(*) FROM inbound_messages WHERE deferred`},
		{"merged", `SELECT 'merged=' || count(*) FROM inbound_messages WHERE (payload->>'merged')::int > 1`},
		{"windows by state", `SELECT state || '=' || count(*) FROM reply_windows GROUP BY state ORDER BY state`},
		{"attempts by status", `SELECT status || fail_type || '=' || count(*) FROM send_attempts GROUP BY status, fail_type ORDER BY 1`},
		{"images", `SELECT 'images=' || count(*) FROM inbound_images`},
		{"sessions", `SELECT 'sessions=' || count(*) || ' open=' || count(*) FILTER (WHERE closed_at IS NULL) FROM agent_sessions`},
	} {
		rows, err := e.pool.Query(e.ctx, q.sql)
		if err != nil {
			p.fatalf("coverage %s: %v", q.label, err)
		}
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				p.fatalf("coverage %s: %v", q.label, err)
			}
			sb.WriteString(" " + v)
		}
		rows.Close()
	}
	p.t.Logf("seed=%d: %d pages (+%d refused): inserted=%d duplicates=%d deferred=%d deferred-window-owner=%d; end state:%s",
		p.seed, propPagesPerSeed, p.refusedPages, p.inserted, p.duplicates, p.deferred, p.deferredOpen, sb.String())
}

func propOrderString(o *propOrder) string {
	if o == nil {
		return "none"
	}
	seq := "-"
	if o.seq != nil {
		seq = strconv.FormatInt(*o.seq, 10)
	}
	return fmt.Sprintf("id=%s seq=%s sent=%s step=%d", o.id, seq, o.sentAt.Format("15:04:05"), o.step)
}

func propKeys(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func propDescribe(b *propBot, entries []store.PageEntry, deferredBefore *time.Time) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "account %s", b.key)
	if deferredBefore != nil {
		fmt.Fprintf(&sb, " deferred_before=%s", deferredBefore.Format("15:04:05"))
	}
	for _, en := range entries {
		seq := "-"
		if en.ProviderSeq != nil {
			seq = strconv.FormatInt(*en.ProviderSeq, 10)
		}
		fmt.Fprintf(&sb, "\n  id=%s seq=%s sent=%s images=%d dup=%v", en.ProviderMessageID, seq,
			en.SentAt.Format("15:04:05"), len(en.Images), b.known[en.ProviderMessageID])
	}
	return sb.String()
}
