package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/vocab"
)

type crashWindow struct {
	id                              int64
	reserved, transmitted, maxSends int32
	state                           string
}

type crashAttempt struct {
	id, clientID, status, failType, errorCode string
	window                                    int64
}

// crashInbox maps provider message id → status; a provider id stored twice fails.
func crashInbox(t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT provider_message_id, status FROM inbound_messages ORDER BY inbox_seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			t.Fatal(err)
		}
		if prev, dup := out[id]; dup {
			t.Errorf("inbox: provider message %s is stored twice (%s and %s)", id, prev, status)
		}
		out[id] = status
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func crashWindows(t *testing.T, pool *pgxpool.Pool) []crashWindow {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT reply_window_id, reserved, transmitted, max_sends, state FROM reply_windows ORDER BY reply_window_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []crashWindow
	for rows.Next() {
		var w crashWindow
		if err := rows.Scan(&w.id, &w.reserved, &w.transmitted, &w.maxSends, &w.state); err != nil {
			t.Fatal(err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func crashAttempts(t *testing.T, pool *pgxpool.Pool) []crashAttempt {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT attempt_id, client_message_id, status, fail_type, error_code, reply_window_id FROM send_attempts ORDER BY attempt_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []crashAttempt
	for rows.Next() {
		var a crashAttempt
		if err := rows.Scan(&a.id, &a.clientID, &a.status, &a.failType, &a.errorCode, &a.window); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// crashAssertInbox: every message the simulator handed out is in the inbox exactly once,
// and nothing else is. It returns the messages excused as lost in flight at a kill: in the
// last getupdates response a SIGKILLed process received (iLink consumed them on hand-out).
func crashAssertInbox(t *testing.T, msgs []ilinksim.Injected, inbox map[string]string, tap *crashTap, killed map[int]bool) (excused []uint64, lost int) {
	t.Helper()
	handed := tap.handedOut()
	injected := map[string]bool{}
	var missing []string
	for _, m := range msgs {
		id := strconv.FormatUint(m.MessageID, 10)
		injected[id] = true
		if _, ok := inbox[id]; ok {
			continue
		}
		pages := handed[m.MessageID]
		if len(pages) == 0 {
			missing = append(missing, fmt.Sprintf("%s (never in a getupdates response the tap saw)", id))
			continue
		}
		p := pages[len(pages)-1]
		last, _ := tap.lastPageOf(p.epoch)
		switch {
		case killed[p.epoch] && last.seq == p.seq:
			excused = append(excused, m.MessageID)
		case !killed[p.epoch]:
			missing = append(missing, fmt.Sprintf("%s (handed out in getupdates #%d to worker process #%d, which was not killed)", id, p.seq, p.epoch))
		default:
			missing = append(missing, fmt.Sprintf("%s (handed out in getupdates #%d to worker process #%d, which fetched again in getupdates #%d before it was killed)",
				id, p.seq, p.epoch, last.seq))
		}
	}
	if len(missing) > 0 {
		shown := missing
		if len(shown) > 20 {
			shown = append(shown[:20:20], fmt.Sprintf("... and %d more", len(missing)-20))
		}
		t.Errorf("inbox: %d of %d messages the simulator handed out are not in the inbox: %v", len(missing), len(msgs), shown)
	}
	for id, pages := range handed {
		if len(pages) > 1 {
			t.Errorf("simulator: message %d was handed out %d times (the simulator never replays)", id, len(pages))
		}
	}
	var extra []string
	for id, status := range inbox {
		if !injected[id] {
			extra = append(extra, id+" ("+status+")")
		}
	}
	if len(extra) > 0 {
		t.Errorf("inbox: %d messages that were never injected: %v", len(extra), extra)
	}
	// A page is committed atomically: all of its messages are in the inbox or none.
	for _, p := range tap.allPages() {
		in := 0
		for _, id := range p.ids {
			if _, ok := inbox[strconv.FormatUint(id, 10)]; ok {
				in++
			}
		}
		if in != 0 && in != len(p.ids) {
			t.Errorf("inbox: getupdates #%d (worker process #%d) handed out %d messages but only %d are in the inbox: a page was half committed",
				p.seq, p.epoch, len(p.ids), in)
		}
	}
	if len(excused) > 0 {
		shown := fmt.Sprint(excused)
		if len(excused) > 20 {
			shown = fmt.Sprintf("%v ... and %d more", excused[:20], len(excused)-20)
		}
		t.Logf("inbox: %d messages were in the last getupdates response of a process SIGKILLed before it committed them; iLink consumes on hand-out and never replays: %s",
			len(excused), shown)
	}
	return excused, len(missing)
}

// crashAssertClientIDs: no client message id reached the simulator twice, and what the
// simulator received agrees with the store's outcomes (a transmitted attempt is never
// recorded as released, pending or surely-not-sent; a sent one was accepted). It returns
// the number of client ids that reached the simulator more than once.
func crashAssertClientIDs(t *testing.T, sent []ilinksim.SentMessage, attempts []crashAttempt) (doubles int) {
	t.Helper()
	calls := map[string][]ilinksim.SentMessage{}
	for _, m := range sent {
		calls[m.ClientID] = append(calls[m.ClientID], m)
	}
	for id, ms := range calls {
		if len(ms) > 1 {
			doubles++
			var how []string
			for _, m := range ms {
				how = append(how, fmt.Sprintf("#%d %s%s at %s", m.Index, m.Outcome, m.Reason, m.At.Format(time.RFC3339Nano)))
			}
			t.Errorf("client message id %q reached the simulator %d times: %v", id, len(ms), how)
		}
	}
	byClient := map[string]crashAttempt{}
	for _, a := range attempts {
		byClient[a.clientID] = a
	}
	for id, ms := range calls {
		a, ok := byClient[id]
		switch {
		case !ok:
			t.Errorf("client message id %q reached the simulator but no attempt of the store has it", id)
		case a.status == vocab.AttemptPending || a.status == vocab.AttemptSending:
			// Reported by crashAssertNothingInFlight.
		case a.status == vocab.AttemptFailed && (a.failType == vocab.FailReleased || a.failType == vocab.FailRetired ||
			a.failType == vocab.FailRefused || a.failType == vocab.FailTransport):
			t.Errorf("attempt %s reached the simulator (%s) but is recorded as failed/%s (%s): its quota was given back or it was declared never sent",
				a.id, ms[0].Outcome, a.failType, a.errorCode)
		case ms[0].Outcome == ilinksim.OutcomeAccepted && a.status != vocab.AttemptSent && a.status != vocab.AttemptUnknown:
			t.Errorf("attempt %s was accepted by the simulator but is recorded as %s/%s", a.id, a.status, a.failType)
		}
	}
	for _, a := range attempts {
		if a.status != vocab.AttemptSent {
			continue
		}
		if ms := calls[a.clientID]; len(ms) == 0 || ms[0].Outcome != ilinksim.OutcomeAccepted {
			t.Errorf("attempt %s is recorded as sent but the simulator never accepted client id %q (%d calls)", a.id, a.clientID, len(ms))
		}
	}
	return doubles
}

// crashAssertHandled: no message is `handled` without an answer the user got. The echo
// agent marks a message handled from its hand-off answer; the test's agent gives no
// verdict of its own (it only replies), so every handled message must have an attempt
// (of its window, source_message_key) whose client id the simulator accepted. It returns
// the handled messages and the false ones.
func crashAssertHandled(t *testing.T, pool *pgxpool.Pool, sent []ilinksim.SentMessage) (handled, falseHandled int) {
	t.Helper()
	accepted := map[string]bool{}
	for _, m := range sent {
		if m.Outcome == ilinksim.OutcomeAccepted {
			accepted[m.ClientID] = true
		}
	}
	rows, err := pool.Query(context.Background(), `
SELECT m.provider_message_id, coalesce(array_agg(a.client_message_id || ' ' || a.status) FILTER (WHERE a.attempt_id IS NOT NULL), '{}')
FROM inbound_messages AS m LEFT JOIN send_attempts AS a ON a.source_message_key = m.message_key
WHERE m.status = 'handled'
GROUP BY m.provider_message_id ORDER BY m.provider_message_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var bad []string
	for rows.Next() {
		var id string
		var attempts []string
		if err := rows.Scan(&id, &attempts); err != nil {
			t.Fatal(err)
		}
		handled++
		ok := false
		for _, a := range attempts {
			if client, _, _ := strings.Cut(a, " "); accepted[client] {
				ok = true
			}
		}
		if !ok {
			falseHandled++
			bad = append(bad, fmt.Sprintf("%s (attempts %v)", id, attempts))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		if len(bad) > 20 {
			bad = append(bad[:20:20], fmt.Sprintf("... and %d more", len(bad)-20))
		}
		t.Errorf("%d of %d handled messages have no send the simulator accepted (falsely handled): %v", falseHandled, handled, bad)
	}
	// The other side, logged: a message failed because no reply was confirmed sent may
	// still have had one reach the user (a kill between the transmission and the record of
	// its outcome leaves it unknown to the gateway).
	var failed, failedAnswered int
	if err := pool.QueryRow(context.Background(), `
SELECT count(*), count(*) FILTER (WHERE clients && $1::text[]) FROM (
    SELECT coalesce(array_agg(a.client_message_id) FILTER (WHERE a.attempt_id IS NOT NULL), '{}') AS clients
    FROM inbound_messages AS m LEFT JOIN send_attempts AS a ON a.source_message_key = m.message_key
    WHERE m.status = 'failed' GROUP BY m.message_key) AS f`, slices.Collect(maps.Keys(accepted))).Scan(&failed, &failedAnswered); err != nil {
		t.Fatal(err)
	}
	t.Logf("failed messages: %d, of which %d had a reply the simulator accepted (its outcome unknown to the gateway)", failed, failedAnswered)
	return handled, falseHandled
}

// crashAssertQuota: no window exceeded its quota, in the store and at the simulator.
func crashAssertQuota(t *testing.T, windows []crashWindow, attempts []crashAttempt, sent []ilinksim.SentMessage, simQuota int) {
	t.Helper()
	maxSends := map[int64]int32{}
	for _, w := range windows {
		maxSends[w.id] = w.maxSends
		if w.reserved+w.transmitted > w.maxSends {
			t.Errorf("window %d (%s): reserved %d + transmitted %d exceeds max_sends %d", w.id, w.state, w.reserved, w.transmitted, w.maxSends)
		}
	}
	used := map[int64]int32{}
	for _, a := range attempts {
		if a.status == vocab.AttemptSent || a.status == vocab.AttemptUnknown {
			used[a.window]++
		}
	}
	for id, n := range used {
		if n > maxSends[id] {
			t.Errorf("window %d: %d attempts sent or unknown, over its quota of %d", id, n, maxSends[id])
		}
	}
	perToken := map[string]int{}
	for _, m := range sent {
		perToken[m.ContextToken]++
	}
	for tok, n := range perToken {
		if simQuota > 0 && n > simQuota {
			t.Errorf("simulator: %d sendmessage calls with one context token (%d bytes), over the quota of %d", n, len(tok), simQuota)
		}
	}
	for _, m := range sent {
		if m.Outcome == ilinksim.OutcomeRefused && m.Reason == ilinksim.ReasonQuota {
			t.Errorf("simulator: send #%d (client id %q) refused for quota", m.Index, m.ClientID)
		}
	}
}

// crashAssertNothingInFlight: no attempt is left pending or sending.
func crashAssertNothingInFlight(t *testing.T, attempts []crashAttempt) {
	t.Helper()
	for _, a := range attempts {
		if a.status == vocab.AttemptPending || a.status == vocab.AttemptSending {
			t.Errorf("attempt %s (window %d) is left %s", a.id, a.window, a.status)
		}
	}
}

// pageMessageIDs reads the message ids of a getupdates answer (none when it does not
// decode).
func pageMessageIDs(answer []byte) []uint64 {
	var body struct {
		Msgs []struct {
			MessageID uint64 `json:"message_id"`
		} `json:"msgs"`
	}
	var ids []uint64
	if json.Unmarshal(answer, &body) == nil {
		for _, m := range body.Msgs {
			ids = append(ids, m.MessageID)
		}
	}
	return ids
}
