package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// Route kinds (vocab.RouteKinds) and the bounds of a webhook route are vocab's; these
// are the store's own bounds of a route's settings.
const (
	// maxWebhookURLBytes bounds a webhook URL.
	maxWebhookURLBytes = 4096
	// maxRouteNameBytes bounds a workflow type and a task queue.
	maxRouteNameBytes = 1000
	// maxChangedByBytes bounds who changed a route.
	maxChangedByBytes = 200
)

// CheckWebhookURL accepts an absolute http(s) URL with a host, without user info or a
// fragment. Its errors name the fault, never the URL.
func CheckWebhookURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("want an absolute http or https URL")
	case u.Host == "":
		return errors.New("the URL has no host")
	case u.User != nil:
		return errors.New("user info in the URL is not allowed (the request is signed instead)")
	case u.Fragment != "":
		return errors.New("the URL has a fragment")
	}
	return nil
}

// WebhookHost is the host of a webhook URL ("" when it has none): what may be shown of a
// webhook, whose path or query may hold a key.
func WebhookHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// RouteInput sets a bot's route.
type RouteInput struct {
	AccountKey string
	// Kind is one of vocab.RouteKinds.
	Kind string
	// WebhookURL, WebhookSecret (stored sealed) and WebhookTimeout (0: the handler's
	// default) configure a webhook route.
	WebhookURL     string
	WebhookSecret  sealing.Secret
	WebhookTimeout time.Duration
	// WorkflowType and TaskQueue configure a workflow route.
	WorkflowType string
	TaskQueue    string
	// MCPAgent names the MCP agent of an mcp route.
	MCPAgent string
	// ILinkClient names the iLink client of an ilink route.
	ILinkClient string
	// By says who set the route (recorded in the audit).
	By string
}

// Route is a bot's route. WebhookURL and WebhookSecret are set by GetRoute only;
// ListRoutes and SetRoute return the webhook's host alone.
type Route struct {
	AccountKey     string
	Kind           string
	WebhookURL     string
	WebhookHost    string
	WebhookSecret  sealing.Secret
	WebhookTimeout time.Duration
	WorkflowType   string
	TaskQueue      string
	MCPAgent       string
	ILinkClient    string
	// Version changes with every change of the route, and is never reused for the
	// account (nor for any other): a handler built for (account, version) stays right.
	Version   int64
	UpdatedAt time.Time
	UpdatedBy string
}

// RouteChange is one audited change of a route: the kinds before and after ("" for the
// default route) and what the new route names; never a secret or a full webhook URL.
type RouteChange struct {
	AuditID    int64
	AccountKey string
	ChangedAt  time.Time
	ChangedBy  string
	OldKind    string
	NewKind    string
	Detail     string
	NewVersion int64
}

func routeBinding(accountKey string) string { return accountKey }

// checkRouteName refuses a blank workflow type or task queue, or one that is not valid
// UTF-8, holds a control character or is too long.
func checkRouteName(v, what string) error {
	switch {
	case strings.TrimSpace(v) == "":
		return fail(vocab.CodeInvalidInput, "%s is required", what)
	case len(v) > maxRouteNameBytes || !utf8.ValidString(v) || strings.ContainsFunc(v, unicode.IsControl):
		return fail(vocab.CodeInvalidInput, "%s must be at most %d bytes of UTF-8 without control characters", what, maxRouteNameBytes)
	}
	return nil
}

// checkChangedBy refuses an empty or unstorable author.
func checkChangedBy(by string) error {
	if strings.TrimSpace(by) == "" || len(by) > maxChangedByBytes || !utf8.ValidString(by) || strings.ContainsFunc(by, unicode.IsControl) {
		return fail(vocab.CodeInvalidInput, "who changed the route must be 1 to %d bytes of UTF-8 without control characters", maxChangedByBytes)
	}
	return nil
}

// validateRoute checks a route's whole input; no error text holds the secret or the URL.
func validateRoute(in RouteInput) error {
	if err := validAccountKey(in.AccountKey); err != nil {
		return err
	}
	if err := checkChangedBy(in.By); err != nil {
		return err
	}
	webhookSet := in.WebhookURL != "" || !in.WebhookSecret.IsZero() || in.WebhookTimeout != 0
	workflowSet := in.WorkflowType != "" || in.TaskQueue != ""
	if in.Kind != vocab.RouteMCP && in.MCPAgent != "" {
		return fail(vocab.CodeInvalidInput, "only an mcp route names an MCP agent")
	}
	if in.Kind != vocab.RouteILink && in.ILinkClient != "" {
		return fail(vocab.CodeInvalidInput, "only an ilink route names an iLink client")
	}
	switch in.Kind {
	case vocab.RouteWebhook:
		if workflowSet {
			return fail(vocab.CodeInvalidInput, "a webhook route takes no workflow type or task queue")
		}
		if len(in.WebhookURL) > maxWebhookURLBytes {
			return fail(vocab.CodeInvalidInput, "webhook URL is over %d bytes", maxWebhookURLBytes)
		}
		if in.WebhookURL == "" {
			return fail(vocab.CodeInvalidInput, "webhook URL is required")
		}
		if err := CheckWebhookURL(in.WebhookURL); err != nil {
			return fail(vocab.CodeInvalidInput, "webhook URL: %v", err)
		}
		switch n := len(in.WebhookSecret.Reveal()); {
		case n < vocab.MinWebhookSecretBytes:
			return fail(vocab.CodeInvalidInput, "webhook secret must be at least %d bytes (it has %d)", vocab.MinWebhookSecretBytes, n)
		case n > vocab.MaxWebhookSecretBytes:
			return fail(vocab.CodeInvalidInput, "webhook secret must be at most %d bytes", vocab.MaxWebhookSecretBytes)
		}
		if in.WebhookTimeout < 0 || in.WebhookTimeout > vocab.MaxWebhookTimeout || in.WebhookTimeout%time.Millisecond != 0 {
			return fail(vocab.CodeInvalidInput, "webhook timeout must be whole milliseconds between 0 (the default) and %v", vocab.MaxWebhookTimeout)
		}
	case vocab.RouteWorkflow:
		if webhookSet {
			return fail(vocab.CodeInvalidInput, "a workflow route takes no webhook settings")
		}
		if err := checkRouteName(in.WorkflowType, "workflow type"); err != nil {
			return err
		}
		if err := checkRouteName(in.TaskQueue, "task queue"); err != nil {
			return err
		}
	case vocab.RouteMCP:
		if webhookSet || workflowSet {
			return fail(vocab.CodeInvalidInput, "an mcp route takes no webhook or workflow settings")
		}
		if err := CheckMCPAgentName(in.MCPAgent); err != nil {
			return err
		}
	case vocab.RouteILink:
		if webhookSet || workflowSet {
			return fail(vocab.CodeInvalidInput, "an ilink route takes no webhook or workflow settings")
		}
		if err := CheckILinkClientName(in.ILinkClient); err != nil {
			return err
		}
	case vocab.RouteEcho:
		if webhookSet || workflowSet {
			return fail(vocab.CodeInvalidInput, "an echo route takes no settings")
		}
	default:
		return fail(vocab.CodeInvalidInput, "route kind %q is unknown: want one of %s", in.Kind, strings.Join(vocab.RouteKinds, ", "))
	}
	return nil
}

// routeDetail is what the audit records of a route: a webhook's host, a workflow's type
// and task queue.
func routeDetail(in RouteInput) string {
	switch in.Kind {
	case vocab.RouteWebhook:
		return "webhook host " + WebhookHost(in.WebhookURL)
	case vocab.RouteWorkflow:
		return fmt.Sprintf("workflow %s on task queue %s", in.WorkflowType, in.TaskQueue)
	case vocab.RouteMCP:
		return "mcp agent " + in.MCPAgent
	case vocab.RouteILink:
		return "ilink client " + in.ILinkClient
	}
	return in.Kind
}

// SetRoute sets (or replaces) a bot's route and audits the change. The webhook secret is
// sealed (purpose route_secret, bound to the account key). Bad input (an unknown kind, a
// setting of another kind, a bad URL, a short secret) is invalid_input and an unknown
// account account_not_found; a refused call writes nothing. The route returned holds no
// secret and only the webhook's host.
func (s *Store) SetRoute(ctx context.Context, now time.Time, in RouteInput) (Route, error) {
	now = now.Truncate(time.Microsecond)
	if err := validNow(now); err != nil {
		return Route{}, err
	}
	if err := validateRoute(in); err != nil {
		return Route{}, err
	}
	params := dbq.UpsertRouteParams{AccountKey: in.AccountKey, Kind: in.Kind, Now: now, UpdatedBy: in.By}
	switch in.Kind {
	case vocab.RouteWebhook:
		sealed, err := s.keys.Seal(sealing.PurposeRouteSecret, routeBinding(in.AccountKey), in.WebhookSecret)
		if err != nil {
			return Route{}, &Error{Code: vocab.CodeInternal, Msg: "seal route secret", Err: err}
		}
		ms := int32(in.WebhookTimeout / time.Millisecond)
		params.WebhookUrl, params.KeyGeneration, params.Nonce, params.Ciphertext = &in.WebhookURL, &sealed.KeyGeneration, sealed.Nonce, sealed.Ciphertext
		if ms > 0 {
			params.WebhookTimeoutMs = &ms
		}
	case vocab.RouteWorkflow:
		params.WorkflowType, params.TaskQueue = &in.WorkflowType, &in.TaskQueue
	case vocab.RouteMCP:
		params.McpAgent = &in.MCPAgent
	case vocab.RouteILink:
		params.IlinkClient = &in.ILinkClient
	}
	out := Route{AccountKey: in.AccountKey, Kind: in.Kind, WebhookHost: WebhookHost(in.WebhookURL), WebhookTimeout: in.WebhookTimeout,
		WorkflowType: in.WorkflowType, TaskQueue: in.TaskQueue, MCPAgent: in.MCPAgent, ILinkClient: in.ILinkClient, UpdatedAt: now,
		UpdatedBy: in.By}
	if in.Kind != vocab.RouteWebhook {
		out.WebhookHost = ""
	}
	err := s.inTx(ctx, "set route", func(q *dbq.Queries) error {
		old, err := lockRoute(ctx, q, in.AccountKey)
		if err != nil {
			return err
		}
		if out.Version, err = q.UpsertRoute(ctx, params); err != nil {
			return err
		}
		return q.InsertRouteAudit(ctx, dbq.InsertRouteAuditParams{AccountKey: in.AccountKey, ChangedAt: now, ChangedBy: in.By,
			OldKind: old, NewKind: &in.Kind, Detail: routeDetail(in), NewVersion: &out.Version})
	})
	if err != nil {
		return Route{}, err
	}
	return out, nil
}

// lockRoute locks the account whose route changes and returns its current route's kind
// (nil: the default route); an unknown account is account_not_found.
func lockRoute(ctx context.Context, q *dbq.Queries, accountKey string) (*string, error) {
	if _, err := q.LockAccountForRoute(ctx, accountKey); err != nil {
		return nil, notFound(err, vocab.CodeAccountNotFound, "account not found")
	}
	row, err := q.GetRoute(ctx, accountKey)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return &row.Kind, nil
}

// ClearRoute puts a bot back on the worker's default route and audits the change. It
// reports whether the bot had a route (clearing the default route changes and audits
// nothing). An unknown account is account_not_found.
func (s *Store) ClearRoute(ctx context.Context, now time.Time, accountKey, by string) (bool, error) {
	now = now.Truncate(time.Microsecond)
	if err := validNow(now); err != nil {
		return false, err
	}
	if err := validAccountKey(accountKey); err != nil {
		return false, err
	}
	if err := checkChangedBy(by); err != nil {
		return false, err
	}
	var cleared bool
	err := s.inTx(ctx, "clear route", func(q *dbq.Queries) error {
		old, err := lockRoute(ctx, q, accountKey)
		if err != nil || old == nil {
			return err
		}
		cleared = true
		if err := q.DeleteRoute(ctx, accountKey); err != nil {
			return err
		}
		return q.InsertRouteAudit(ctx, dbq.InsertRouteAuditParams{AccountKey: accountKey, ChangedAt: now, ChangedBy: by,
			OldKind: old, Detail: "default route"})
	})
	return cleared && err == nil, err
}

// GetRoute returns a bot's route with its webhook URL and opened secret; found is false
// on the default route (no route). It does not check that the account exists. A secret
// the keys cannot open is sealed_unreadable.
func (s *Store) GetRoute(ctx context.Context, accountKey string) (r Route, found bool, err error) {
	if err := validAccountKey(accountKey); err != nil {
		return Route{}, false, err
	}
	var row dbq.AccountRoute
	err = s.read(ctx, "get route", func(q *dbq.Queries) error {
		var err error
		row, err = q.GetRoute(ctx, accountKey)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	if err != nil || !found {
		return Route{}, false, err
	}
	r, err = s.routeOf(row)
	return r, err == nil, err
}

// routeOf is a stored route with its webhook URL and opened secret; a secret the keys
// cannot open is sealed_unreadable.
func (s *Store) routeOf(row dbq.AccountRoute) (Route, error) {
	r := routeFrom(row.AccountKey, row.Kind, row.WebhookUrl, row.WebhookTimeoutMs, row.WorkflowType, row.TaskQueue, row.McpAgent,
		row.IlinkClient, row.Version, row.UpdatedAt, row.UpdatedBy)
	if row.Kind == vocab.RouteWebhook && row.WebhookUrl != nil && row.KeyGeneration != nil {
		r.WebhookURL = *row.WebhookUrl
		secret, err := s.keys.Open(sealing.PurposeRouteSecret, routeBinding(row.AccountKey),
			sealing.Sealed{KeyGeneration: *row.KeyGeneration, Nonce: row.Nonce, Ciphertext: row.Ciphertext})
		if err != nil {
			return Route{}, &Error{Code: vocab.CodeSealedUnreadable, Msg: "open route secret", Err: err}
		}
		r.WebhookSecret = secret
	}
	return r, nil
}

// ListRoutes lists every bot's route (a bot without one is on the default route), by
// account key, without secrets or full webhook URLs.
func (s *Store) ListRoutes(ctx context.Context) ([]Route, error) {
	var out []Route
	err := s.read(ctx, "list routes", func(q *dbq.Queries) error {
		rows, err := q.ListRoutes(ctx)
		for _, r := range rows {
			out = append(out, routeFrom(r.AccountKey, r.Kind, r.WebhookUrl, r.WebhookTimeoutMs, r.WorkflowType, r.TaskQueue, r.McpAgent,
				r.IlinkClient, r.Version, r.UpdatedAt, r.UpdatedBy))
		}
		return err
	})
	return out, err
}

// ListRouteChanges lists the audited route changes, oldest first, of one account or
// (accountKey "") of all.
func (s *Store) ListRouteChanges(ctx context.Context, accountKey string) ([]RouteChange, error) {
	if err := validAccountFilter(accountKey); err != nil {
		return nil, err
	}
	var out []RouteChange
	err := s.read(ctx, "list route changes", func(q *dbq.Queries) error {
		rows, err := q.ListRouteAudit(ctx, accountKey)
		for _, r := range rows {
			c := RouteChange{AuditID: r.AuditID, AccountKey: r.AccountKey, ChangedAt: r.ChangedAt, ChangedBy: r.ChangedBy, Detail: r.Detail}
			if r.OldKind != nil {
				c.OldKind = *r.OldKind
			}
			if r.NewKind != nil {
				c.NewKind = *r.NewKind
			}
			if r.NewVersion != nil {
				c.NewVersion = *r.NewVersion
			}
			out = append(out, c)
		}
		return err
	})
	return out, err
}

// routeFrom is a stored route without its secret: a webhook's host, not its URL.
func routeFrom(key, kind string, webhookURL *string, timeoutMs *int32, workflowType, taskQueue, mcpAgent, iLinkClient *string, version int64,
	updatedAt time.Time, updatedBy string) Route {
	r := Route{AccountKey: key, Kind: kind, Version: version, UpdatedAt: updatedAt, UpdatedBy: updatedBy}
	if webhookURL != nil {
		r.WebhookHost = WebhookHost(*webhookURL)
	}
	if timeoutMs != nil {
		r.WebhookTimeout = time.Duration(*timeoutMs) * time.Millisecond
	}
	if workflowType != nil {
		r.WorkflowType = *workflowType
	}
	if taskQueue != nil {
		r.TaskQueue = *taskQueue
	}
	if mcpAgent != nil {
		r.MCPAgent = *mcpAgent
	}
	if iLinkClient != nil {
		r.ILinkClient = *iLinkClient
	}
	return r
}

// ValidRouteKind reports whether kind is one of vocab.RouteKinds.
func ValidRouteKind(kind string) bool { return slices.Contains(vocab.RouteKinds, kind) }
