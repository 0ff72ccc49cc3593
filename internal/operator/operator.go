// Package operator holds the operator's account operations shared by the CLI (starter)
// and the web front end (webui): the account list with its open windows, and pause,
// resume and remove, which change the store first (the source of truth) and then tell the
// account's poller.
package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/wfclient"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// Account is one account as the operator sees it. It holds no secret.
type Account struct {
	AccountKey        string     `json:"account_key"`
	ProviderAccountID string     `json:"provider_account_id"`
	Owner             string     `json:"owner_peer_id"`
	Status            string     `json:"status"`
	Reason            string     `json:"status_reason,omitempty"`
	Generation        int32      `json:"generation"`
	LastPollAt        *time.Time `json:"last_poll_at,omitempty"`
	PauseUntil        *time.Time `json:"pause_until,omitempty"`
	SendsBlockedUntil *time.Time `json:"sends_blocked_until,omitempty"`
	OpenWindow        int64      `json:"open_window,omitempty"`
	ReplacedBy        string     `json:"replaced_by,omitempty"`
	// Token is whether the sealing keys open the bot token: TokenReadable, TokenUnreadable,
	// or TokenUnchecked. TokenProblem says why an unreadable one does not open ("key
	// generation 3 missing") and TokenFix what to do.
	Token        string `json:"token"`
	TokenProblem string `json:"token_problem,omitempty"`
	TokenFix     string `json:"token_fix,omitempty"`
	// Route is the kind of the bot's route (vocab.RouteKinds) or RouteDefault (the
	// worker's --handler); a webhook route shows its host only (never its URL, whose
	// path may hold a key, nor its secret), a workflow route its type and task queue.
	Route             string `json:"route"`
	RouteWebhookHost  string `json:"route_webhook_host,omitempty"`
	RouteWorkflowType string `json:"route_workflow_type,omitempty"`
	RouteTaskQueue    string `json:"route_task_queue,omitempty"`
	// RouteMCPAgent is the MCP agent of an mcp route.
	RouteMCPAgent string `json:"route_mcp_agent,omitempty"`
	// RouteILinkClient is the iLink client of an ilink route.
	RouteILinkClient string `json:"route_ilink_client,omitempty"`
}

// RouteDefault is Account.Route of a bot without a route of its own.
const RouteDefault = "default"

// RouteState is the route as one line shows it: "default", "echo", "webhook
// (agent.example)", "workflow (MyAgent on agents)", "mcp (support-agent)", "ilink
// (openclaw)".
func (a Account) RouteState() string {
	switch {
	case a.RouteWebhookHost != "":
		return a.Route + " (" + a.RouteWebhookHost + ")"
	case a.RouteWorkflowType != "":
		return a.Route + " (" + a.RouteWorkflowType + " on " + a.RouteTaskQueue + ")"
	case a.RouteMCPAgent != "":
		return a.Route + " (" + a.RouteMCPAgent + ")"
	case a.RouteILinkClient != "":
		return a.Route + " (" + a.RouteILinkClient + ")"
	}
	return a.Route
}

// Values of Account.Token.
const (
	TokenReadable   = "readable"
	TokenUnreadable = "unreadable"
	// TokenUnchecked: the lister had no sealing keys to check with.
	TokenUnchecked = "unchecked"
)

// TokenState is Token with its problem, as one line shows it: "readable", "unchecked" or
// "unreadable (key generation 3 missing)".
func (a Account) TokenState() string {
	if a.Token == TokenUnreadable && a.TokenProblem != "" {
		return a.Token + " (" + a.TokenProblem + ")"
	}
	return a.Token
}

// Accounts lists the accounts (only those with status when it is not empty) with their
// open window and route. With checkTokens it also tells whether the store's sealing keys open each
// account's bot token (store.Store.UnreadableTokens); without, Token is TokenUnchecked.
func Accounts(ctx context.Context, st Store, status string, checkTokens bool) ([]Account, error) {
	accounts, err := st.ListAccounts(ctx, status)
	if err != nil {
		return nil, err
	}
	open, err := st.ListWindows(ctx, store.WindowFilter{State: vocab.WindowOpen, Limit: 10000})
	if err != nil {
		return nil, err
	}
	openOf := map[string]int64{}
	for _, w := range open {
		openOf[w.AccountKey] = w.ReplyWindowID
	}
	routes, err := st.ListRoutes(ctx)
	if err != nil {
		return nil, err
	}
	routeOf := map[string]store.Route{}
	for _, r := range routes {
		routeOf[r.AccountKey] = r
	}
	token := TokenUnchecked
	unreadable := map[string]store.UnreadableToken{}
	if checkTokens {
		token = TokenReadable
		us, err := st.UnreadableTokens(ctx, accounts)
		if err != nil {
			return nil, err
		}
		for _, u := range us {
			unreadable[u.AccountKey] = u
		}
	}
	rows := make([]Account, 0, len(accounts))
	for _, a := range accounts {
		row := Account{AccountKey: a.AccountKey, ProviderAccountID: a.ProviderAccountID, Owner: a.OwnerPeerID,
			Status: a.Status, Reason: a.StatusReason, Generation: a.Generation, LastPollAt: a.LastPollAt, PauseUntil: a.PauseUntil,
			SendsBlockedUntil: a.SendsBlockedUntil, OpenWindow: openOf[a.AccountKey], ReplacedBy: a.ReplacedBy, Token: token,
			Route: RouteDefault}
		if r, ok := routeOf[a.AccountKey]; ok {
			row.Route, row.RouteWebhookHost, row.RouteWorkflowType, row.RouteTaskQueue = r.Kind, r.WebhookHost, r.WorkflowType, r.TaskQueue
			row.RouteMCPAgent, row.RouteILinkClient = r.MCPAgent, r.ILinkClient
		}
		if u, ok := unreadable[a.AccountKey]; ok {
			row.Token, row.TokenProblem, row.TokenFix = TokenUnreadable, u.Problem(), u.Fix()
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// Verbs of Steer.
const (
	Pause  = "pause"
	Resume = "resume"
	Remove = "remove"
)

// SteerRequest is an operator's pause, resume or remove of an account.
type SteerRequest struct {
	Verb       string // Pause, Resume or Remove
	AccountKey string
	PauseFor   time.Duration // pause only
	Reason     string        // recorded with a pause or a removal
	Now        time.Time     // zero: time.Now()
}

// SteerResult is the account after the change.
type SteerResult struct {
	AccountKey       string     `json:"account_key"`
	Status           string     `json:"status"`
	PauseUntil       *time.Time `json:"pause_until,omitempty"`
	PollerSignalled  bool       `json:"poller_signalled"`
	CancelledWindows []int64    `json:"cancelled_windows,omitempty"`
}

// Steer pauses, resumes or removes an account: the store first, then its poller is
// signalled (under wfapi.Installation.PollerID); a removal also tells the workflows of
// the windows it cancelled, a resume those of its open windows (which offer what the
// pause refused again). No running poller is not an error (PollerSignalled is false).
func Steer(ctx context.Context, st Store, tc client.Client, req SteerRequest) (SteerResult, error) {
	now := req.Now
	if now.IsZero() {
		now = time.Now()
	}
	if req.Verb != Pause && req.Verb != Resume && req.Verb != Remove {
		return SteerResult{}, fmt.Errorf("unknown operation %q", req.Verb)
	}
	a, err := st.GetAccount(ctx, req.AccountKey)
	if err != nil {
		return SteerResult{}, err
	}
	inst, err := st.Installation(ctx)
	if err != nil {
		return SteerResult{}, err
	}
	var signalName string
	var signalArg any
	var cancelled []int64
	switch req.Verb {
	case Pause:
		until := now.Add(req.PauseFor)
		if a, err = st.PauseAccount(ctx, now, a.AccountKey, a.Generation, until, req.Reason); err != nil {
			return SteerResult{}, err
		}
		signalName, signalArg = wfapi.SignalPause, wfapi.PauseSignal{Until: until, Reason: req.Reason}
	case Resume:
		if a, err = st.ResumeAccount(ctx, now, a.AccountKey, a.Generation); err != nil {
			return SteerResult{}, err
		}
		signalName = wfapi.SignalResume
	case Remove:
		ch, err := st.DisableAccount(ctx, now, a.AccountKey, a.Generation, req.Reason)
		if err != nil {
			return SteerResult{}, err
		}
		a, cancelled = ch.Account, ch.CancelledWindowIDs
		signalName, signalArg = wfapi.SignalStop, wfapi.StopSignal{Reason: req.Reason}
	}
	signalled := true
	if _, err := wfclient.SignalPoller(ctx, tc, inst, a.AccountKey, signalName, signalArg); err != nil {
		var nf *serviceerror.NotFound
		if !errors.As(err, &nf) {
			return SteerResult{}, fmt.Errorf("signal the poller: %w", err)
		}
		signalled = false
	}
	for _, id := range cancelled {
		_ = tc.SignalWorkflow(ctx, inst.WindowWorkflowID(id), "", wfapi.SignalRetired, nil)
	}
	if req.Verb == Resume {
		// What the pause refused (hand-offs, replies) is offered again at once.
		ids, err := st.OpenWindowIDs(ctx, a.AccountKey)
		if err != nil {
			return SteerResult{}, err
		}
		if err := wfclient.SignalAccountResumed(ctx, tc, inst, ids); err != nil {
			return SteerResult{}, err
		}
	}
	return SteerResult{AccountKey: a.AccountKey, Status: a.Status, PauseUntil: a.PauseUntil, PollerSignalled: signalled,
		CancelledWindows: cancelled}, nil
}
