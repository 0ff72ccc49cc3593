package replyapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// reply serves a JSON POST /v1/reply: headers, then the session, then the body, then the
// window's send Update.
func (a *API) reply(w http.ResponseWriter, r *http.Request, token sealing.Secret) (int, any, *apiError) {
	key, kerr := idempotencyKey(r)
	if kerr != nil {
		return 0, nil, kerr
	}
	if e := checkReplyContentType(r); e != nil {
		return 0, nil, e
	}
	if e := declaredSize(r, a.cfg.MaxBodyBytes, CodeBodyTooLarge, "request body"); e != nil {
		return 0, nil, e
	}
	log := a.log.With("route", "reply")
	sess, serr := a.session(r.Context(), token)
	var prior *store.SendOutcome
	expired := serr != nil && serr.code == CodeWindowExpired
	if serr != nil && !expired {
		// A repeated request learns the first one's outcome, even after its window ended;
		// without a first attempt (an unknown token never has one) the refusal stands and
		// the body is never read.
		if prior, serr = a.repeated(r.Context(), log, token, key, serr); serr != nil {
			if StatusOf(serr.code) >= http.StatusInternalServerError {
				return 0, nil, serr // the store did not answer: no second wait for it
			}
			if status, out, ok := a.heldAnswer(r.Context(), log, token, key); ok {
				return status, out, nil
			}
			return 0, nil, serr
		}
	}
	body, e := a.readBody(w, r)
	if e != nil {
		return 0, nil, e
	}
	req, e := parseReply(body, a.cfg.MaxTextBytes)
	if e != nil {
		return 0, nil, e
	}
	match := func(att store.Attempt) bool { return sameReply(att, req) }
	if prior != nil {
		status, out, e := a.priorAnswer(log.With("request_id", key), key, *prior, match)
		return status, out, e
	}
	if expired {
		// The window expired (its workflow may be gone): a repeated request learns its
		// first outcome; a new reply is held for the user's next message, or refused.
		if p, e := a.repeated(r.Context(), log, token, key, serr); e == nil {
			return a.priorAnswer(log.With("request_id", key), key, *p, match)
		}
		if !req.holds() {
			return 0, nil, serr
		}
		return a.holdExpired(r.Context(), log, token, key, req)
	}
	return a.sendUpdate(r, log, token, key, sess, req, nil, match)
}

// heldAnswer answers a repeated request whose first one was held with the held reply
// (ok false: the key held nothing, or the store could not tell).
func (a *API) heldAnswer(ctx context.Context, log *slog.Logger, token sealing.Secret, key string) (int, any, bool) {
	if key == "" {
		return 0, nil, false
	}
	sctx, cancel := a.storeContext(ctx)
	h, ok, err := a.cfg.Store.FindHeldReply(sctx, store.ByToken(token), UpdateID(key))
	cancel()
	if err != nil || !ok {
		return 0, nil, false
	}
	status, out, _ := a.answer(log.With("request_id", key), key, wfapi.SendResult{Status: wfapi.SendHeld, HeldID: h.HeldID,
		HeldPosition: h.Position, ErrorCode: h.Reason})
	return status, out, true
}

// holdExpired holds a text reply whose window expired (store.HoldReply, under the
// token's session, with the request id the send Update would have used).
func (a *API) holdExpired(ctx context.Context, log *slog.Logger, token sealing.Secret, key string, req ReplyRequest) (int, any, *apiError) {
	if key == "" {
		key = uuid.NewString()
	}
	log = log.With("request_id", key)
	sctx, cancel := a.storeContext(ctx)
	defer cancel()
	h, err := a.cfg.Store.HoldReply(sctx, a.cfg.Now(), store.HoldInput{Session: store.ByToken(token), RequestID: UpdateID(key),
		Content: vocab.Content{Type: req.Type, Text: req.Text}, Final: req.Final})
	if err != nil {
		return 0, nil, a.storeFailure(sctx, log, "the held reply", err)
	}
	return a.answer(log, key, wfapi.SendResult{Status: wfapi.SendHeld, HeldID: h.HeldID, HeldPosition: h.Position, ErrorCode: h.Reason})
}

// repeated is what a request whose session was refused (serr) does next: with an
// idempotency key whose first request made an attempt, it answers that attempt's outcome
// (prior, once the body shows the same reply); otherwise the refusal stands.
func (a *API) repeated(ctx context.Context, log *slog.Logger, token sealing.Secret, key string, serr *apiError) (*store.SendOutcome, *apiError) {
	if key == "" || StatusOf(serr.code) >= http.StatusInternalServerError {
		return nil, serr
	}
	prior, ok, e := a.findReply(ctx, log, token, key)
	switch {
	case e != nil:
		return nil, e
	case !ok:
		return nil, serr
	}
	return &prior, nil
}

// sendUpdate runs a reply's send Update under a validated session (media: staged media)
// and answers its outcome; match tells whether a stored attempt carries this reply.
func (a *API) sendUpdate(r *http.Request, log *slog.Logger, token sealing.Secret, key string, sess store.Session, req ReplyRequest,
	media *wfapi.MediaRef, match func(store.Attempt) bool) (int, any, *apiError) {
	explicit := key != ""
	if key == "" {
		key = uuid.NewString()
	}
	id := UpdateID(key)
	log = log.With("session", sess.SessionID, "reply_window_id", sess.ReplyWindowID, "request_id", key)
	workflowID, aerr := a.reachableWindow(r.Context(), log, sess)
	if aerr != nil {
		return 0, nil, aerr
	}

	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.ReplyTimeout)
	defer cancel()
	var res wfapi.SendResult
	var err error
	for wait := windowStartRetry; ; wait *= 2 {
		var h client.WorkflowUpdateHandle
		h, err = a.cfg.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			UpdateID:   id,
			WorkflowID: workflowID,
			UpdateName: wfapi.UpdateSend,
			Args: []any{wfapi.SendRequest{Type: req.Type, Text: req.Text, RequestID: id, SessionID: sess.SessionID, Media: media,
				Final: req.Final, NoHold: !req.holds()}},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = h.Get(ctx, &res)
		}
		// An agent that answers at once may reach the window before its workflow started
		// (the poll hands a message off as its window starts): the same Update (its id
		// makes a repeat safe) goes again while the store says the window is open, up to
		// windowStartWait.
		if wait > windowStartWait || !a.windowStarting(ctx, sess, err) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	if err != nil {
		var nf *serviceerror.NotFound
		if explicit && errors.As(err, &nf) {
			// The window's workflow ended: a repeated request answers its first outcome.
			if prior, ok, e := a.findReply(ctx, log, token, key); e == nil && ok {
				return a.priorAnswer(log, key, prior, match)
			}
			sctx, cancel := a.storeContext(ctx)
			h, ok, herr := a.cfg.Store.FindHeldReply(sctx, store.ByToken(token), id)
			cancel()
			if herr == nil && ok {
				return a.answer(log, key, wfapi.SendResult{Status: wfapi.SendHeld, HeldID: h.HeldID, HeldPosition: h.Position, ErrorCode: h.Reason})
			}
		}
		return a.updateFailure(ctx, log, sess, key, err)
	}
	if explicit && res.AttemptID != "" {
		// Temporal answers a repeated Update id with the first Update's outcome, whatever
		// this request carries: a key reused for another reply is a conflict.
		if prior, ok, e := a.findReply(ctx, log, token, key); e == nil && ok && !match(prior.Attempt) {
			return 0, nil, reusedKey()
		}
	}
	return a.answer(log, key, res)
}

// Bounds of the wait for a window's workflow to start (sendUpdate): the first retry after
// windowStartRetry, each next after twice as long, none after windowStartWait in all.
const (
	windowStartRetry = 25 * time.Millisecond
	windowStartWait  = 5 * time.Second
)

// windowStarting reports whether err says the window's workflow is not there while the
// store has the window open: its workflow is about to start.
func (a *API) windowStarting(ctx context.Context, sess store.Session, err error) bool {
	var nf *serviceerror.NotFound
	if !errors.As(err, &nf) || ctx.Err() != nil {
		return false
	}
	sctx, cancel := a.storeContext(ctx)
	defer cancel()
	w, werr := a.cfg.Store.GetWindow(sctx, sess.ReplyWindowID)
	return werr == nil && w.State == vocab.WindowOpen && a.cfg.Now().Before(w.ExpiresAt)
}

// storeContext bounds one store call made for a request by StoreTimeout. It outlives
// the request's own end (a client gone, or the reply's wait over): what the store says
// still decides the answer.
func (a *API) storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), a.cfg.StoreTimeout)
}

// findReply finds the attempt a request's idempotency key made through the token's
// session (whatever became of the session since); ok is false when there is none.
func (a *API) findReply(ctx context.Context, log *slog.Logger, token sealing.Secret, key string) (store.SendOutcome, bool, *apiError) {
	sctx, cancel := a.storeContext(ctx)
	defer cancel()
	prior, ok, err := a.cfg.Store.FindReply(sctx, store.ByToken(token), UpdateID(key))
	if err != nil {
		return store.SendOutcome{}, false, a.storeFailure(sctx, log, "the idempotency key", err)
	}
	return prior, ok, nil
}

// priorAnswer answers a repeated request with the outcome of the attempt its first
// request made, or attempt_conflict when the attempt carries another reply.
func (a *API) priorAnswer(log *slog.Logger, key string, prior store.SendOutcome, match func(store.Attempt) bool) (int, any, *apiError) {
	if !match(prior.Attempt) {
		return 0, nil, reusedKey()
	}
	att := prior.Attempt
	return a.answer(log, key, wfapi.SendResult{AttemptID: att.AttemptID, ClientMessageID: att.ClientMessageID,
		Status: att.Status, ProviderMessageID: att.ProviderMessageID, ErrorCode: att.OutcomeCode(), SendsLeft: prior.Window.SendsLeft()})
}

// storeFailure maps the failure of a store call made for a request (sctx: its context)
// to a refusal. The store's rules keep their codes (an unknown rule code means the
// session cannot be used: invalid_agent_session); content the store refused
// (invalid_input) is 400 naming what (never a session error); a database that failed or
// did not answer within StoreTimeout is 503 store_unavailable; anything else is internal.
func (a *API) storeFailure(sctx context.Context, log *slog.Logger, what string, err error) *apiError {
	code := string(store.CodeOf(err))
	switch {
	case code == CodeInvalidInput:
		msg := what + " was refused by the store"
		var se *store.Error
		if errors.As(err, &se) && se.Msg != "" {
			msg += ": " + clip(se.Msg, 200)
		}
		log.Warn("the store refused the request's content", "what", what, "error", err)
		return &apiError{code: CodeInvalidInput, msg: msg}
	case code == CodeAttachmentNotFound || code == CodeWrongMessage || code == CodeMediaNotFound:
		return &apiError{code: code, msg: mediaMessage(code)}
	case store.IsRuleViolation(err):
		if StatusOf(code) == http.StatusInternalServerError {
			code = CodeInvalidSession
		}
		return &apiError{code: code, msg: failureMessage(code)}
	case code == CodeSealedUnreadable:
		// An operator's fault (a key generation missing from the sealing keys), not the
		// agent's: retry after the operator added the key.
		log.Error("the sealing keys cannot open what the request needs", "what", what, "error", err)
		return &apiError{code: CodeSealedUnreadable, msg: failureMessage(CodeSealedUnreadable)}
	case code == CodeStoreUnavailable, errors.Is(sctx.Err(), context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		log.Warn("store unavailable", "what", what, "timeout", a.cfg.StoreTimeout, "error", err)
		return &apiError{code: CodeStoreUnavailable, msg: failureMessage(CodeStoreUnavailable)}
	}
	log.Error("store call failed", "what", what, "error", err)
	return &apiError{code: CodeInternal, msg: failureMessage(CodeInternal)}
}

// temporalAnswers checks, within DefaultHealthTimeout, that Temporal answers before an
// Update is sent: an unreachable Temporal is a prompt 503 with nothing sent.
func (a *API) temporalAnswers(ctx context.Context, log *slog.Logger) *apiError {
	hctx, cancel := context.WithTimeout(ctx, DefaultHealthTimeout)
	defer cancel()
	if _, err := a.cfg.Temporal.CheckHealth(hctx, &client.CheckHealthRequest{}); err != nil {
		log.Warn("Temporal unavailable; nothing sent", "error", err)
		return &apiError{code: CodeTemporalUnavailable, msg: failureMessage(CodeTemporalUnavailable)}
	}
	return nil
}

// sameReply reports whether an attempt carries the reply a request asks for.
func sameReply(a store.Attempt, req ReplyRequest) bool {
	return a.Content.Type == req.Type && a.Content.Text == req.Text
}

func reusedKey() *apiError {
	return &apiError{code: CodeAttemptConflict, msg: "the Idempotency-Key was used for another reply"}
}

// answer maps a send's outcome to the reply's answer.
func (a *API) answer(log *slog.Logger, key string, res wfapi.SendResult) (int, any, *apiError) {
	out := ReplyResponse{AttemptID: res.AttemptID, ClientMessageID: res.ClientMessageID, Status: res.Status,
		ProviderMessageID: res.ProviderMessageID, SendsLeft: res.SendsLeft, RequestID: key}
	switch res.Status {
	case vocab.AttemptSent:
		log.Info("reply sent", "attempt", res.AttemptID)
		return http.StatusOK, out, nil
	case vocab.AttemptUnknown:
		log.Warn("reply outcome unknown", "attempt", res.AttemptID)
		return http.StatusAccepted, out, nil
	case wfapi.SendHeld:
		out.HeldID, out.Position, out.Reason = res.HeldID, res.HeldPosition, res.ErrorCode
		log.Info("reply held for the user's next message", "held_reply", res.HeldID, "reason", res.ErrorCode, "position", res.HeldPosition)
		return http.StatusAccepted, out, nil
	case vocab.AttemptPending, vocab.AttemptSending:
		// A repeated request whose first one's send is still in progress (its worker died
		// mid-send and the send waits for its retry): no outcome yet, as when the wait
		// times out; a later repeat learns it.
		log.Info("reply still in progress; outcome not known yet", "attempt", res.AttemptID, "status", res.Status)
		out.Status = vocab.AttemptUnknown
		return http.StatusAccepted, out, nil
	}
	code := res.ErrorCode
	if StatusOf(code) == http.StatusInternalServerError {
		log.Error("send failed with an unexpected code", "attempt", res.AttemptID, "status", res.Status, "code", code)
		code = CodeInternal
	}
	e := &apiError{code: code, msg: failureMessage(code), attempt: &out}
	if code == CodeThrottled {
		e.retryAfter = a.retryAfter(res.RetryAfter)
	}
	log.Info("reply not sent", "attempt", res.AttemptID, "code", code)
	return 0, nil, e
}

// updateFailure maps a failed Update: the window's typed refusals keep their code; a
// window whose workflow is gone answers with the window's stored state; a timeout is an
// unknown outcome (202); Temporal being unreachable is 503.
func (a *API) updateFailure(ctx context.Context, log *slog.Logger, sess store.Session, key string, err error) (int, any, *apiError) {
	unknown := ReplyResponse{Status: vocab.AttemptUnknown, RequestID: key}
	var act *temporal.ActivityError
	var app *temporal.ApplicationError
	var nf *serviceerror.NotFound
	var unavailable *serviceerror.Unavailable
	switch {
	case errors.As(err, &act):
		// The send activity itself failed (retries exhausted): it may have transmitted.
		log.Error("send activity failed; outcome unknown", "error", err)
		return http.StatusAccepted, unknown, nil
	case errors.As(err, &app):
		code := app.Type()
		if StatusOf(code) == http.StatusInternalServerError {
			log.Error("send update failed", "type", code, "error", err)
			code = CodeInternal
		}
		e := &apiError{code: code, msg: failureMessage(code)}
		var res wfapi.SendResult
		if app.HasDetails() && app.Details(&res) == nil && res.AttemptID != "" {
			e.attempt = &ReplyResponse{AttemptID: res.AttemptID, ClientMessageID: res.ClientMessageID, Status: res.Status,
				ProviderMessageID: res.ProviderMessageID, SendsLeft: res.SendsLeft, RequestID: key}
		}
		if code == CodeThrottled {
			e.retryAfter = a.retryAfter(res.RetryAfter)
		}
		log.Info("reply refused", "code", code)
		return 0, nil, e
	case errors.As(err, &nf):
		// The window's workflow completed (expired, retired) or is not started yet.
		sctx, cancel := a.storeContext(ctx)
		w, werr := a.cfg.Store.GetWindow(sctx, sess.ReplyWindowID)
		cancel()
		switch {
		case werr == nil && w.State == vocab.WindowExpired:
			return 0, nil, &apiError{code: CodeWindowExpired, msg: failureMessage(CodeWindowExpired)}
		case werr == nil && w.State != vocab.WindowOpen:
			return 0, nil, &apiError{code: CodeWindowInactive, msg: failureMessage(CodeWindowInactive)}
		case werr != nil && (store.CodeOf(werr) == vocab.CodeUnavailable || errors.Is(sctx.Err(), context.DeadlineExceeded)):
			log.Warn("window workflow not found and the store unavailable", "error", err, "store_error", werr)
			return 0, nil, &apiError{code: CodeStoreUnavailable, msg: failureMessage(CodeStoreUnavailable)}
		}
		log.Warn("window workflow not found", "error", err)
		return 0, nil, &apiError{code: CodeWindowUnavailable, msg: failureMessage(CodeWindowUnavailable)}
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || isDeadline(err):
		// No answer in time (or the client went away): the Update may still run.
		log.Warn("reply outcome unknown: no answer in time", "timeout", a.cfg.ReplyTimeout, "error", err)
		return http.StatusAccepted, unknown, nil
	case errors.As(err, &unavailable):
		log.Warn("Temporal unavailable", "error", err)
		return 0, nil, &apiError{code: CodeTemporalUnavailable, msg: failureMessage(CodeTemporalUnavailable)}
	}
	log.Error("send update failed", "error", err)
	return 0, nil, &apiError{code: CodeInternal, msg: failureMessage(CodeInternal)}
}

// retryAfter is how long a throttled agent waits: until the bot's breaker closes.
func (a *API) retryAfter(until time.Time) time.Duration {
	if until.IsZero() {
		return DefaultThrottleRetry
	}
	return until.Sub(a.cfg.Now())
}

func isDeadline(err error) bool {
	var de *serviceerror.DeadlineExceeded
	return errors.As(err, &de)
}

// session validates a bearer token (a read: it writes nothing), within StoreTimeout.
func (a *API) session(ctx context.Context, token sealing.Secret) (store.Session, *apiError) {
	sctx, cancel := a.storeContext(ctx)
	defer cancel()
	sess, err := a.cfg.Store.ValidateSession(sctx, a.cfg.Now(), store.ByToken(token))
	if err != nil {
		return store.Session{}, a.storeFailure(sctx, a.log, "the session token", err)
	}
	return sess, nil
}

// reachableWindow is the workflow id of the session's window, once Temporal answers: an
// Update is only sent when it can be (a prompt refusal otherwise, nothing written).
func (a *API) reachableWindow(ctx context.Context, log *slog.Logger, sess store.Session) (string, *apiError) {
	id, aerr := a.windowWorkflow(ctx, log, sess)
	if aerr != nil {
		return "", aerr
	}
	if aerr := a.temporalAnswers(ctx, log); aerr != nil {
		return "", aerr
	}
	return id, nil
}

// windowWorkflow is the workflow id of the session's window (store.Store.WindowWorkflowID:
// it reads the installation once and caches it).
func (a *API) windowWorkflow(ctx context.Context, log *slog.Logger, sess store.Session) (string, *apiError) {
	sctx, cancel := a.storeContext(ctx)
	defer cancel()
	id, err := a.cfg.Store.WindowWorkflowID(sctx, sess.ReplyWindowID)
	if err == nil {
		return id, nil
	}
	code := CodeInternal
	if store.CodeOf(err) == vocab.CodeUnavailable || errors.Is(sctx.Err(), context.DeadlineExceeded) {
		code = CodeStoreUnavailable
		log.Warn("reading the window's workflow id: store unavailable", "error", err)
	} else {
		log.Error("reading the window's workflow id failed", "error", err)
	}
	return "", &apiError{code: code, msg: failureMessage(code)}
}
