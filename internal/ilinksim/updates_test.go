package ilinksim

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitForRequest waits (bounded by a number of control round trips, not by
// sleeping) until the simulator has recorded n requests to endpoint.
func waitForRequest(t *testing.T, e *env, endpoint string, n int) {
	t.Helper()
	for range 20000 {
		reqs, err := e.ctl.Requests(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, r := range reqs {
			if r.Endpoint == endpoint {
				seen++
			}
		}
		if seen >= n {
			return
		}
	}
	t.Fatalf("no %d %s requests recorded", n, endpoint)
}

// waitForPollers waits (bounded by control round trips, not by sleeping)
// until the bot has exactly n held getupdates calls.
func waitForPollers(t *testing.T, e *env, botID string, n int) {
	t.Helper()
	for range 20000 {
		st, err := e.ctl.BotState(e.ctx, botID)
		if err != nil {
			t.Fatal(err)
		}
		if st.Pollers == n {
			return
		}
	}
	t.Fatalf("bot %s never had %d held polls", botID, n)
}

func TestCursorAdvancesAndNeverReplaysDeliveredMessages(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	e.inject(b.BotID, InjectRequest{Text: "one"})
	e.inject(b.BotID, InjectRequest{Text: "two"})
	r1 := e.poll(b.Token, "")
	c1, _ := r1["get_updates_buf"].(string)
	if len(msgs(r1)) != 2 || !strings.HasPrefix(c1, "Ck") || num(r1, "longpolling_timeout_ms") != 50 {
		t.Fatalf("first poll: %v", r1)
	}
	e.inject(b.BotID, InjectRequest{Text: "three"})
	r2 := e.poll(b.Token, c1)
	c2, _ := r2["get_updates_buf"].(string)
	if len(msgs(r2)) != 1 || c2 == c1 {
		t.Fatalf("second poll: %v", r2)
	}
	// The older cursor (and the empty one) replays nothing.
	for _, cur := range []string{c1, ""} {
		if r := e.poll(b.Token, cur); len(msgs(r)) != 0 {
			t.Fatalf("cursor %q replayed: %v", cur, r)
		}
	}
	// An empty page keeps the caller's cursor.
	if r := e.poll(b.Token, c2); r["get_updates_buf"] != c2 || msgs(r) == nil {
		t.Fatalf("empty page: %v", r)
	}
}

func TestEmptyCursorReplaysRecentHistoryWhenConfigured(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ReplayOnEmptyCursor, c.ReplayMaxAge = 5, time.Hour })
	b := e.bot()
	e.inject(b.BotID, InjectRequest{Text: "old"})
	r := e.poll(b.Token, "")
	cur, _ := r["get_updates_buf"].(string)
	if len(msgs(e.poll(b.Token, cur))) != 0 {
		t.Fatal("non-empty cursor replayed")
	}
	if got := msgs(e.poll(b.Token, "")); len(got) != 1 {
		t.Fatalf("empty cursor replay: %v", got)
	}
	e.advance(2 * time.Hour)
	if got := msgs(e.poll(b.Token, "")); len(got) != 0 {
		t.Fatalf("replay beyond max age: %v", got)
	}
}

func TestInboundMessageShapeFollowsProtocol(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	in := e.inject(b.BotID, InjectRequest{Text: "hello"})
	m := msgs(e.poll(b.Token, ""))[0]
	if m["from_user_id"] != b.Owner || m["to_user_id"] != b.BotID || num(m, "message_type") != 1 || num(m, "message_state") != 2 ||
		m["client_id"] == "" || m["session_id"] == "" || num(m, "seq") != 1 || num(m, "create_time_ms") == 0 {
		t.Fatalf("message: %v", m)
	}
	tok, _ := m["context_token"].(string)
	if tok != in.ContextToken || !strings.HasPrefix(tok, "CK") {
		t.Fatalf("context_token %q", tok)
	}
	if id, _ := m["message_id"].(json.Number); id.String() != "7000000000000000000" {
		t.Fatalf("message_id %v, want the configured base above 2^53", m["message_id"])
	}
	item := m["item_list"].([]any)[0].(map[string]any)
	if num(item, "type") != 1 || item["text_item"].(map[string]any)["text"] != "hello" || item["msg_id"] != "7000000000000000000" {
		t.Fatalf("item: %v", item)
	}
	// Each inbound message brings a new context token.
	in2 := e.inject(b.BotID, InjectRequest{Text: "again"})
	if in2.ContextToken == in.ContextToken || in2.MessageID != in.MessageID+1 {
		t.Fatalf("second inject: %+v", in2)
	}
}

func TestUint64IDsRoundTripLosslessly(t *testing.T) {
	const max = uint64(18446744073709551615)
	for _, numeric := range []bool{false, true} {
		e := newEnv(t, func(c *Config) { c.NumericItemIDs = numeric })
		b := e.bot()
		e.inject(b.BotID, InjectRequest{Text: "quote", MessageID: max, Ref: &RefSpec{SvrID: max - 1, Title: "t", Text: "quoted"}})
		r := e.poll(b.Token, "")
		var page struct {
			Msgs []struct {
				MessageID uint64 `json:"message_id"`
				ItemList  []struct {
					MsgID  json.Number `json:"msg_id"`
					RefMsg struct {
						SvrID       json.Number `json:"svr_id"`
						MessageItem struct {
							TextItem struct{ Text string } `json:"text_item"`
						} `json:"message_item"`
					} `json:"ref_msg"`
				} `json:"item_list"`
			} `json:"msgs"`
		}
		raw, _ := json.Marshal(r)
		if err := json.Unmarshal(raw, &page); err != nil {
			t.Fatal(err)
		}
		m := page.Msgs[0]
		if m.MessageID != max || m.ItemList[0].MsgID.String() != "18446744073709551615" ||
			m.ItemList[0].RefMsg.SvrID.String() != "18446744073709551614" || m.ItemList[0].RefMsg.MessageItem.TextItem.Text != "quoted" {
			t.Fatalf("numeric=%v: %+v", numeric, m)
		}
	}
}

func TestServerMessageIDsCanStartNearMaxUint64(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MessageIDBase = 18446744073709551615 })
	b := e.bot()
	in := e.inject(b.BotID, InjectRequest{Text: "x"})
	in2 := e.inject(b.BotID, InjectRequest{Text: "y"})
	if in.MessageID != 18446744073709551615 || in2.MessageID == 0 {
		t.Fatalf("ids: %d %d", in.MessageID, in2.MessageID)
	}
}

func TestLongPollReturnsAsSoonAsMessageInjected(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.LongPollHold = time.Minute })
	b := e.bot()
	start := time.Now()
	done := e.pollAsync(b.Token, "")
	waitForPollers(t, e, b.BotID, 1)
	e.inject(b.BotID, InjectRequest{Text: "wake up"})
	select {
	case r := <-done:
		if len(msgs(r)) != 1 || num(r, "longpolling_timeout_ms") != 60000 {
			t.Fatalf("poll: %v", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("held poll did not return on inject")
	}
	if time.Since(start) > 30*time.Second {
		t.Fatal("poll waited for the hold")
	}
}

func TestLongPollHoldEndsWithEmptyPage(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.LongPollHold = 20 * time.Millisecond; c.LongPollTimeoutMS = 35000 })
	b := e.bot()
	r := e.poll(b.Token, "")
	if num(r, "ret") != 0 || len(msgs(r)) != 0 || num(r, "longpolling_timeout_ms") != 35000 || r["get_updates_buf"] == "" {
		t.Fatalf("empty page: %v", r)
	}
}

func TestCancelledLongPollConsumesNothing(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.LongPollHold = time.Minute })
	b := e.bot()
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() {
		body := []byte(`{"get_updates_buf":"","base_info":{"channel_version":"2.4.9"}}`)
		_, _, _, err := e.raw(ctx, http.MethodPost, "/ilink/bot/getupdates", b.Token, body)
		done <- err
	}()
	waitForPollers(t, e, b.BotID, 1)
	cancel()
	if err := <-done; err == nil {
		t.Fatal("cancelled poll returned no error")
	}
	waitForPollers(t, e, b.BotID, 0)
	e.inject(b.BotID, InjectRequest{Text: "after cancel"})
	if got := msgs(e.poll(b.Token, "")); len(got) != 1 {
		t.Fatalf("message lost to a cancelled poll: %v", got)
	}
}

func TestConcurrentPollersEachMessageReachesExactlyOne(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.LongPollHold = 20 * time.Millisecond })
	b := e.bot()
	const n = 50
	for i := range n {
		e.inject(b.BotID, InjectRequest{Text: "m", MessageID: uint64(1000 + i)})
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				m, err := e.apiErr(b.Token, "getupdates", map[string]any{"get_updates_buf": ""})
				if err != nil {
					t.Error(err)
					return
				}
				for _, m := range msgs(m) {
					mu.Lock()
					seen[m["message_id"].(json.Number).String()]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("delivered %d distinct messages, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("message %s delivered %d times", id, c)
		}
	}
}

func TestDuplicateInjectionModes(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	in := e.inject(b.BotID, InjectRequest{Text: "dup me", MessageID: 42, Duplicates: []DuplicateSpec{
		{Mode: DupSame}, {Mode: DupNewToken}, {Mode: DupNoID},
	}})
	if len(in.Duplicates) != 3 {
		t.Fatalf("duplicates: %+v", in.Duplicates)
	}
	got := msgs(e.poll(b.Token, ""))
	if len(got) != 4 {
		t.Fatalf("got %d messages, want 4", len(got))
	}
	orig, _ := json.Marshal(got[0])
	same, _ := json.Marshal(got[1])
	if !bytes.Equal(orig, same) {
		t.Fatalf("same-mode copy differs:\n%s\n%s", orig, same)
	}
	if got[2]["message_id"].(json.Number).String() != "42" || got[2]["context_token"] == got[0]["context_token"] {
		t.Fatalf("new_token copy: %v", got[2])
	}
	if _, has := got[3]["message_id"]; has {
		t.Fatalf("no_id copy has message_id: %v", got[3])
	}
	if _, has := got[3]["item_list"].([]any)[0].(map[string]any)["msg_id"]; has {
		t.Fatalf("no_id copy has item msg_id: %v", got[3])
	}
	// The new token of a new_token copy is valid for replies.
	tok, _ := got[2]["context_token"].(string)
	if r := e.send(b, b.Owner, tok, "reply"); num(r, "ret") != 0 {
		t.Fatalf("reply with the copy's token: %v", r)
	}
}

func TestDelayedDuplicateAppearsOnlyAfterClockAdvance(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	e.inject(b.BotID, InjectRequest{Text: "x", MessageID: 7})
	if got := msgs(e.poll(b.Token, "")); len(got) != 1 {
		t.Fatalf("first poll: %v", got)
	}
	dup, err := e.ctl.Duplicate(e.ctx, b.BotID, DuplicateRequest{MessageID: 7, DuplicateSpec: DuplicateSpec{Mode: DupSame, Delay: Duration(5 * time.Second)}})
	if err != nil || dup.MessageID != 7 {
		t.Fatalf("duplicate: %+v %v", dup, err)
	}
	if got := msgs(e.poll(b.Token, "")); len(got) != 0 {
		t.Fatalf("delayed copy visible early: %v", got)
	}
	e.advance(5 * time.Second)
	if got := msgs(e.poll(b.Token, "")); len(got) != 1 {
		t.Fatalf("delayed copy after advance: %v", got)
	}
	if _, err := e.ctl.Duplicate(e.ctx, b.BotID, DuplicateRequest{MessageID: 8, DuplicateSpec: DuplicateSpec{Mode: DupSame}}); err == nil {
		t.Fatal("duplicate of an unknown message succeeded")
	}
}

func TestDuplicatesDoNotResetQuota(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ReplyQuota = 1 })
	b := e.bot()
	in := e.inject(b.BotID, InjectRequest{Text: "x", MessageID: 9})
	e.send(b, b.Owner, in.ContextToken, "1")
	if _, err := e.ctl.Duplicate(e.ctx, b.BotID, DuplicateRequest{MessageID: 9, DuplicateSpec: DuplicateSpec{Mode: DupSame}}); err != nil {
		t.Fatal(err)
	}
	e.advance(gap)
	if r := e.send(b, b.Owner, in.ContextToken, "2"); num(r, "ret") != -2 {
		t.Fatalf("duplicate reset the quota: %v", r)
	}
}
