package replyapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/jsontext"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// parseDone reads the JSON body of a verdict: strict JSON, a status of handled or
// failed, and a reason of at most MaxReasonBytes of UTF-8 without U+0000 (blank is none).
func parseDone(body []byte) (DoneRequest, *apiError) {
	if !jsontext.Valid(body) {
		return DoneRequest{}, &apiError{code: CodeInvalidReason, msg: "request body is not valid UTF-8 (or has an unpaired surrogate escape)"}
	}
	var req DoneRequest
	if err := decode(body, &req); err != nil {
		return DoneRequest{}, err
	}
	if req.Status != vocab.MessageHandled && req.Status != vocab.MessageFailed {
		return DoneRequest{}, &apiError{code: CodeInvalidStatus, msg: `status must be "handled" or "failed"`}
	}
	if fault := vocab.CheckText(req.Reason, vocab.MaxReasonBytes); fault != vocab.TextOK && fault != vocab.TextEmpty {
		return DoneRequest{}, &apiError{code: CodeInvalidReason, msg: fmt.Sprintf("reason must be at most %d bytes of UTF-8 without U+0000", vocab.MaxReasonBytes)}
	}
	return req, nil
}

// done serves POST /v1/done: headers, the session, the body, then the window's finish
// Update.
func (a *API) done(w http.ResponseWriter, r *http.Request, token sealing.Secret) (int, any, *apiError) {
	if e := declaredSize(r, a.cfg.MaxBodyBytes, CodeBodyTooLarge, "request body"); e != nil {
		return 0, nil, e
	}
	sess, aerr := a.session(r.Context(), token)
	if aerr != nil {
		return 0, nil, aerr
	}
	body, aerr := a.readBody(w, r)
	if aerr != nil {
		return 0, nil, aerr
	}
	req, aerr := parseDone(body)
	if aerr != nil {
		return 0, nil, aerr
	}
	log := a.log.With("route", "done", "session", sess.SessionID, "reply_window_id", sess.ReplyWindowID)
	workflowID, aerr := a.reachableWindow(r.Context(), log, sess)
	if aerr != nil {
		return 0, nil, aerr
	}
	// One door for verdicts: the window's finish Update, as agent.Finish uses, so the
	// verdict waits for the window's sends in progress and ends its re-offers.
	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.ReplyTimeout)
	defer cancel()
	var m wfapi.FinishResult
	h, err := a.cfg.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		UpdateID:     "done-api/" + uuid.NewString(),
		WorkflowID:   workflowID,
		UpdateName:   wfapi.UpdateFinish,
		Args:         []any{wfapi.FinishRequest{Handled: req.Status == vocab.MessageHandled, Reason: req.Reason}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, &m)
	}
	if err != nil {
		status, out, e := a.updateFailure(ctx, log, sess, "", err)
		if status == http.StatusAccepted {
			out = DoneResponse{Status: vocab.AttemptUnknown} // the verdict may still be recorded
		}
		return status, out, e
	}
	log.Info("message finished", "status", m.Status)
	return http.StatusOK, DoneResponse{Status: m.Status}, nil
}
