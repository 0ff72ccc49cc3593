package e2e_test

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/replyapi"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// With PostgreSQL blackholed under a running gateway (its connections accepted and held,
// never answered, the open ones too), every agent-facing route of the reply API answers
// 503 store_unavailable within 10 s with the default settings (an agent's 40 s client
// timeout gets an answer, nothing is sent), and once the database answers again the same
// token's reply is sent.
func TestEveryAgentRouteAnswers503WithinTenSecondsWhenPostgreSQLHangs(t *testing.T) {
	t.Parallel()
	a := startAPIWith(t, store.DefaultLimits(), nil, true)
	t.Cleanup(a.dbProxy.Restore) // before the gateway stops: let it reach its database
	const owner = "o9cq8deadlineowner00000001@im.wechat"
	acct := a.enroll("qo_e2e_deadline", owner)
	bot := a.botOf(owner)
	if _, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "answer me while the database hangs"); err != nil {
		t.Fatal(err)
	}
	w, _ := a.openWindow(acct.AccountKey, 0)
	tok := a.tokenOf(w.ReplyWindowID)
	auth := []string{"Authorization", "Bearer " + tok}
	if got := a.untilWindowReady(func() answer { return a.reply(tok, "before the outage", "") }); got.status != http.StatusOK {
		t.Fatalf("reply before the outage: %d %s", got.status, got.body)
	}
	sentBefore := len(a.sentTexts(bot.BotID))

	ct, media := multipartReply(t, "image", "chart.png", pngBytes(t, 5))
	routes := []struct {
		name, method, path string
		body               []byte
		headers            []string
	}{
		{"text reply", http.MethodPost, "/v1/reply", []byte(`{"type":"text","text":"during the outage"}`), []string{"Idempotency-Key", "outage-1"}},
		{"media reply", http.MethodPost, "/v1/reply", media, []string{"Content-Type", ct, "Idempotency-Key", "outage-2"}},
		{"done", http.MethodPost, "/v1/done", []byte(`{"status":"handled"}`), nil},
		{"typing", http.MethodPost, "/v1/typing", []byte(`{"status":"typing"}`), nil},
		{"attachment", http.MethodGet, "/v1/messages/" + w.SourceMessageKey + "/attachments/0", nil, nil},
	}
	a.dbProxy.Blackhole()
	agent := &http.Client{Timeout: 40 * time.Second} // the agent's own timeout
	type result struct {
		status int
		code   string
		took   time.Duration
		err    error
	}
	results := make([]result, len(routes))
	var wg sync.WaitGroup
	for i, r := range routes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequestWithContext(context.Background(), r.method, a.base+r.path, bytes.NewReader(r.body))
			if err != nil {
				results[i].err = err
				return
			}
			req.Header.Set("Content-Type", "application/json")
			h := append(append([]string{}, auth...), r.headers...)
			for j := 0; j+1 < len(h); j += 2 {
				req.Header.Set(h[j], h[j+1])
			}
			began := time.Now()
			resp, err := agent.Do(req)
			results[i].took = time.Since(began)
			if err != nil {
				results[i].err = err
				return
			}
			defer resp.Body.Close()
			var b replyapi.ErrorBody
			buf := new(bytes.Buffer)
			_, _ = buf.ReadFrom(resp.Body)
			answer{status: resp.StatusCode, body: buf.Bytes()}.json(t, &b)
			results[i].status, results[i].code = resp.StatusCode, b.Error.Code
		}()
	}
	wg.Wait()
	for i, r := range routes {
		got := results[i]
		t.Logf("%s with PostgreSQL hanging: %d %s after %v", r.name, got.status, got.code, got.took.Round(time.Millisecond))
		switch {
		case got.err != nil:
			t.Errorf("%s: no answer: %v", r.name, got.err)
		case got.status != http.StatusServiceUnavailable || got.code != replyapi.CodeStoreUnavailable:
			t.Errorf("%s: %d %s, want 503 %s", r.name, got.status, got.code, replyapi.CodeStoreUnavailable)
		case got.took >= 10*time.Second:
			t.Errorf("%s: answered after %v, want under 10 s", r.name, got.took)
		}
	}
	a.dbProxy.Restore()
	if n := len(a.sentTexts(bot.BotID)); n != sentBefore {
		t.Fatalf("%d messages sent during the outage", n-sentBefore)
	}

	// The database answers again: the same token's reply is sent (the first answers may
	// still find the gateway's connections of the outage broken: 503, retry).
	var after answer
	a.eventually("a reply after the outage", time.Minute, func() (bool, error) {
		after = a.reply(tok, "after the outage", "after-1")
		return after.status != http.StatusServiceUnavailable, nil
	})
	var rr replyapi.ReplyResponse
	after.json(t, &rr)
	if after.status != http.StatusOK || rr.Status != vocab.AttemptSent {
		t.Fatalf("reply after the outage: %d %s", after.status, after.body)
	}
}
