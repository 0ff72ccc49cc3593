package replyapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/jsontext"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// POST /v1/typing {"status":"typing"|"cancel"} shows or cancels "typing" to the user of the
// session's message (docs/agents.md). It costs no reply quota and writes nothing; the
// gateway already shows "typing" from the hand-off until the first reply or the verdict.

// Typing error codes.
const (
	CodeTypingFailed = "typing_failed"
)

// Typing shows (on) or cancels "typing" to a bot's peer (an *activities.Typer).
type Typing interface {
	Typing(ctx context.Context, accountKey, peerID string, on bool) error
}

// TypingRequest is the body of POST /v1/typing.
type TypingRequest struct {
	Status string `json:"status"`
}

// TypingResponse is the answer of POST /v1/typing.
type TypingResponse struct {
	Status string `json:"status"`
}

// parseTyping reads the JSON body of POST /v1/typing (strict JSON).
func parseTyping(body []byte) (TypingRequest, *apiError) {
	if !jsontext.Valid(body) {
		return TypingRequest{}, &apiError{code: CodeInvalidJSON, msg: "request body is not valid UTF-8 (or has an unpaired surrogate escape)"}
	}
	var req TypingRequest
	if err := decode(body, &req); err != nil {
		return TypingRequest{}, err
	}
	if req.Status != "typing" && req.Status != "cancel" {
		return TypingRequest{}, &apiError{code: CodeInvalidStatus, msg: `status must be "typing" or "cancel"`}
	}
	return req, nil
}

// typing serves POST /v1/typing: the session, the body, then iLink (the Typer bounds its
// own calls, the account's read included).
func (a *API) typing(w http.ResponseWriter, r *http.Request, token sealing.Secret) (int, any, *apiError) {
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
	req, aerr := parseTyping(body)
	if aerr != nil {
		return 0, nil, aerr
	}
	if a.cfg.Typing == nil {
		return 0, nil, &apiError{code: CodeTypingFailed, msg: "typing is not configured"}
	}
	if err := a.cfg.Typing.Typing(r.Context(), sess.AccountKey, sess.PeerID, req.Status == "typing"); err != nil {
		var te *activities.TypingError
		if errors.As(err, &te) && te.Code == string(vocab.CodeUnavailable) {
			a.log.Warn("typing failed: store unavailable", "route", "typing", "session", sess.SessionID, "error", err)
			return 0, nil, &apiError{code: CodeStoreUnavailable, msg: failureMessage(CodeStoreUnavailable)}
		}
		a.log.Warn("typing failed", "route", "typing", "session", sess.SessionID, "error", err)
		return 0, nil, &apiError{code: CodeTypingFailed, msg: "iLink did not take the typing status; retry"}
	}
	return http.StatusOK, TypingResponse(req), nil
}
