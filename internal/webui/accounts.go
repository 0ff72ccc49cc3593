package webui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/operator"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// --- accounts ---

func (s *server) accountsPage(w http.ResponseWriter, r *http.Request, sess *session) {
	rows, err := operator.Accounts(r.Context(), s.cfg.Store, "", true)
	if err != nil {
		s.internal(w, r, "list the accounts", err)
		return
	}
	agents, err := s.cfg.Store.ListMCPAgents(r.Context())
	if err != nil {
		s.internal(w, r, "list the MCP agents", err)
		return
	}
	held, err := s.heldPerAccount(r.Context())
	if err != nil {
		s.internal(w, r, "count the held replies", err)
		return
	}
	s.render(w, http.StatusOK, "accounts", sess, map[string]any{"Accounts": rows, "PauseChoices": pauseChoices,
		"MCPAgents": agents, "MinSecret": store.MinWebhookSecretBytes, "Held": held})
}

// heldSummary is what one bot holds still to send: replies its windows could not carry,
// waiting for their conversations' next windows.
type heldSummary struct {
	Replies       int64
	Bytes         int64
	Conversations int
}

// heldPerAccount sums the held replies still to send per bot (the accounts page shows the
// zero summary of a bot that holds none).
func (s *server) heldPerAccount(ctx context.Context) (map[string]heldSummary, error) {
	counts, err := s.cfg.Store.WaitingHeldCounts(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]heldSummary{}
	for _, c := range counts {
		h := out[c.AccountKey]
		h.Replies += int64(c.Replies)
		h.Bytes += c.Bytes
		h.Conversations++
		out[c.AccountKey] = h
	}
	return out, nil
}

func (s *server) steer(w http.ResponseWriter, r *http.Request, sess *session) {
	key, verb := r.PathValue("key"), r.PathValue("verb")
	if !accountKeyPattern.MatchString(key) || (verb != operator.Pause && verb != operator.Resume && verb != operator.Remove) {
		s.fail(w, r, http.StatusNotFound, "No such account or operation.")
		return
	}
	req := operator.SteerRequest{Verb: verb, AccountKey: key, Reason: "operator (web UI)"}
	if verb == operator.Pause {
		for _, c := range pauseChoices {
			if c.Value == r.PostFormValue("for") {
				req.PauseFor = c.D
			}
		}
		if req.PauseFor == 0 {
			s.fail(w, r, http.StatusBadRequest, "Choose how long to pause.")
			return
		}
	}
	res, err := operator.Steer(r.Context(), s.cfg.Store, s.cfg.Temporal, req)
	if errors.Is(err, store.ErrAccountNotFound) {
		s.fail(w, r, http.StatusNotFound, "No such account.")
		return
	}
	if err != nil {
		s.log.Warn("webui: "+verb, "account", key, "error", err)
		s.setFailure(sess, fmt.Sprintf("%s %s failed: %s", verb, key, steerFailure(err)))
		http.Redirect(w, r, s.url("/accounts"), http.StatusSeeOther)
		return
	}
	msg := fmt.Sprintf("%s is now %s", res.AccountKey, res.Status)
	if !res.PollerSignalled {
		msg += " (no running poller to tell)"
	}
	s.setFlash(sess, msg)
	http.Redirect(w, r, s.url("/accounts"), http.StatusSeeOther)
}

// steerFailure says why a pause, resume or removal failed, by the store's code, in a
// short, stable message; the error itself (the store's or Temporal's text) is logged.
func steerFailure(err error) string {
	switch store.CodeOf(err) {
	case vocab.CodeAccountNotActive:
		return "the account is not active (it may be removed or need a new login)."
	case vocab.CodeGenerationConflict:
		return "the account changed meanwhile (it was enrolled again): reload the page and try again."
	case vocab.CodeInvalidInput:
		return "the account's state does not allow it."
	case vocab.CodeUnavailable:
		return "the database is unavailable: try again in a moment."
	}
	return "the server log has the details."
}

// RouteBy is who the web UI records as the author of the route changes it makes (the
// route audit's changed_by), as its enrollments are requested by "webui".
const RouteBy = "webui"

// route sets a bot's route, or puts it back on the default route, from the accounts
// page's route forms: field kind is a store.RouteKinds kind or "default", and only the
// fields of that kind are read. The store validates the input (a refused change writes
// nothing) and audits the change. The webhook's secret is sealed by the store and never
// shown, logged or sent back; the page shows the webhook's host only.
func (s *server) route(w http.ResponseWriter, r *http.Request, sess *session) {
	key, kind := r.PathValue("key"), r.PostFormValue("kind")
	if !accountKeyPattern.MatchString(key) {
		s.fail(w, r, http.StatusNotFound, "No such account.")
		return
	}
	if kind != operator.RouteDefault && !store.ValidRouteKind(kind) {
		s.fail(w, r, http.StatusBadRequest, "Choose a route.")
		return
	}
	now := time.Now()
	var msg string
	var err error
	if kind == operator.RouteDefault {
		var cleared bool
		if cleared, err = s.cfg.Store.ClearRoute(r.Context(), now, key, RouteBy); err == nil {
			msg = key + " is back on the default route (the worker's handler) from its next message"
			if !cleared {
				msg = key + " is on the default route already"
			}
		}
	} else {
		var rt store.Route
		if rt, err = s.cfg.Store.SetRoute(r.Context(), now, routeInput(r, key, kind)); err == nil {
			shown := operator.Account{Route: rt.Kind, RouteWebhookHost: rt.WebhookHost, RouteWorkflowType: rt.WorkflowType,
				RouteTaskQueue: rt.TaskQueue, RouteMCPAgent: rt.MCPAgent}
			msg = fmt.Sprintf("%s routes to %s from its next message", key, shown.RouteState())
		}
	}
	if errors.Is(err, store.ErrAccountNotFound) {
		s.fail(w, r, http.StatusNotFound, "No such account.")
		return
	}
	if err != nil {
		// The store's error text holds neither the secret nor the webhook's URL.
		s.log.Warn("webui: route", "account", key, "kind", kind, "error", err)
		msg = fmt.Sprintf("route %s failed: %s", key, routeFailure(err))
	}
	s.setFlash(sess, msg)
	http.Redirect(w, r, s.url("/accounts"), http.StatusSeeOther)
}

// routeInput reads the fields of one route kind from a route form.
func routeInput(r *http.Request, key, kind string) store.RouteInput {
	in := store.RouteInput{AccountKey: key, Kind: kind, By: RouteBy}
	switch kind {
	case store.RouteWebhook:
		in.WebhookURL = strings.TrimSpace(r.PostFormValue("webhook_url"))
		if v := r.PostFormValue("webhook_secret"); v != "" {
			in.WebhookSecret = sealing.NewSecret(v)
		}
		if v := strings.TrimSpace(r.PostFormValue("webhook_timeout")); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				d = -1 // refused by the store with the rule for a timeout
			}
			in.WebhookTimeout = d
		}
	case store.RouteWorkflow:
		in.WorkflowType = strings.TrimSpace(r.PostFormValue("workflow_type"))
		in.TaskQueue = strings.TrimSpace(r.PostFormValue("task_queue"))
	case store.RouteMCP:
		in.MCPAgent = r.PostFormValue("mcp_agent")
	}
	return in
}

// routeFailure says why a route change failed: bad input in the store's own words (its
// validation messages name the fault, never the secret or the URL), anything else in a
// short, stable message by the store's code; the error itself is logged.
func routeFailure(err error) string {
	var se *store.Error
	switch store.CodeOf(err) {
	case vocab.CodeInvalidInput:
		if errors.As(err, &se) && se.Err == nil && se.Msg != "" {
			return se.Msg + "."
		}
		return "the database refused the input."
	case vocab.CodeMCPAgentNotFound:
		return "no MCP agent has that name (starter mcp-agent add NAME creates one)."
	case vocab.CodeUnavailable:
		return "the database is unavailable: try again in a moment."
	}
	return "the server log has the details."
}
