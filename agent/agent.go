// Package agent is the Go helper of agents that answer ilinkflow messages through
// Temporal (docs/agents.md#agent-hand-off): an agent written as a Temporal workflow
// (started by the gateway's "workflow" handler with a wfapi.AgentInput), or any Go
// program with a Temporal client, replies through the message's reply window and gives
// its verdict.
//
// A window is addressed by its workflow's id, Input.WindowWorkflowID (the id names the
// gateway's installation; see wfapi's Workflow ids). From a program with a client:
//
//	res, err := agent.Reply(ctx, c, in.WindowWorkflowID, "hello", "my-request-1")
//	err = agent.Finish(ctx, c, in.WindowWorkflowID, true, "")
//
// From an agent workflow (a workflow must not call a client itself), register the
// activities on the agent's worker and call the workflow helpers:
//
//	agent.RegisterActivities(w, c)
//	// in the workflow:
//	res, err := agent.WorkflowReplyTo(ctx, in, "hello", "")
//	err = agent.WorkflowFinish(ctx, in.WindowWorkflowID, true, "")
//
// A reply made under the delivery's session (WorkflowReplyTo, ReplyInSession) is taken
// even when it reaches the window before the window took in the hand-off.
//
// Payloads are encrypted in Temporal (docs/payload-codec.md): the client an agent uses
// and the client of an agent workflow's worker must be dialed with DataConverter, built
// from the gateway's sealing keys, to read the inputs and to send replies the gateway
// reads:
//
//	keys, err := sealing.LoadKeyring(nil) // ILINKFLOW_SEALING_KEYS, as the gateway's
//	dc, err := agent.DataConverter(keys)
//	// The connection as the gateway reads it: a profile of the Temporal client config
//	// file, then TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*.
//	conn, err := temporalconn.Load(nil, temporalconn.Overrides{})
//	c, err := temporalconn.Dial(ctx, conn, client.Options{DataConverter: dc})
//
// A refusal (window expired, quota exhausted, throttled, message already finished, bad
// input) is an error whose Code is the store code; it was never sent and wrote nothing. A
// text that breaks the rule for outbound text (vocab.CheckText) is refused before any
// Update with a *TextError (Code vocab.CodeInvalidInput).
// Replies end once the message is finished: reply first, then finish.
package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/payloadcodec"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// DataConverter is the data converter of an agent's Temporal clients: the SDK's default
// wrapped with ilinkflow's payload codec of keys (the gateway's sealing key ring), so the
// agent reads the encrypted workflow inputs and its replies are encrypted too. It is
// payloadcodec.DataConverter.
func DataConverter(keys *sealing.Keyring) (converter.DataConverter, error) {
	return payloadcodec.DataConverter(keys)
}

// Input is the input of an agent workflow started by the "workflow" handler.
type Input = wfapi.AgentInput

// CodeWindowClosed is the Code of an error from a window whose workflow has ended
// (expired or retired).
const CodeWindowClosed = "reply_window_closed"

// Reply sends text to the user through the reply window's send Update and waits for the
// outcome (Status sent, failed or unknown; an unknown send is never retried by the
// gateway; or held: the window could no longer carry it — its quota used up, its last
// sends kept for the final answer, or expired — and the gateway sends it first when the
// user writes again). A reply is a progress reply: it leaves the window's last sends
// (the gateway's final slots) to ReplyFinal. windowWorkflowID is the window's workflow id (Input.WindowWorkflowID).
// requestID makes the reply idempotent: a retry with the same id returns the first
// outcome and never sends twice; "" gives every call its own id. A text that breaks the
// rule for outbound text (vocab.CheckText: valid UTF-8, no U+0000, not blank, at most
// vocab.MaxTextBytes bytes) is refused before any Update with a *TextError.
func Reply(ctx context.Context, c client.Client, windowWorkflowID, text, requestID string) (wfapi.SendResult, error) {
	return ReplyInSession(ctx, c, windowWorkflowID, "", text, requestID)
}

// ReplyInSession is Reply under the agent session of the delivery (Input.SessionID): the
// window takes it even before it took in the hand-off that opened the session; "" is the
// window's latest session.
func ReplyInSession(ctx context.Context, c client.Client, windowWorkflowID, sessionID, text, requestID string) (wfapi.SendResult, error) {
	return reply(ctx, c, windowWorkflowID, sessionID, text, requestID, false)
}

// ReplyFinal is ReplyInSession for the agent's final answer: it may use the window's last
// sends, which other replies leave for it.
func ReplyFinal(ctx context.Context, c client.Client, windowWorkflowID, sessionID, text, requestID string) (wfapi.SendResult, error) {
	return reply(ctx, c, windowWorkflowID, sessionID, text, requestID, true)
}

func reply(ctx context.Context, c client.Client, windowWorkflowID, sessionID, text, requestID string, final bool) (wfapi.SendResult, error) {
	if fault := vocab.CheckText(text, vocab.MaxTextBytes); fault != vocab.TextOK {
		return wfapi.SendResult{}, &TextError{Field: FieldText, Fault: fault, Bytes: len(text)}
	}
	opts := client.UpdateWorkflowOptions{
		WorkflowID: windowWorkflowID, UpdateName: wfapi.UpdateSend,
		Args:         []any{wfapi.SendRequest{Type: "text", Text: text, RequestID: requestID, SessionID: sessionID, Final: final}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	}
	if requestID != "" {
		opts.UpdateID = "reply/" + requestID
	}
	var res wfapi.SendResult
	h, err := c.UpdateWorkflow(ctx, opts)
	if err == nil {
		err = h.Get(ctx, &res)
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.HasDetails() {
		_ = app.Details(&res) // a refusal after the store looked: its attempt and RetryAfter
	}
	return res, err
}

// Finish gives the agent's verdict on the window's message: handled, or failed with a
// reason. It closes the message's sessions and ends its re-offers. Finishing again with
// the same verdict succeeds; another verdict is refused (attempt_conflict).
// windowWorkflowID is the window's workflow id (Input.WindowWorkflowID).
func Finish(ctx context.Context, c client.Client, windowWorkflowID string, handled bool, reason string) error {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: windowWorkflowID, UpdateName: wfapi.UpdateFinish,
		Args: []any{wfapi.FinishRequest{Handled: handled, Reason: reason}}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return err
	}
	return h.Get(ctx, nil)
}

// TextError is the refusal of a reply's text, or of a media reply's file name, by the
// rule for outbound text (vocab.CheckText, vocab.CheckFileName), made before anything is
// sent: no Update ran and no request left. Code(err) is vocab.CodeInvalidInput. Its text
// never quotes what was refused.
type TextError struct {
	// Field is FieldText or FieldFileName.
	Field string
	// Fault is what is wrong.
	Fault vocab.TextFault
	// Bytes is the refused value's length in bytes.
	Bytes int
}

// Fields a TextError names.
const (
	FieldText     = "text"
	FieldFileName = "file_name"
)

// Error implements error.
func (e *TextError) Error() string {
	if e.Field == FieldFileName {
		what := "contains a control character"
		if e.Fault == vocab.TextNotUTF8 {
			what = "is not valid UTF-8"
		}
		return "agent: media reply refused: the file name " + what
	}
	return "agent: reply refused: " + e.Fault.Describe(e.Bytes, vocab.MaxTextBytes)
}

// Code is the refusal code of an error from Reply or Finish (a store code such as
// reply_quota_exhausted, reply_window_expired, throttled or attempt_conflict;
// vocab.CodeInvalidInput for a *TextError; CodeWindowClosed when the window's workflow has
// ended), or "" for other failures.
func Code(err error) string {
	var te *TextError
	if errors.As(err, &te) {
		return string(vocab.CodeInvalidInput)
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Type()
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return CodeWindowClosed
	}
	return ""
}

// Activity names of RegisterActivities.
const (
	ReplyActivity  = "ilinkflow.agent.Reply"
	FinishActivity = "ilinkflow.agent.Finish"
)

// ReplyInput is the input of the reply activity.
type ReplyInput struct {
	// WindowWorkflowID is the window's workflow id (Input.WindowWorkflowID).
	WindowWorkflowID string
	Text             string
	// RequestID makes the reply idempotent ("": the activity's run and activity ids,
	// stable across the activity's retries).
	RequestID string
	// SessionID is the delivery's session ("": the window's latest).
	SessionID string
	// Final marks the agent's final answer (see ReplyFinal).
	Final bool
}

// FinishInput is the input of the finish activity.
type FinishInput struct {
	// WindowWorkflowID is the window's workflow id (Input.WindowWorkflowID).
	WindowWorkflowID string
	Handled          bool
	Reason           string
}

// errNoWindow refuses an activity input that names no window workflow.
var errNoWindow = temporal.NewNonRetryableApplicationError(
	"agent: the input names no window workflow (WindowWorkflowID)", string(vocab.CodeInvalidInput), nil)

// Activities runs Reply and Finish as activities for agent workflows. A refusal is a
// non-retryable error typed with its Code.
type Activities struct {
	Client client.Client
}

// RegisterActivities registers the reply and finish activities under ReplyActivity and
// FinishActivity.
func RegisterActivities(r worker.ActivityRegistry, c client.Client) {
	a := &Activities{Client: c}
	r.RegisterActivityWithOptions(a.Reply, activity.RegisterOptions{Name: ReplyActivity})
	r.RegisterActivityWithOptions(a.Finish, activity.RegisterOptions{Name: FinishActivity})
}

// Reply is the reply activity.
func (a *Activities) Reply(ctx context.Context, in ReplyInput) (wfapi.SendResult, error) {
	id := in.RequestID
	if id == "" && activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		id = "agent:" + info.WorkflowExecution.RunID + "/" + info.ActivityID
	}
	window := in.WindowWorkflowID
	if window == "" {
		return wfapi.SendResult{}, errNoWindow
	}
	res, err := reply(ctx, a.Client, window, in.SessionID, in.Text, id, in.Final)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) && activity.IsActivity(ctx) && activity.GetInfo(ctx).Attempt < notStartedAttempts {
		// Right after the hand-off the window's workflow may not be started yet (the
		// gateway starts it once the hand-off returned): retry before calling it closed.
		return res, fmt.Errorf("reply window %s: workflow not running (yet): %w", window, err)
	}
	return res, final(err)
}

// notStartedAttempts is how many attempts of the reply activity take a missing window
// workflow for one not started yet (the retries wait 1 s, then 2 s).
const notStartedAttempts = 3

// Finish is the finish activity.
func (a *Activities) Finish(ctx context.Context, in FinishInput) error {
	if in.WindowWorkflowID == "" {
		return errNoWindow
	}
	return final(Finish(ctx, a.Client, in.WindowWorkflowID, in.Handled, in.Reason))
}

// final makes a refusal non-retryable (retrying cannot change it); other errors stay
// retryable.
func final(err error) error {
	if code := Code(err); code != "" {
		return temporal.NewNonRetryableApplicationError(err.Error(), code, err)
	}
	return err
}

// activityOptions are used when the workflow context has none.
var activityOptions = workflow.ActivityOptions{
	StartToCloseTimeout: time.Minute,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second, MaximumAttempts: 10,
	},
}

func withOptions(ctx workflow.Context) workflow.Context {
	if workflow.GetActivityOptions(ctx).StartToCloseTimeout == 0 {
		return workflow.WithActivityOptions(ctx, activityOptions)
	}
	return ctx
}

// WorkflowReply sends a reply from an agent workflow (the activity registered by
// RegisterActivities on the workflow's task queue) to the window whose workflow id is
// windowWorkflowID (Input.WindowWorkflowID). The workflow context's activity options are
// used when set.
func WorkflowReply(ctx workflow.Context, windowWorkflowID, text, requestID string) (wfapi.SendResult, error) {
	return WorkflowReplyTo(ctx, Input{WindowWorkflowID: windowWorkflowID}, text, requestID)
}

// WorkflowReplyTo sends a reply from an agent workflow under the delivery's session (see
// ReplyInSession); use it rather than WorkflowReply.
func WorkflowReplyTo(ctx workflow.Context, in Input, text, requestID string) (wfapi.SendResult, error) {
	var res wfapi.SendResult
	err := workflow.ExecuteActivity(withOptions(ctx), ReplyActivity,
		ReplyInput{WindowWorkflowID: in.WindowWorkflowID, Text: text, RequestID: requestID, SessionID: in.SessionID}).Get(ctx, &res)
	return res, err
}

// WorkflowReplyFinal is WorkflowReplyTo for the agent's final answer (see ReplyFinal).
func WorkflowReplyFinal(ctx workflow.Context, in Input, text, requestID string) (wfapi.SendResult, error) {
	var res wfapi.SendResult
	err := workflow.ExecuteActivity(withOptions(ctx), ReplyActivity,
		ReplyInput{WindowWorkflowID: in.WindowWorkflowID, Text: text, RequestID: requestID, SessionID: in.SessionID, Final: true}).Get(ctx, &res)
	return res, err
}

// WorkflowFinish gives the verdict from an agent workflow (see Finish) to the window
// whose workflow id is windowWorkflowID (Input.WindowWorkflowID).
func WorkflowFinish(ctx workflow.Context, windowWorkflowID string, handled bool, reason string) error {
	return workflow.ExecuteActivity(withOptions(ctx), FinishActivity,
		FinishInput{WindowWorkflowID: windowWorkflowID, Handled: handled, Reason: reason}).Get(ctx, nil)
}
