package replyapi

import (
	"context"
	"net/http"

	"github.com/ilinkflow/ilinkflow/sealing"
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

func (a *API) typing(r *http.Request, body []byte, token sealing.Secret) (int, any, *apiError) {
	var req TypingRequest
	if err := decode(body, &req); err != nil {
		return 0, nil, err
	}
	if req.Status != "typing" && req.Status != "cancel" {
		return 0, nil, &apiError{code: CodeInvalidStatus, msg: `status must be "typing" or "cancel"`}
	}
	sess, aerr := a.session(r.Context(), token)
	if aerr != nil {
		return 0, nil, aerr
	}
	if a.cfg.Typing == nil {
		return 0, nil, &apiError{code: CodeTypingFailed, msg: "typing is not configured"}
	}
	if err := a.cfg.Typing.Typing(r.Context(), sess.AccountKey, sess.PeerID, req.Status == "typing"); err != nil {
		a.log.Warn("typing failed", "route", "typing", "session", sess.SessionID, "error", err)
		return 0, nil, &apiError{code: CodeTypingFailed, msg: "iLink did not take the typing status; retry"}
	}
	return http.StatusOK, TypingResponse(req), nil
}
