package e2e_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/agent"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/webhook"
)

// Shape of the media crash run: mediaCrashMessages user messages about 1.5 s apart, each
// answered by the webhook agent with one image or one file through the reply API, while
// the worker is SIGKILLed at least mediaCrashMinKills times, most of them a few
// milliseconds after the simulator answered a CDN upload or received a sendmessage.
const (
	mediaCrashMessages    = 40
	mediaCrashMinKills    = 4
	mediaCrashGapMin      = 900 * time.Millisecond // between messages: mediaCrashGapMin + [0, mediaCrashGapRand)
	mediaCrashGapRand     = 1200 * time.Millisecond
	mediaCrashQuietWithin = 2 * time.Minute
	mediaCrashRetryFor    = 60 * time.Second // how long the agent keeps retrying one reply
	mediaCrashUnknownFor  = 25 * time.Second // how long it keeps asking after an unknown outcome (a killed send is retried within 20 s)
)

// TestCrashDuringMediaSendsNeverSendsAMediaReplyTwiceAndLeavesNothingPending: a real
// worker process with the webhook hand-off is SIGKILLed several times while its agent answers every message with an image or a file
// through the reply API (POST /v1/reply, multipart, one Idempotency-Key per message,
// repeated with the same key while the worker is down or the outcome is unknown, as an
// agent does), and restarted each time. Kills come a few milliseconds after the
// simulator answered a CDN upload (between the upload and its record, or between the
// record and the send) or received a sendmessage (between the transmission and the record
// of its outcome), or after a random uptime.
//
// At the end: no client message id reached the simulator twice; no message's media reply
// reached the simulator more than once (told by the CDN object each sendmessage refers
// to, decrypted and matched with the bytes the agent sent for each message, and by the
// store's attempts of each message); no attempt is left pending or sending; staged media
// is consistent (every sent media attempt refers to staged media whose upload is
// recorded, no staged media serves two attempts, nothing uploaded is unreferenced); and
// every reply ended with a documented answer (a reply retired by a newer message before
// its transmission is 409 reply_window_inactive, not a 500 the agent would retry).
func TestCrashDuringMediaSendsNeverSendsAMediaReplyTwiceAndLeavesNothingPending(t *testing.T) {
	t.Parallel()
	began := time.Now()
	streamRand, killRand := crashRands(t)

	limits := store.DefaultLimits()
	limits.WindowLifetime = crashWindowLife
	rig := newProcRig(t, 500*time.Millisecond, limits)
	s, pool, ctl, tap, bot := rig.system, rig.pool, rig.ctl, rig.tap, rig.bot

	// The reply API listens on one address across restarts, as an agent's configuration
	// names it.
	httpAddr := testkit.FreeAddr(t)
	ag := &mediaCrashAgent{gateway: "http://" + httpAddr, hc: &http.Client{Timeout: 75 * time.Second},
		replies: map[string]*mediaCrashReply{}, byHash: map[string]string{}}
	hook := httptest.NewServer(ag)
	t.Cleanup(hook.Close)

	w := &crashWorker{t: t, bin: rig.bin, tap: tap, env: rig.baseEnv(map[string]string{
		"ILINKFLOW_SEND_GAP":        "5ms",
		"ILINKFLOW_POLL_SESSION":    "3s",
		"ILINKFLOW_HEARTBEAT":       "1s",
		"ILINKFLOW_WINDOW_LIFETIME": crashWindowLife.String(),
		"ILINKFLOW_SHUTDOWN_GRACE":  "2s",
		"ILINKFLOW_LOG_LEVEL":       "info",
		"ILINKFLOW_HANDLER":         "webhook",
		"ILINKFLOW_WEBHOOK_URL":     hook.URL + "/ilinkflow",
		"ILINKFLOW_WEBHOOK_TIMEOUT": "10s",
		"ILINKFLOW_REOFFER_AFTER":   "0s",
		"ILINKFLOW_POLL_LEASE_TTL":  "6s",
		"ILINKFLOW_HTTP_ADDR":       httpAddr,
		"ILINKFLOW_WEBHOOK_SECRET":  webhookSecret,
	})}
	agentCtx, stopAgent := context.WithCancel(context.Background())
	ag.ctx = agentCtx
	t.Cleanup(func() { stopAgent(); ag.wg.Wait() })
	w.launch()
	s.eventually("the account's poller running", 30*time.Second, func() (bool, error) {
		return s.running(s.pollerWF(rig.acct.AccountKey)), nil
	})
	ready := time.Now()

	// The stream and the killer run together.
	streamCtx, stopStream := context.WithCancel(context.Background())
	defer stopStream()
	streamOver := make(chan struct{})
	var msgs []ilinksim.Injected
	var streamErr error
	go func() {
		defer close(streamOver)
		for i := range mediaCrashMessages {
			in, err := ctl.InjectText(streamCtx, bot.BotID, "", fmt.Sprintf("media crash message %d", i+1))
			if err != nil {
				streamErr = err
				return
			}
			msgs = append(msgs, in)
			if err := crashPause(streamCtx, mediaCrashGapMin+crashRandDur(streamRand, mediaCrashGapRand)); err != nil {
				streamErr = err
				return
			}
		}
	}()
	if err := mediaCrashKillLoop(streamCtx, w, killRand, streamOver); err != nil {
		stopStream()
		<-streamOver
		t.Fatalf("killer: %v", err)
	}
	<-streamOver
	if streamErr != nil {
		t.Fatalf("stream: %v (after %d messages)", streamErr, len(msgs))
	}
	streamed := time.Now()
	kills := w.killCount()
	t.Logf("stream over: %d messages injected, %d kills, worker process #%d running", len(msgs), kills, w.current().index)

	// Quiet: everything handed out and committed, no send in flight, the agent idle and the
	// open window's message answered.
	s.eventually("a quiet system after the last restart", mediaCrashQuietWithin, func() (bool, error) {
		if p := w.current(); p.hasExited() {
			t.Fatalf("worker process #%d (pid %d) exited by itself: %v", p.index, p.pid, p.exitErr)
		}
		err := mediaCrashQuiet(s.ctx, ctl, pool, tap, ag, bot.BotID)
		return err == nil, err
	})
	quieted := time.Now()
	stopAgent()
	ag.wg.Wait()

	sent, err := ctl.Sent(s.ctx, bot.BotID)
	if err != nil {
		t.Fatal(err)
	}
	attempts := crashAttempts(t, pool)
	doubles := crashAssertClientIDs(t, sent, attempts)
	crashAssertNothingInFlight(t, attempts)
	mediaSent := mediaCrashAssertOncePerMessage(t, s.ctx, ctl, pool, ag, sent)
	staged, uploaded := mediaCrashAssertStaged(t, pool, tap.uploadCount())

	// Every reply ended with a documented answer: none was left to the agent's patience,
	// none was a 500.
	for k, r := range ag.snapshot() {
		if r.outcome == "gave up" || strings.HasPrefix(r.outcome, "refused 500") {
			t.Errorf("message %s: the agent's reply ended %q after %d tries (last: %s)", k, r.outcome, r.tries, r.lastErr)
		}
	}
	outcomes := ag.summary()
	attemptStatus := map[string]int{}
	unknown := 0
	for _, a := range attempts {
		attemptStatus[a.status+"/"+a.failType+"/"+a.errorCode]++
		if a.status == vocab.AttemptUnknown {
			unknown++
		}
	}
	for k, r := range ag.snapshot() {
		if r.outcome != "sent" && r.outcome != "refused 409 "+string(vocab.CodeReplyWindowInactive) {
			t.Logf("agent: message %s: %s after %d tries (last: %s)", k, r.outcome, r.tries, r.lastErr)
		}
	}
	t.Logf("agent: %d deliveries of %d messages, outcomes %v", ag.deliveryCount(), len(ag.snapshot()), outcomes)
	t.Logf("attempts: %d %v; simulator: %d sendmessage calls, %d media replies accepted, %d CDN uploads; staged media: %d rows, %d uploaded",
		len(attempts), attemptStatus, len(sent), mediaSent, tap.uploadCount(), staged, uploaded)
	t.Logf("COUNTS: %d messages, %d kills, %d media replies sent, %d unknown outcomes, %d doubles; setup %v, stream %v, quiet after %v, total %v",
		len(msgs), kills, mediaSent, unknown, doubles, ready.Sub(began).Round(time.Millisecond), streamed.Sub(ready).Round(time.Millisecond),
		quieted.Sub(streamed).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// mediaCrashKillLoop kills and restarts the worker until the stream is over and at least
// mediaCrashMinKills kills happened. Of every three kills, one comes a few milliseconds
// after the next CDN upload the simulator answered, one a few milliseconds after the next
// sendmessage it received, one after a random uptime; a triggered kill whose moment does
// not come within its wait is a timed one.
func mediaCrashKillLoop(ctx context.Context, w *crashWorker, r *mrand.Rand, streamOver <-chan struct{}) error {
	kinds := []string{crashOnUpload, crashOnSend, crashOnTimer}
	for n := 0; ; n++ {
		over := false
		select {
		case <-streamOver:
			over = true
		default:
		}
		if over && w.killCount() >= mediaCrashMinKills {
			return nil
		}
		// Up long enough to recover (lease, hand-off, a send retried after its heartbeat
		// timeout) and answer a few messages.
		if err := crashPause(ctx, 2*time.Second+crashRandDur(r, 2*time.Second)); err != nil {
			return err
		}
		kind := kinds[n%len(kinds)]
		wait := 4*time.Second + crashRandDur(r, 4*time.Second)
		if kind != crashOnTimer {
			wait = 20 * time.Second
		}
		if over {
			kind, wait = crashOnTimer, crashRandDur(r, 2*time.Second)
		}
		var offset time.Duration
		if kind != crashOnTimer {
			offset = crashRandDur(r, 3*time.Millisecond)
		}
		moment, err := w.awaitKillMoment(ctx, kind, wait, offset, nil)
		if err != nil {
			return err
		}
		how := fmt.Sprintf("after %v (timer)", wait.Round(time.Millisecond))
		switch {
		case moment == momentTriggered:
			how = fmt.Sprintf("%v after a %s", offset, kind)
		case kind != crashOnTimer:
			how = fmt.Sprintf("after %v: no %s came", wait, kind)
		}
		if err := w.killAndRestart(ctx, r, how); err != nil {
			return err
		}
	}
}

// ---------------------------------------------------------------------------------------
// The webhook agent.

// mediaCrashReply is the agent's work on one message: its media reply and its verdict.
type mediaCrashReply struct {
	key, kind, fileName string
	data                []byte
	token               string // the latest delivery's session token
	outcome             string // "" while in flight
	lastErr             string
	tries               int
}

// mediaCrashAgent is the webhook receiver and the agent behind it: for every message
// delivered it answers the webhook at once, then replies with one image (even message
// numbers) or one file (odd) through the reply API under the message's Idempotency-Key,
// repeating the same request while the worker is down or the outcome unknown, and then
// marks the message handled (POST /v1/done). A message delivered again (a hand-off
// retried after a kill) is the same work: its newer token is used from then on.
type mediaCrashAgent struct {
	ctx     context.Context
	gateway string
	hc      *http.Client
	wg      sync.WaitGroup

	mu         sync.Mutex
	replies    map[string]*mediaCrashReply // by message key
	byHash     map[string]string           // SHA-256 of a reply's bytes → message key
	deliveries int
	inflight   int
}

func (a *mediaCrashAgent) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err == nil {
		err = webhook.Verify([]byte(webhookSecret), req.Header.Get(webhook.HeaderTimestamp),
			req.Header.Get(webhook.HeaderSignature), body, time.Now(), time.Minute)
	}
	var d webhook.Delivery
	if err == nil {
		err = json.Unmarshal(body, &d)
	}
	if err != nil || d.Message.MessageKey == "" || d.SessionToken == "" {
		http.Error(w, fmt.Sprintf("bad delivery: %v", err), http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	a.deliveries++
	r, again := a.replies[d.Message.MessageKey]
	if !again {
		r = mediaCrashReplyFor(d.Message.MessageKey, d.Message.Summary)
		a.replies[r.key] = r
		sum := sha256.Sum256(r.data)
		a.byHash[hex.EncodeToString(sum[:])] = r.key
	}
	r.token = d.SessionToken
	start := !again || r.outcome == "gave up" // a message delivered again after the agent gave up: once more
	if start {
		r.outcome = ""
		a.inflight++
		a.wg.Add(1)
	}
	a.mu.Unlock()
	if start {
		go func() {
			defer a.wg.Done()
			a.answer(r)
		}()
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{}`)
}

// mediaCrashReplyFor is the reply to a message: bytes of its own, so that the simulator's
// CDN object tells which message a send answered.
func mediaCrashReplyFor(key, summary string) *mediaCrashReply {
	r := &mediaCrashReply{key: key}
	n, _ := strconv.Atoi(strings.TrimPrefix(summary, "media crash message "))
	if n%2 == 0 {
		sum := sha256.Sum256([]byte(key))
		img := image.NewRGBA(image.Rect(0, 0, 8, 8))
		for i := range img.Pix {
			img.Pix[i] = sum[i%len(sum)] ^ byte(i)
		}
		var b bytes.Buffer
		_ = png.Encode(&b, img) // into memory: cannot fail
		r.kind, r.data = "image", b.Bytes()
	} else {
		r.kind, r.fileName = "file", "answer-"+strconv.Itoa(n)+".txt"
		r.data = []byte("the agent's answer to message " + key + "\n" + strings.Repeat("a line of the answer\n", 40))
	}
	return r
}

// answer replies to one message and gives the verdict, retrying what may succeed later.
func (a *mediaCrashAgent) answer(r *mediaCrashReply) {
	outcome := "gave up"
	defer func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		r.outcome = outcome
		a.inflight--
	}()
	deadline := time.Now().Add(mediaCrashRetryFor)
	idem := "media-" + r.key
	var unknownSince time.Time
	for {
		if a.ctx.Err() != nil || time.Now().After(deadline) {
			return
		}
		a.mu.Lock()
		token := r.token
		r.tries++
		a.mu.Unlock()
		res, err := agent.ReplyMedia(a.ctx, a.hc, a.gateway, token, r.kind, r.fileName, r.data, idem)
		var fe *agent.FetchError
		switch {
		case err == nil && res.Status == vocab.AttemptSent:
			outcome = "sent"
		case err == nil && res.Status == vocab.AttemptUnknown:
			// Possibly no outcome yet (the wait timed out, or the send waits for its retry
			// after a kill): ask again with the same key for a while; an outcome left
			// unknown by a crash stays unknown.
			if unknownSince.IsZero() {
				unknownSince = time.Now()
			}
			if time.Since(unknownSince) > mediaCrashUnknownFor {
				outcome = "unknown"
			}
		case err == nil:
			outcome = "answered " + res.Status
		case errors.As(err, &fe) && (fe.Status > 500 || fe.Status == http.StatusTooManyRequests):
			// Nothing sent (or the worker is restarting): the same request again.
		case errors.As(err, &fe):
			outcome = fmt.Sprintf("refused %d %s", fe.Status, fe.Code)
		}
		if outcome == "sent" || outcome == "unknown" {
			outcome += a.finish(token, deadline)
			return
		}
		if outcome != "gave up" {
			return
		}
		a.mu.Lock()
		if err != nil {
			r.lastErr = err.Error()
		} else {
			r.lastErr = "202 " + res.Status
		}
		a.mu.Unlock()
		if crashPause(a.ctx, 300*time.Millisecond) != nil {
			return
		}
	}
}

// finish marks the message handled (POST /v1/done), retrying while the worker is down. It
// returns "" or what kept the verdict from being given.
func (a *mediaCrashAgent) finish(token string, deadline time.Time) string {
	for a.ctx.Err() == nil && time.Now().Before(deadline) {
		req, err := http.NewRequestWithContext(a.ctx, http.MethodPost, a.gateway+"/v1/done", strings.NewReader(`{"status":"handled"}`))
		if err != nil {
			return ", done: " + err.Error()
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := a.hc.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusOK:
				return ""
			case resp.StatusCode < 500:
				return fmt.Sprintf(", done refused %d", resp.StatusCode)
			}
		}
		if crashPause(a.ctx, 300*time.Millisecond) != nil {
			break
		}
	}
	return ", done not given"
}

func (a *mediaCrashAgent) snapshot() map[string]mediaCrashReply {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]mediaCrashReply, len(a.replies))
	for k, r := range a.replies {
		out[k] = *r
	}
	return out
}

func (a *mediaCrashAgent) deliveryCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.deliveries
}

func (a *mediaCrashAgent) summary() map[string]int {
	out := map[string]int{}
	for _, r := range a.snapshot() {
		out[r.outcome]++
	}
	return out
}

// messageOf is the message whose reply has these bytes ("" none).
func (a *mediaCrashAgent) messageOf(data []byte) string {
	sum := sha256.Sum256(data)
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.byHash[hex.EncodeToString(sum[:])]
}

// ---------------------------------------------------------------------------------------
// Quiet, and the final state.

// mediaCrashQuiet is nil when the system is quiet: the simulator has nothing queued, the
// poller fetched again after the latest non-empty page, no attempt is pending or sending,
// no reply of the agent is in flight, and the message of every open window was answered
// by the agent (or has its verdict).
func mediaCrashQuiet(ctx context.Context, ctl *ilinksim.Control, pool *pgxpool.Pool, tap *crashTap, ag *mediaCrashAgent, botID string) error {
	bs, err := ctl.BotState(ctx, botID)
	if err != nil {
		return err
	}
	if bs.Queued > 0 {
		return fmt.Errorf("the simulator still holds %d messages not handed out", bs.Queued)
	}
	if !tap.caughtUp() {
		return errors.New("no getupdates since the latest non-empty page (its commit is not confirmed)")
	}
	var busy int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM send_attempts WHERE status IN ('pending', 'sending')").Scan(&busy); err != nil {
		return err
	}
	if busy > 0 {
		return fmt.Errorf("%d attempts still in flight", busy)
	}
	replies := ag.snapshot()
	var inflight []string
	for k, r := range replies {
		if r.outcome == "" {
			inflight = append(inflight, fmt.Sprintf("%s (%d tries, last: %s)", k, r.tries, r.lastErr))
		}
	}
	if len(inflight) > 0 {
		sort.Strings(inflight)
		return fmt.Errorf("%d replies in flight: %v", len(inflight), inflight)
	}
	rows, err := pool.Query(ctx, `
SELECT m.message_key, m.status FROM reply_windows AS w JOIN inbound_messages AS m ON m.message_key = w.source_message_key
WHERE w.state = 'open' AND m.status IN ('received', 'processing')`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var waiting []string
	for rows.Next() {
		var key, status string
		if err := rows.Scan(&key, &status); err != nil {
			return err
		}
		if _, ok := replies[key]; !ok {
			waiting = append(waiting, key+" ("+status+")")
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(waiting) > 0 {
		return fmt.Errorf("open windows whose message the agent has not answered yet: %v", waiting)
	}
	return nil
}

// mediaCrashAssertOncePerMessage: every sendmessage with a media item refers to a CDN
// object that decrypts to the reply of one message, and no message's reply (by those
// bytes, and by the store's attempts of the message) reached the simulator more than
// once; a reply the agent was told is sent reached it exactly once. It returns the media
// replies the simulator accepted.
func mediaCrashAssertOncePerMessage(t *testing.T, ctx context.Context, ctl *ilinksim.Control, pool *pgxpool.Pool, ag *mediaCrashAgent, sent []ilinksim.SentMessage) (accepted int) {
	t.Helper()
	byMessage := map[string][]string{} // message key → the sends that carried its bytes
	byParam := map[string]int{}
	for _, m := range sent {
		var msg struct {
			ItemList []sentItem `json:"item_list"`
		}
		if err := json.Unmarshal(m.Msg, &msg); err != nil {
			t.Errorf("send #%d: msg does not parse: %v", m.Index, err)
			continue
		}
		for _, it := range msg.ItemList {
			var param string
			switch {
			case it.ImageItem != nil:
				param = it.ImageItem.Media.EncryptQueryParam
			case it.FileItem != nil:
				param = it.FileItem.Media.EncryptQueryParam
			default:
				t.Errorf("send #%d (client id %q): an item of type %d, not the agent's image or file", m.Index, m.ClientID, it.Type)
				continue
			}
			byParam[param]++
			obj, err := ctl.CDNObject(ctx, param)
			if err != nil {
				t.Errorf("send #%d: its CDN object: %v", m.Index, err)
				continue
			}
			key := ag.messageOf(obj.Plaintext)
			if key == "" {
				t.Errorf("send #%d (client id %q): its CDN object (%d bytes) is no reply of the agent", m.Index, m.ClientID, len(obj.Plaintext))
				continue
			}
			byMessage[key] = append(byMessage[key], fmt.Sprintf("#%d %s client id %s", m.Index, m.Outcome, m.ClientID))
			if m.Outcome == ilinksim.OutcomeAccepted {
				accepted++
			}
		}
	}
	for key, sends := range byMessage {
		if len(sends) > 1 {
			t.Errorf("message %s: its media reply reached the simulator %d times: %v", key, len(sends), sends)
		}
	}
	for param, n := range byParam {
		if n > 1 {
			t.Errorf("CDN object %.12s...: sent %d times", param, n)
		}
	}
	for key, r := range ag.snapshot() {
		if strings.HasPrefix(r.outcome, "sent") && len(byMessage[key]) != 1 {
			t.Errorf("message %s: the reply API answered sent, but the simulator got its media %d times", key, len(byMessage[key]))
		}
	}

	// By the store: the sends of each message's attempts.
	calls := map[string]int{}
	for _, m := range sent {
		calls[m.ClientID]++
	}
	rows, err := pool.Query(ctx, "SELECT source_message_key, client_message_id, content_type FROM send_attempts")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	perMessage := map[string]int{}
	for rows.Next() {
		var key, client, ctype string
		if err := rows.Scan(&key, &client, &ctype); err != nil {
			t.Fatal(err)
		}
		if ctype == "text" {
			continue
		}
		perMessage[key] += calls[client]
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for key, n := range perMessage {
		if n > 1 {
			t.Errorf("message %s: its media attempts reached the simulator %d times", key, n)
		}
	}
	return accepted
}

// mediaCrashAssertStaged: staged media is consistent with the attempts: every media
// attempt refers to staged media of its window and kind, none is referred to by two
// attempts, a sent attempt's media has its upload recorded, and no upload is recorded for
// media no attempt refers to. Staged rows no attempt refers to are the requests repeated
// after the first one staged (each request stages its bytes before its Update, which
// answers the first outcome). It returns the staged rows and the uploaded ones; more CDN
// uploads than uploaded rows are uploads a kill kept from being recorded (uploaded again
// by the retried send, never sent twice).
func mediaCrashAssertStaged(t *testing.T, pool *pgxpool.Pool, cdnUploads int) (staged, uploaded int) {
	t.Helper()
	ctx := context.Background()
	if err := pool.QueryRow(ctx, "SELECT count(*), count(uploaded_at) FROM outbound_media").Scan(&staged, &uploaded); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `
SELECT a.attempt_id, a.status, a.content_type, a.reply_window_id, coalesce(a.payload->'media'->>'media_id', ''),
       m.media_id IS NOT NULL, coalesce(m.kind, ''), coalesce(m.reply_window_id, 0), m.uploaded_at IS NOT NULL
FROM send_attempts AS a LEFT JOIN outbound_media AS m ON m.media_id::text = a.payload->'media'->>'media_id'
WHERE a.content_type <> 'text' ORDER BY a.attempt_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	refs := map[string]string{}
	media := 0
	for rows.Next() {
		var id, status, ctype, mediaID, kind string
		var window, mwindow int64
		var found, up bool
		if err := rows.Scan(&id, &status, &ctype, &window, &mediaID, &found, &kind, &mwindow, &up); err != nil {
			t.Fatal(err)
		}
		media++
		switch {
		case mediaID == "":
			t.Errorf("attempt %s (%s, %s) refers to no staged media", id, ctype, status)
			continue
		case !found:
			t.Errorf("attempt %s (%s, %s) refers to staged media %s that is not in outbound_media", id, ctype, status, mediaID)
			continue
		case kind != ctype || mwindow != window:
			t.Errorf("attempt %s (%s, window %d) refers to staged media %s of kind %s, window %d", id, ctype, window, mediaID, kind, mwindow)
		case status == vocab.AttemptSent && !up:
			t.Errorf("attempt %s is sent but its staged media %s has no upload recorded", id, mediaID)
		}
		if prev, dup := refs[mediaID]; dup {
			t.Errorf("staged media %s serves two attempts: %s and %s", mediaID, prev, id)
		}
		refs[mediaID] = id
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	var orphans []string
	rows, err = pool.Query(ctx, "SELECT media_id::text FROM outbound_media WHERE uploaded_at IS NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		if _, ok := refs[id]; !ok {
			orphans = append(orphans, id)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if len(orphans) > 0 {
		t.Errorf("%d staged media rows have an upload recorded but no attempt refers to them: %v", len(orphans), orphans)
	}
	if cdnUploads < uploaded {
		t.Errorf("%d staged media rows have an upload recorded, but the simulator answered only %d CDN uploads", uploaded, cdnUploads)
	}
	t.Logf("staged media: %d media attempts, %d rows staged (%d repeated requests), %d uploads recorded, %d CDN uploads (%d not recorded: cut by a kill)",
		media, staged, staged-len(refs), uploaded, cdnUploads, cdnUploads-uploaded)
	return staged, uploaded
}
