package e2e_test

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// heldCrashAgent answers every window that gets an agent session: a number of text replies
// (heldCrashReplies; one while draining), one at a time through send Updates, the last
// marked final, then its verdict handled through the finish Update. Update ids and
// request ids are derived from the window and the reply's number, so a call repeated
// after a kill is the same reply.
type heldCrashAgent struct {
	tc    client.Client
	st    *store.Store
	inst  wfapi.Installation
	botOf map[string]int // account key → bot number
	logf  func(format string, args ...any)

	mu        sync.Mutex
	r         *mrand.Rand
	draining  bool
	seen      map[int64]bool
	seenAt    map[string]time.Time       // by provider message id: when the agent took up its window
	answers   map[string]heldCrashAnswer // by provider message id, once finished
	replies   []heldCrashReply
	heldTexts map[string]bool // texts of the replies answered held
	lastErr   map[int64]string
	inflight  int
	wg        sync.WaitGroup
}

// heldCrashReply is one reply of the agent and the answer its send Update got.
type heldCrashReply struct {
	bot                  int
	window               int64
	messageKey, provider string
	index, of            int
	final                bool
	requestID, text      string
	outcome              string // "ok" or why not (see update)
	result               wfapi.SendResult
}

// heldCrashAnswer is the agent's whole answer to one window.
type heldCrashAnswer struct {
	window  int64
	replies int
	finish  string // "ok: <status>" or why not
}

func (a *heldCrashAgent) drain() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.draining = true
}

func (a *heldCrashAgent) run(ctx context.Context) {
	defer a.wg.Wait()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		open, err := a.st.ListWindows(ctx, store.WindowFilter{State: vocab.WindowOpen})
		if err != nil {
			continue
		}
		for _, w := range open {
			a.mu.Lock()
			seen := a.seen[w.ReplyWindowID]
			a.mu.Unlock()
			if seen || !a.hasSession(ctx, w.ReplyWindowID) {
				continue
			}
			a.mu.Lock()
			a.seen[w.ReplyWindowID] = true
			a.seenAt[w.ProviderMessageID] = time.Now()
			a.inflight++
			a.mu.Unlock()
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				a.answer(ctx, w)
			}()
		}
	}
}

func (a *heldCrashAgent) hasSession(ctx context.Context, windowID int64) bool {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	v, err := a.tc.QueryWorkflow(cctx, a.inst.WindowWorkflowID(windowID), "", wfapi.QueryWindowState)
	if err != nil {
		return false
	}
	var ws wfapi.WindowState
	return v.Get(&ws) == nil && ws.SessionID != ""
}

// answer sends the window's replies one after the other, then the verdict.
func (a *heldCrashAgent) answer(ctx context.Context, w store.Window) {
	a.mu.Lock()
	n := 1
	if !a.draining {
		n = heldCrashReplies[a.r.IntN(len(heldCrashReplies))]
	}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.inflight--
		delete(a.lastErr, w.ReplyWindowID)
	}()
	bot := a.botOf[w.AccountKey]
	for i := 1; i <= n; i++ {
		r := heldCrashReply{bot: bot, window: w.ReplyWindowID, messageKey: w.SourceMessageKey, provider: w.ProviderMessageID,
			index: i, of: n, final: i == n, requestID: fmt.Sprintf("reply-%d-%d", w.ReplyWindowID, i),
			text: fmt.Sprintf("bot %d, message %s: reply %d of %d", bot, w.ProviderMessageID, i, n)}
		if r.final {
			r.text += " (final)"
		}
		req := wfapi.SendRequest{Type: "text", Text: r.text, RequestID: r.requestID, Final: r.final}
		r.outcome = a.update(ctx, w.ReplyWindowID, r.requestID, wfapi.UpdateSend, req, &r.result)
		if r.outcome == "" {
			return // stopped
		}
		a.mu.Lock()
		a.replies = append(a.replies, r)
		if r.outcome == "ok" && r.result.Status == wfapi.SendHeld {
			a.heldTexts[r.text] = true
		}
		a.mu.Unlock()
	}
	var fin wfapi.FinishResult
	finish := a.update(ctx, w.ReplyWindowID, fmt.Sprintf("finish-%d", w.ReplyWindowID), wfapi.UpdateFinish, wfapi.FinishRequest{Handled: true}, &fin)
	if finish == "" {
		return
	}
	if finish == "ok" {
		finish += ": " + fin.Status
	}
	a.mu.Lock()
	a.answers[w.ProviderMessageID] = heldCrashAnswer{window: w.ReplyWindowID, replies: n, finish: finish}
	a.mu.Unlock()
}

// update runs one Update of a window until it has an answer, retrying while the worker is
// down or the call times out; it returns "ok", why the answer is not one ("refused:<code>",
// "window workflow closed", "activity failed: ..."), or "" when ctx ended.
func (a *heldCrashAgent) update(ctx context.Context, windowID int64, updateID, name string, arg, res any) string {
	began, tries, lastErr := time.Now(), 0, ""
	defer func() {
		if d := time.Since(began); d > 20*time.Second && a.logf != nil {
			a.logf("agent: window %d, update %s took %v (%d tries; last error: %s)", windowID, updateID, d.Round(time.Millisecond), tries, lastErr)
		}
	}()
	for ctx.Err() == nil {
		tries++
		cctx, cancel := context.WithTimeout(ctx, crashCallTimeout)
		h, err := a.tc.UpdateWorkflow(cctx, client.UpdateWorkflowOptions{
			UpdateID: updateID, WorkflowID: a.inst.WindowWorkflowID(windowID), UpdateName: name,
			Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = h.Get(cctx, res)
		}
		cancel()
		var nf *serviceerror.NotFound
		var act *temporal.ActivityError
		switch {
		case err == nil:
			return "ok"
		case refusalCode(err) != "":
			return "refused:" + refusalCode(err)
		case errors.As(err, &nf):
			return "window workflow closed"
		case errors.As(err, &act):
			return "activity failed: " + err.Error()
		}
		lastErr = err.Error()
		a.mu.Lock()
		a.lastErr[windowID] = updateID + ": " + err.Error()
		a.mu.Unlock()
		if crashPause(ctx, 200*time.Millisecond) != nil {
			break
		}
	}
	return ""
}

// seenAfter is how long after since the agent took up the message's window.
func (a *heldCrashAgent) seenAfter(provider string, since time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seenAt[provider].Sub(since).Round(time.Millisecond)
}

// wasHeld reports whether a reply with this text was answered held.
func (a *heldCrashAgent) wasHeld(text string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.heldTexts[text]
}

// answered reports whether the agent finished answering the message.
func (a *heldCrashAgent) answered(provider string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.answers[provider]
	return ok
}

// idle reports whether no answer is in flight and every given window was answered.
func (a *heldCrashAgent) idle(open []int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inflight > 0 {
		var retrying []string
		for id, e := range a.lastErr {
			retrying = append(retrying, fmt.Sprintf("window %d: %s", id, e))
		}
		sort.Strings(retrying)
		return fmt.Errorf("%d answers in flight (retrying: %v)", a.inflight, retrying)
	}
	answered := map[int64]bool{}
	for _, an := range a.answers {
		answered[an.window] = true
	}
	for _, id := range open {
		if !answered[id] {
			return fmt.Errorf("open window %d not answered by the agent yet", id)
		}
	}
	return nil
}

// describe says what the agent can see of a window's workflow (for a failure message).
func (a *heldCrashAgent) describe(ctx context.Context, windowID int64) string {
	ca := &crashAgent{tc: a.tc, inst: a.inst}
	return ca.describe(ctx, windowID)
}

func (a *heldCrashAgent) results() ([]heldCrashReply, map[string]heldCrashAnswer) {
	a.mu.Lock()
	defer a.mu.Unlock()
	answers := make(map[string]heldCrashAnswer, len(a.answers))
	for k, v := range a.answers {
		answers[k] = v
	}
	return slices.Clone(a.replies), answers
}
