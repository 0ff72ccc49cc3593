package e2e_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// heldCrashAssertInbox is crashAssertInbox per bot: every message the simulator handed out is
// in the inbox exactly once, except the messages of the last getupdates response a killed
// process's poller of that bot received (iLink never replays them); each response is
// committed whole or not at all. It returns the excused messages.
func heldCrashAssertInbox(t *testing.T, convs []*heldCrashConv, inbox map[string]string, p *heldCrashPages, killed map[int]bool) (excused []uint64) {
	t.Helper()
	injected := map[string]bool{}
	var missing []string
	for _, c := range convs {
		for _, m := range c.msgs {
			id := strconv.FormatUint(m.MessageID, 10)
			injected[id] = true
			if _, ok := inbox[id]; ok {
				continue
			}
			page, ok := p.pageOf(m.MessageID)
			if !ok {
				missing = append(missing, fmt.Sprintf("%s of bot %d (never in a getupdates response)", id, c.index))
				continue
			}
			last, _ := p.lastOf(c.bot.BotID, page.epoch)
			switch {
			case killed[page.epoch] && last.seq == page.seq:
				excused = append(excused, m.MessageID)
			case !killed[page.epoch]:
				missing = append(missing, fmt.Sprintf("%s of bot %d (handed out in getupdates #%d to worker process #%d, which was not killed)",
					id, c.index, page.seq, page.epoch))
			default:
				missing = append(missing, fmt.Sprintf("%s of bot %d (handed out in getupdates #%d to worker process #%d, whose poller fetched again in #%d before the kill)",
					id, c.index, page.seq, page.epoch, last.seq))
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("inbox: %d messages the simulator handed out are not in the inbox: %v", len(missing), missing)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, ps := range p.handed {
		if len(ps) > 1 {
			t.Errorf("simulator: message %d was handed out %d times (the simulator never replays)", id, len(ps))
		}
	}
	for id, status := range inbox {
		if !injected[id] {
			t.Errorf("inbox: message %s (%s) was never injected", id, status)
		}
	}
	for bot, ps := range p.pages {
		for _, pg := range ps {
			in := 0
			for _, id := range pg.ids {
				if _, ok := inbox[strconv.FormatUint(id, 10)]; ok {
					in++
				}
			}
			if in != 0 && in != len(pg.ids) {
				t.Errorf("inbox: getupdates #%d of bot %s handed out %d messages, %d are in the inbox: a page was half committed", pg.seq, bot, len(pg.ids), in)
			}
		}
	}
	return excused
}

// heldCrashAttempt is a send attempt with what tells a held reply's attempts apart.
type heldCrashAttempt struct {
	crashAttempt
	source, requestID, heldID, heldFor, messageKey string
}

func heldCrashAttempts(t *testing.T, pool *pgxpool.Pool) []heldCrashAttempt {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT attempt_id, client_message_id, status, fail_type, error_code, reply_window_id, source,
       coalesce(request_id, ''), coalesce(metadata->>'held_id', ''), coalesce(metadata->>'held_for', ''), source_message_key
FROM send_attempts ORDER BY attempt_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []heldCrashAttempt
	for rows.Next() {
		var a heldCrashAttempt
		if err := rows.Scan(&a.id, &a.clientID, &a.status, &a.failType, &a.errorCode, &a.window, &a.source,
			&a.requestID, &a.heldID, &a.heldFor, &a.messageKey); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// heldCrashRow is a held reply as the store has it at the end.
type heldCrashRow struct {
	id, account, messageKey, requestID, reason, status, attemptID, dropReason string
	seq, window                                                               int64
	final                                                                     bool
}

func heldCrashRows(t *testing.T, pool *pgxpool.Pool) []heldCrashRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT held_id, held_seq, account_key, source_message_key, reply_window_id, request_id, final, reason, status,
       coalesce(attempt_id, ''), drop_reason
FROM held_replies ORDER BY held_seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []heldCrashRow
	for rows.Next() {
		var h heldCrashRow
		if err := rows.Scan(&h.id, &h.seq, &h.account, &h.messageKey, &h.window, &h.requestID, &h.final, &h.reason,
			&h.status, &h.attemptID, &h.dropReason); err != nil {
			t.Fatal(err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// heldCrashCounts are the numbers of the final state.
type heldCrashCounts struct {
	outcomes, held, drops, attempts map[string]int
	perWindow                       map[int]int // accepted sends per context token → tokens
	accepted, textDoubles           int
	maxPerWindow                    int
	// unknown outcomes (direct replies and held replies) that did and did not reach the
	// user: a kill between the transmission and the record of its outcome, or before
	// the transmission.
	unknownReached, unknownNot int
}

// heldCrashAssert checks the held replies and the agent's replies against what the simulator
// accepted (the numbered rules of the test's comment).
func heldCrashAssert(t *testing.T, sent []ilinksim.SentMessage, windows []crashWindow, attempts []heldCrashAttempt, rows []heldCrashRow,
	replies []heldCrashReply, answers map[string]heldCrashAnswer) heldCrashCounts {
	t.Helper()
	c := heldCrashCounts{outcomes: map[string]int{}, held: map[string]int{}, drops: map[string]int{}, attempts: map[string]int{}, perWindow: map[int]int{}}

	// What the simulator did, by text and by context token.
	accepted := map[string][]ilinksim.SentMessage{} // by text
	refusedClient := map[string]bool{}
	perToken := map[string]int{}
	for _, m := range sent {
		switch m.Outcome {
		case ilinksim.OutcomeAccepted:
			c.accepted++
			accepted[m.Text] = append(accepted[m.Text], m)
			perToken[m.ContextToken]++
		default:
			refusedClient[m.ClientID] = true
			// 3: nothing here may refuse a send (no throttle, tokens valid, the sim clock
			// still): a refusal is the gateway trying what it must not.
			t.Errorf("simulator: send #%d (client id %q, %q) refused: %s", m.Index, m.ClientID, m.Text, m.Reason)
		}
	}
	for _, n := range perToken {
		c.perWindow[n]++
		c.maxPerWindow = max(c.maxPerWindow, n)
		if n > heldCrashQuota {
			t.Errorf("simulator: %d accepted sends under one context token, over the quota of %d", n, heldCrashQuota)
		}
	}
	for _, w := range windows {
		if w.maxSends != heldCrashQuota {
			t.Errorf("window %d has max_sends %d, want the worker's %d", w.id, w.maxSends, heldCrashQuota)
		}
	}
	for text, ms := range accepted {
		if len(ms) > 1 {
			c.textDoubles++
			var how []string
			for _, m := range ms {
				how = append(how, fmt.Sprintf("#%d client id %q", m.Index, m.ClientID))
			}
			t.Errorf("the user got %q %d times: %v", text, len(ms), how)
		}
	}
	for _, a := range attempts {
		c.attempts[a.source+"/"+a.status]++
	}

	byRequest := map[string]heldCrashReply{}
	for _, r := range replies {
		byRequest[r.requestID] = r
	}
	known := map[string]bool{}
	for _, r := range replies {
		known[r.text] = true
	}
	for text, ms := range accepted {
		if !known[text] {
			t.Errorf("the simulator accepted %q (client id %q), which no reply of the agent has", text, ms[0].ClientID)
		}
	}

	// 1 and 2: each held reply is settled, reached the user at most once, exactly once
	// when it is sent, never when it was dropped; its attempts agree.
	carriers := map[string][]heldCrashAttempt{}
	for _, a := range attempts {
		if a.source == "held" {
			carriers[a.heldID] = append(carriers[a.heldID], a)
		} else if a.heldID != "" {
			t.Errorf("attempt %s (source %s) names held reply %s", a.id, a.source, a.heldID)
		}
	}
	heldByID := map[string]heldCrashRow{}
	for _, h := range rows {
		heldByID[h.id] = h
		c.held[h.status]++
		r, ok := byRequest[h.requestID]
		if !ok {
			t.Errorf("held reply %s (request %s) is no reply of the agent", h.id, h.requestID)
			continue
		}
		if r.messageKey != h.messageKey || r.window != h.window || r.final != h.final {
			t.Errorf("held reply %s is of message %s window %d (final %v), the agent's reply %s of message %s window %d (final %v)",
				h.id, h.messageKey, h.window, h.final, r.requestID, r.messageKey, r.window, r.final)
		}
		n := len(accepted[r.text])
		var live []string
		for _, a := range carriers[h.id] {
			if !strings.HasPrefix(a.requestID, "held/"+h.id+"/") || a.heldFor != h.messageKey {
				t.Errorf("attempt %s carries held reply %s with request id %q, held for %q; want held/%s/<index>, held for %s",
					a.id, h.id, a.requestID, a.heldFor, h.id, h.messageKey)
			}
			if a.status == vocab.AttemptSent || a.status == vocab.AttemptUnknown {
				live = append(live, a.id+" "+a.status)
			}
		}
		if len(live) > 1 {
			t.Errorf("held reply %s was carried by %d attempts that were sent or may have been: %v", h.id, len(live), live)
		}
		carrier := func() (heldCrashAttempt, bool) {
			for _, a := range carriers[h.id] {
				if a.id == h.attemptID {
					return a, true
				}
			}
			return heldCrashAttempt{}, false
		}
		switch h.status {
		case vocab.HeldWaiting, vocab.HeldSending:
			t.Errorf("held reply %s (%q) is left %s once nothing waits", h.id, r.text, h.status)
		case vocab.HeldSent:
			a, ok := carrier()
			if !ok || a.status != vocab.AttemptSent {
				t.Errorf("held reply %s is sent, its attempt %q is %+v", h.id, h.attemptID, a)
			}
			if n != 1 {
				t.Errorf("held reply %s (%q) is sent; the user got it %d times", h.id, r.text, n)
			}
		case vocab.HeldUnknown:
			if n == 1 {
				c.unknownReached++
			} else {
				c.unknownNot++
			}
			if a, ok := carrier(); !ok || a.status != vocab.AttemptUnknown {
				t.Errorf("held reply %s is unknown, its attempt %q is %+v", h.id, h.attemptID, a)
			}
			if n > 1 {
				t.Errorf("held reply %s (%q) is unknown; the user got it %d times", h.id, r.text, n)
			}
		case vocab.HeldFailed:
			// Only a rejection (or a dead token) fails a held reply; the simulator refusing
			// it is reported above.
			a, ok := carrier()
			if !ok || a.status != vocab.AttemptFailed || (a.failType != vocab.FailRejected && a.failType != vocab.FailStaleToken) || !refusedClient[a.clientID] {
				t.Errorf("held reply %s is failed, its attempt %q is %+v (refused by the simulator: %v)", h.id, h.attemptID, a, refusedClient[a.clientID])
			}
			if n != 0 {
				t.Errorf("held reply %s (%q) is failed; the user got it %d times", h.id, r.text, n)
			}
		case vocab.HeldDropped:
			c.drops[h.dropReason]++
			if h.dropReason != store.HeldDropExpired {
				t.Errorf("held reply %s was dropped for %q; only the age rule drops here", h.id, h.dropReason)
			}
			if n != 0 || len(live) > 0 {
				t.Errorf("held reply %s (%q) was dropped; the user got it %d times, attempts sent or unknown: %v", h.id, r.text, n, live)
			}
		default:
			t.Errorf("held reply %s has status %q", h.id, h.status)
		}
	}

	// 4: every reply of the agent is sent, unknown or held (and its held reply settled
	// as above).
	for _, r := range replies {
		n := len(accepted[r.text])
		key := r.outcome
		if r.outcome == "ok" {
			key = r.result.Status
		}
		c.outcomes[key]++
		switch {
		case r.outcome != "ok":
			t.Errorf("reply %s (%q) was answered %s: neither sent, unknown nor held", r.requestID, r.text, r.outcome)
		case r.result.Status == vocab.AttemptSent:
			if n != 1 {
				t.Errorf("reply %s (%q) was answered sent; the user got it %d times", r.requestID, r.text, n)
			}
		case r.result.Status == vocab.AttemptUnknown:
			if n == 1 {
				c.unknownReached++
			} else {
				c.unknownNot++
			}
			if n > 1 {
				t.Errorf("reply %s (%q) was answered unknown; the user got it %d times", r.requestID, r.text, n)
			}
		case r.result.Status == wfapi.SendHeld:
			h, ok := heldByID[r.result.HeldID]
			switch {
			case !ok:
				t.Errorf("reply %s (%q) was answered held as %q, which the store does not have: lost", r.requestID, r.text, r.result.HeldID)
			case h.requestID != r.requestID:
				t.Errorf("reply %s was answered held as %s, which holds request %s", r.requestID, h.id, h.requestID)
			}
			if !heldCrashHoldReason(r.result.ErrorCode) {
				t.Errorf("reply %s was held for %q", r.requestID, r.result.ErrorCode)
			}
		default:
			t.Errorf("reply %s (%q) was answered %+v: neither sent, unknown nor held", r.requestID, r.text, r.result)
		}
	}
	for provider, an := range answers {
		if !strings.HasPrefix(an.finish, "ok") {
			t.Errorf("the agent's verdict on message %s (window %d) was answered %s", provider, an.window, an.finish)
		}
	}

	// In order: a conversation's held replies reach the user in the order they were
	// held, and before the replies of the window that carries them.
	heldSeqOf := map[string]int64{} // by text
	for _, h := range rows {
		if r, ok := byRequest[h.requestID]; ok {
			heldSeqOf[r.text] = h.seq
		}
	}
	lastSeq := map[string]int64{}  // by bot
	ownSeen := map[string]string{} // by context token: the first own reply
	for _, m := range sent {
		if m.Outcome != ilinksim.OutcomeAccepted {
			continue
		}
		seq, isHeld := heldSeqOf[m.Text]
		if !isHeld {
			if _, ok := ownSeen[m.ContextToken]; !ok {
				ownSeen[m.ContextToken] = m.Text
			}
			continue
		}
		if own, ok := ownSeen[m.ContextToken]; ok {
			t.Errorf("held reply %q reached the user (#%d) after %q, a reply of the window that carried it", m.Text, m.Index, own)
		}
		if seq < lastSeq[m.BotID] {
			t.Errorf("held reply %q (held #%d) reached the user (#%d) after a reply held later (held #%d)", m.Text, seq, m.Index, lastSeq[m.BotID])
		}
		lastSeq[m.BotID] = max(lastSeq[m.BotID], seq)
	}
	return c
}

// heldCrashHoldReason reports whether a held reply's reason is one a window gives.
func heldCrashHoldReason(code string) bool {
	switch vocab.Code(code) {
	case vocab.CodeReplyQuotaExhausted, vocab.CodeReplySlotsReserved, vocab.CodeReplyWindowExpired:
		return true
	}
	return false
}

// heldCrashAssertMessages: once no reply waits, no message is left held (its held replies all
// settled), received or processing (the agent finished every message). It returns the
// messages by status.
func heldCrashAssertMessages(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT provider_message_id, status FROM inbound_messages ORDER BY inbox_seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	var bad []string
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			t.Fatal(err)
		}
		out[status]++
		if status != vocab.MessageHandled && status != vocab.MessageFailed {
			bad = append(bad, id+" "+status)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("%d messages are neither handled nor failed once nothing waits: %v", len(bad), bad)
	}
	return out
}
