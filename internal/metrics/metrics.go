// Package metrics holds ilinkflow's own Prometheus metrics. Every method is safe on a nil
// *Product, so code that records metrics never needs to check whether metrics are on.
//
// A [Registry] gathers three kinds of metrics on one Prometheus registry: the product's
// counters ([Product]), gauges read from the store at scrape time ([Source]), and the
// Temporal SDK's own metrics, which reach it through an OpenTelemetry meter provider and
// the OpenTelemetry Prometheus exporter ([Registry.TemporalHandler] goes into
// client.Options.MetricsHandler). Account keys appear as label values: they are hashes,
// not secrets. No label ever carries a token.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ilinkflow/ilinkflow/vocab"
)

// Outcomes of a getupdates round trip (besides the ilink error codes).
const (
	PollOK         = "ok"
	PollStaleToken = vocab.SendStaleToken
)

// Outcomes of inbound messages.
const (
	MessageInserted    = "inserted"            // new in the inbox
	MessageDuplicate   = "duplicate"           // already in the inbox (iLink delivered it again)
	MessageAbsorbed    = vocab.MessageAbsorbed // merged into the deliverable message of its peer
	MessageDeferred    = "deferred"            // stored, not dispatched (backlog)
	MessageDeliverable = "deliverable"         // opened a window and goes to the agent
	MessageQuarantined = "quarantined"         // kept sealed in the quarantine: the store could not take it as it is
)

// Outcomes of sends.
const (
	SendSent      = vocab.AttemptSent
	SendFailed    = vocab.AttemptFailed
	SendUnknown   = vocab.AttemptUnknown
	SendRefused   = vocab.FailRefused   // refused by our bookkeeping before anything left
	SendThrottled = vocab.SendThrottled // iLink's throttle, or the bot's open breaker
	SendHeld      = vocab.HeldWaiting   // held: its window could not carry it; sent with the next window
)

// Product records the product's counters (polls, pages, messages by outcome, sends by
// outcome, reply API requests) and the worker's gauge of unreadable accounts. Gauges read
// from the store at scrape time (windows by state, throttle breakers open, seconds since
// the last good poll, held replies still to send) are collected separately (see
// [Registry.WatchStore]). The zero of
// *Product (nil) records nothing.
type Product struct {
	polls    *prometheus.CounterVec
	pages    prometheus.Counter
	messages *prometheus.CounterVec
	sends    *prometheus.CounterVec
	replies  *prometheus.CounterVec
	mcpCalls *prometheus.CounterVec
	facade   *prometheus.CounterVec
	leases   *prometheus.CounterVec
	// moved: poll activities a supervisor replaced, by why their holder was judged dead.
	moved *prometheus.CounterVec
	// livenessLost: liveness sessions this worker lost while it ran.
	livenessLost prometheus.Counter
	// unreadable: active accounts whose bot token this worker cannot open.
	unreadable prometheus.Gauge
	// purged: what the retention schedule purged, by class.
	purged *prometheus.CounterVec
}

// RetentionClasses are the classes of ilinkflow_retention_purged_total (the store's
// retention classes), exposed at zero from the start.
var RetentionClasses = []string{"content", "rows", "quarantine", "audit", "webui"}

// NewProduct creates the product counters and registers them with reg. Every known
// outcome starts at zero, so that a rate over a missing series never hides a problem.
func NewProduct(reg prometheus.Registerer) (*Product, error) {
	p := &Product{
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ilinkflow_polls_total",
			Help: "getupdates round trips by outcome: ok, stale_token, or the iLink client's error code.",
		}, []string{"outcome"}),
		pages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ilinkflow_pages_total",
			Help: "getupdates pages committed to the store (new messages or a moved cursor).",
		}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ilinkflow_messages_total",
			Help: "Inbound messages by outcome: inserted, duplicate, absorbed, deferred, deliverable, quarantined " +
				"(kept sealed, with the error, for the operator: `starter quarantine`). " +
				"absorbed, deferred and deliverable are subsets of inserted.",
		}, []string{"outcome"}),
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ilinkflow_sends_total",
			Help: "Send activities by outcome: sent, failed, unknown, refused, throttled, held " +
				"(its window could not carry the reply: it goes with the conversation's next window).",
		}, []string{"outcome"}),
		replies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ilinkflow_reply_api_requests_total",
			Help: "Reply API requests by route and answer code (ok, unknown, or the error code).",
		}, []string{"route", "code"}),
		mcpCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ilinkflow_mcp_tool_calls_total",
			Help: "MCP server tool calls by tool and answer code (ok, or the refusal's code).",
		}, []string{"tool", "code"}),
		facade: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ilinkflow_ilink_facade_requests_total",
			Help: "iLink facade requests by endpoint and outcome (ok, sent, held, unknown, a login status, or the refusal's code).",
		}, []string{"endpoint", "outcome"}),
		leases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ilinkflow_poll_lease_renewals_total",
			Help: "Renewals of this worker's poll leases (one statement renews them all) by outcome: ok, error.",
		}, []string{"outcome"}),
		moved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ilinkflow_poll_leases_moved_total",
			Help: "Poll activities this worker's lease supervisor had replaced, by why their holder was judged dead: " +
				"worker_died (its liveness session is gone), lease_expired (its lease passed its ttl: a frozen or cut-off worker), " +
				"unleased (picked up by a worker that died before it took the lease), " +
				"stuck (a retry that the worker it went to did not take up: a frozen worker's), " +
				"rebalanced (handed on by this worker, which polled more than its share of the bots).",
		}, []string{"reason"}),
		livenessLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ilinkflow_liveness_sessions_lost_total",
			Help: "Times this worker lost its liveness session to PostgreSQL while running (its leases were dropped and a new session opened).",
		}),
		unreadable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ilinkflow_accounts_unreadable",
			Help: "Active accounts whose bot token this worker cannot open with its sealing keys, as its last " +
				"enrollment and its polls found: they are skipped (not polled, not listed to iLink). " +
				"The worker's log names each one and the key generation to add.",
		}),
		purged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ilinkflow_retention_purged_total",
			Help: "What the Retention schedule purged, by class: content (messages whose content was erased), " +
				"rows (messages deleted with their windows, attempts, sessions and held replies), " +
				"quarantine (quarantined pages), audit (audit lines), webui (expired web sessions and owner links).",
		}, []string{"class"}),
	}
	for _, c := range []prometheus.Collector{p.polls, p.pages, p.messages, p.sends, p.replies, p.mcpCalls, p.facade, p.leases, p.moved, p.livenessLost, p.unreadable, p.purged} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	p.polls.WithLabelValues(PollOK)
	p.polls.WithLabelValues(PollStaleToken)
	for _, o := range []string{MessageInserted, MessageDuplicate, MessageAbsorbed, MessageDeferred, MessageDeliverable, MessageQuarantined} {
		p.messages.WithLabelValues(o)
	}
	p.leases.WithLabelValues("ok")
	p.leases.WithLabelValues("error")
	for _, r := range []string{LeaseMovedAdopted, LeaseMovedWorkerDied, LeaseMovedExpired, LeaseMovedUnleased, LeaseMovedStuck, LeaseMovedRebalanced} {
		p.moved.WithLabelValues(r)
	}
	for _, o := range []string{SendSent, SendFailed, SendUnknown, SendRefused, SendThrottled, SendHeld} {
		p.sends.WithLabelValues(o)
	}
	// The reply API's main routes are exposed before their first request: a worker whose
	// agents have not replied yet (or reply through the hand-off's answer) still shows
	// the documented series.
	for _, route := range []string{"reply", "done"} {
		p.replies.WithLabelValues(route, "ok")
	}
	for _, tool := range MCPTools {
		p.mcpCalls.WithLabelValues(tool, "ok")
	}
	for _, class := range RetentionClasses {
		p.purged.WithLabelValues(class)
	}
	for _, e := range []string{"getupdates", "sendmessage"} {
		p.facade.WithLabelValues(e, "ok")
	}
	return p, nil
}

// RetentionPurged records n rows of a retention class purged. n <= 0 records nothing.
func (p *Product) RetentionPurged(class string, n int) {
	if p == nil || n <= 0 {
		return
	}
	p.purged.WithLabelValues(class).Add(float64(n))
}

// Poll records one getupdates round trip of an account; outcome is ok, stale_token or an
// ilink error code. The account is not a label of the counter (per-account health is the
// seconds-since-last-good-poll gauge).
func (p *Product) Poll(accountKey, outcome string) {
	if p == nil {
		return
	}
	if outcome == "" {
		outcome = "error"
	}
	p.polls.WithLabelValues(outcome).Inc()
}

// Page records one committed page.
func (p *Product) Page() {
	if p == nil {
		return
	}
	p.pages.Inc()
}

// Messages records n inbound messages with an outcome: inserted, duplicate, absorbed,
// deferred, deliverable or quarantined. n <= 0 records nothing.
func (p *Product) Messages(outcome string, n int) {
	if p == nil || n <= 0 {
		return
	}
	p.messages.WithLabelValues(outcome).Add(float64(n))
}

// LeaseRenewal records one renewal of the worker's poll leases.
func (p *Product) LeaseRenewal(ok bool) {
	if p == nil {
		return
	}
	if ok {
		p.leases.WithLabelValues("ok").Inc()
	} else {
		p.leases.WithLabelValues("error").Inc()
	}
}

// Why a supervisor replaced a poll activity (LeaseMoved), or handed one on.
const (
	LeaseMovedAdopted    = "adopted"
	LeaseMovedWorkerDied = "worker_died"
	LeaseMovedExpired    = "lease_expired"
	LeaseMovedUnleased   = "unleased"
	LeaseMovedStuck      = "stuck"
	LeaseMovedRebalanced = "rebalanced"
)

// LeaseMoved records a poll activity the supervisor had replaced, with why.
func (p *Product) LeaseMoved(reason string) {
	if p == nil {
		return
	}
	p.moved.WithLabelValues(reason).Inc()
}

// LivenessLost records a lost liveness session.
func (p *Product) LivenessLost() {
	if p == nil {
		return
	}
	p.livenessLost.Inc()
}

// UnreadableAccounts sets the number of active accounts whose bot token this worker
// cannot open.
func (p *Product) UnreadableAccounts(n int) {
	if p == nil {
		return
	}
	p.unreadable.Set(float64(n))
}

// Send records one send with its outcome: sent, failed, unknown, refused or throttled
// (see [SendOutcome]), or held (SendHeld: the reply waits for the next window).
func (p *Product) Send(outcome string) {
	if p == nil {
		return
	}
	p.sends.WithLabelValues(outcome).Inc()
}

// MCPTools are the MCP server's tools, whose series exist before their first call.
var MCPTools = []string{"wait_for_message", "reply_text", "reply_media", "fetch_attachment", "typing", "finish"}

// MCPToolCall records one MCP tool call by tool and answer code (ok or the refusal's).
func (p *Product) MCPToolCall(tool, code string) {
	if p == nil {
		return
	}
	p.mcpCalls.WithLabelValues(tool, code).Inc()
}

// ILinkFacadeRequest records one iLink facade request by endpoint and outcome.
func (p *Product) ILinkFacadeRequest(endpoint, outcome string) {
	if p == nil {
		return
	}
	p.facade.WithLabelValues(endpoint, outcome).Inc()
}

// ReplyRequest records one reply API request by route (reply, done) and answer code.
func (p *Product) ReplyRequest(route, code string) {
	if p == nil {
		return
	}
	p.replies.WithLabelValues(route, code).Inc()
}

// SendOutcome classifies a send's attempt status and error code: throttled when the
// throttle (iLink's or the bot's breaker) stopped it, refused when no attempt was made
// (status empty) or the reservation was given back because a store rule refused it,
// otherwise the attempt's status (sent, failed, unknown).
func SendOutcome(status, errorCode string) string {
	switch {
	case errorCode == vocab.SendThrottled:
		return SendThrottled
	case status == "":
		return SendRefused
	case status == SendFailed && storeRefusal(errorCode):
		return SendRefused
	}
	return status
}

// storeRefusal reports whether an attempt's error code is a store rule's (a released
// reservation) rather than iLink's answer or a transport failure.
func storeRefusal(code string) bool {
	switch vocab.Code(code) {
	case vocab.CodeInvalidInput, vocab.CodeAccountNotFound, vocab.CodeAccountNotActive, vocab.CodeGenerationConflict,
		vocab.CodeReplyWindowNotFound, vocab.CodeReplyWindowInactive, vocab.CodeReplyWindowExpired,
		vocab.CodeReplyQuotaExhausted, vocab.CodeSendInProgress, vocab.CodeAttemptConflict, vocab.CodeInvalidAgentSession,
		vocab.CodeSealedUnreadable, vocab.CodeReplySlotsReserved:
		return true
	}
	return false
}
