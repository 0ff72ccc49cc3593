package replyapi

import (
	"net/http"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// POST /v1/remind asks for the bot's reminder before the session's window closes
// (docs/agents.md): with the bot's reminder on, the gateway then sends it once, the set
// time before the window ends, held replies or not, unless the user writes again first.
// The body is empty or {}.

// RemindResponse is the answer of POST /v1/remind.
type RemindResponse struct {
	Status string `json:"status"` // requested
	// RemindAt is when the reminder goes, if the user has not written again by then.
	RemindAt time.Time `json:"remind_at"`
}

// remind serves POST /v1/remind: the session (a live one), the body, then the store.
func (a *API) remind(w http.ResponseWriter, r *http.Request, token sealing.Secret) (int, any, *apiError) {
	if e := declaredSize(r, a.cfg.MaxBodyBytes, CodeBodyTooLarge, "request body"); e != nil {
		return 0, nil, e
	}
	if _, aerr := a.session(r.Context(), token); aerr != nil {
		return 0, nil, aerr
	}
	body, aerr := a.readBody(w, r)
	if aerr != nil {
		return 0, nil, aerr
	}
	if len(body) != 0 {
		var empty struct{}
		if e := decode(body, &empty); e != nil {
			return 0, nil, e
		}
	}
	sctx, cancel := a.storeContext(r.Context())
	defer cancel()
	_, due, err := a.cfg.Store.RequestReminder(sctx, a.cfg.Now(), store.ByToken(token))
	if err != nil {
		return 0, nil, a.storeFailure(sctx, a.log.With("route", "remind"), "the reminder", err)
	}
	return http.StatusOK, RemindResponse{Status: "requested", RemindAt: due}, nil
}
