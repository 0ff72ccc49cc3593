package workflows

import (
	"fmt"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/store"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// maxTextBytes mirrors the store's default text limit so that the validator refuses an
// oversized text before anything is written; the store enforces its configured limit.
const maxTextBytes = 16 * 1024

// window is the state machine of one reply window.
type window struct {
	in      wfapi.WindowInput
	state   string // open, retired, expired
	sending workflow.Mutex
}

// refusal is the typed error an update validator or handler answers with; its type is
// the store code, so agents branch on it.
func refusal(code store.Code, format string, args ...any) error {
	return temporal.NewApplicationError(fmt.Sprintf(format, args...), string(code))
}

// ReplyWindow owns one reply window from opening to retirement (design.md §4): it opens
// the agent session for the deliverable message and hands it to the agent, accepts sends
// as Updates whose validator refuses what the store would refuse (retired, expired,
// quota) so a refused send writes nothing and leaves no history, runs each send one at a
// time, expires the window on a timer at expires_at, and ends early when retired.
func ReplyWindow(ctx workflow.Context, in wfapi.WindowInput) error {
	w := &window{in: in, state: "open", sending: workflow.NewMutex(ctx)}
	if err := workflow.SetQueryHandler(ctx, wfapi.QueryWindowState, w.query); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, wfapi.UpdateSend, w.send,
		workflow.UpdateHandlerOptions{Validator: w.validate}); err != nil {
		return err
	}
	retired := workflow.GetSignalChannel(ctx, wfapi.SignalRetired)

	if in.Deliverable && in.SessionID == "" {
		var out activities.HandOffOutput
		err := workflow.ExecuteActivity(withOptions(ctx, storeOptions), acts.HandOff,
			activities.HandOffInput{ReplyWindowID: in.ReplyWindowID, Attempt: 1}).Get(ctx, &out)
		if err != nil {
			workflow.GetLogger(ctx).Warn("hand-off failed", "window", in.ReplyWindowID, "error", err)
		} else {
			w.in.SessionID = out.SessionID
		}
	}

	for w.state == "open" {
		wait := w.in.ExpiresAt.Sub(workflow.Now(ctx))
		fired := sleepOrSignal(ctx, wait, retired)
		if retired.ReceiveAsync(nil) {
			w.state = "retired"
			break
		}
		if !fired {
			continue
		}
		var st activities.WindowState
		err := workflow.ExecuteActivity(withOptions(ctx, storeOptions), acts.ExpireWindow,
			activities.ExpireInput{ReplyWindowID: in.ReplyWindowID, Now: workflow.Now(ctx)}).Get(ctx, &st)
		switch {
		case err != nil:
			// The store refused because our clock is behind its expiry: wait a little more.
			workflow.GetLogger(ctx).Warn("expire refused", "window", in.ReplyWindowID, "error", err)
			sleepOrSignal(ctx, time.Second, retired)
		case st.State == store.WindowExpired:
			w.state = "expired"
		case st.State != store.WindowOpen:
			w.state = "retired"
		}
	}
	return workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

func (w *window) query() (wfapi.WindowState, error) {
	return wfapi.WindowState{ReplyWindowID: w.in.ReplyWindowID, State: w.state, ExpiresAt: w.in.ExpiresAt,
		SendsLeft: w.in.MaxSends - w.in.SendsUsed, SessionID: w.in.SessionID}, nil
}

// validate refuses, before anything is written or recorded, what the store would refuse.
func (w *window) validate(ctx workflow.Context, req wfapi.SendRequest) error {
	switch {
	case w.state == "expired" || !workflow.Now(ctx).Before(w.in.ExpiresAt):
		return refusal(store.CodeReplyWindowExpired, "reply window has expired")
	case w.state != "open":
		return refusal(store.CodeReplyWindowInactive, "reply window is %s", w.state)
	case w.in.SendsUsed >= w.in.MaxSends:
		return refusal(store.CodeReplyQuotaExhausted, "reply quota of the window is exhausted")
	case w.in.SessionID == "":
		return refusal(store.CodeInvalidAgentSession, "the window has no agent session")
	case req.Type != "text":
		return refusal(store.CodeInvalidInput, "only text items can be sent through the update")
	case req.Text == "" || len(req.Text) > maxTextBytes || !utf8.ValidString(req.Text):
		return refusal(store.CodeInvalidInput, "text must be 1..%d bytes of UTF-8", maxTextBytes)
	case len(req.RequestID) > 256:
		return refusal(store.CodeInvalidInput, "request id is too long")
	}
	return nil
}

// send runs one reply; sends of a window run one at a time.
func (w *window) send(ctx workflow.Context, req wfapi.SendRequest) (wfapi.SendResult, error) {
	if err := w.sending.Lock(ctx); err != nil {
		return wfapi.SendResult{}, err
	}
	defer w.sending.Unlock()
	if err := w.validate(ctx, req); err != nil { // the state may have moved while waiting
		return wfapi.SendResult{}, err
	}
	requestID := req.RequestID
	if requestID == "" {
		requestID = workflow.GetCurrentUpdateInfo(ctx).ID
	}
	var out activities.SendOutput
	err := workflow.ExecuteActivity(withOptions(ctx, sendOptions), acts.Send, activities.SendInput{
		SessionID: w.in.SessionID, RequestID: requestID, Content: store.Content{Type: req.Type, Text: req.Text},
	}).Get(ctx, &out)
	if err != nil {
		return wfapi.SendResult{}, err
	}
	switch {
	case out.ErrorCode == string(store.CodeReplyQuotaExhausted):
		w.in.SendsUsed = w.in.MaxSends
	case out.AttemptID != "":
		w.in.SendsUsed = w.in.MaxSends - out.SendsLeft
	}
	res := wfapi.SendResult{AttemptID: out.AttemptID, ClientMessageID: out.ClientMessageID, Status: out.Status,
		ProviderMessageID: out.ProviderMessageID, ErrorCode: out.ErrorCode, RetryAfter: out.RetryAfter, SendsLeft: out.SendsLeft}
	if out.Status == "" && out.ErrorCode != "" {
		// Refused by the store (or the throttle breaker) before anything was sent.
		return res, temporal.NewApplicationError("send refused: "+out.ErrorCode, out.ErrorCode, res)
	}
	return res, nil
}
