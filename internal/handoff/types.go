package handoff

import (
	"context"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// Handler receives deliverable messages (the agent hand-off,
// docs/agents.md#agent-hand-off).
type Handler interface {
	// Deliver hands a message to the agent. The session token is the agent's capability
	// to reply; it must not be logged. A nil error means the agent has it; the answer may
	// carry replies to send at once and say the message is handled. A *PermanentError
	// means the hand-off can never succeed: the message is marked failed.
	Deliver(ctx context.Context, d Delivery) (Answer, error)
}

// Answer is what a handler returned for a delivery.
type Answer struct {
	// Replies are texts to send through the window at once, in order.
	Replies []string
	// Handled marks the message handled once the replies are sent.
	Handled bool
}

// PermanentError is a hand-off failure that retrying cannot fix.
type PermanentError struct {
	// Code says what failed, one of the Code* constants ("" from handlers that name none).
	Code string
	// Reason says it to a person (and becomes the failed message's reason): never a
	// session token, the webhook secret or the text of a reply.
	Reason string
	// Fault is why a reply of a webhook answer was refused (CodeReplyRefused only).
	Fault vocab.TextFault
}

// Codes of a PermanentError.
const (
	// CodeWebhookRefused: the webhook answered a 3xx or a 4xx other than 408 and 429.
	CodeWebhookRefused = "webhook_refused"
	// CodeAnswerInvalid: a 2xx answer whose body is not an answer: not the answer JSON,
	// over the size limit, not valid UTF-8, a member twice, too many replies.
	CodeAnswerInvalid = "webhook_answer_invalid"
	// CodeReplyRefused: a reply of a 2xx answer breaks the rule for outbound text
	// (vocab.CheckText; Fault says how): the whole answer is refused, nothing is sent.
	CodeReplyRefused = "webhook_reply_refused"
	// CodeDeliveryInvalid: the delivery could not be made into a request.
	CodeDeliveryInvalid = "delivery_invalid"
	// CodeAgentWorkflowClosed: the message's agent workflow closed without finishing it.
	CodeAgentWorkflowClosed = "agent_workflow_closed"
	// CodeAgentWorkflowRefused: Temporal refused to start the agent workflow (an invalid
	// argument: the workflow type, the task queue).
	CodeAgentWorkflowRefused = "agent_workflow_refused"
)

// Error implements error.
func (e *PermanentError) Error() string { return "hand-off failed permanently: " + e.Reason }

// Delivery is what an agent receives.
type Delivery struct {
	Message      store.Message
	SessionID    string
	SessionToken sealing.Secret
	Window       store.Window
	// WindowWorkflowID is the workflow id of the window's ReplyWindow workflow, where
	// replies and the verdict go (wfapi.Installation.WindowWorkflowID).
	WindowWorkflowID string
	// AgentWorkflowID is the workflow id of the message's agent workflow, for a handler
	// that starts one (wfapi.Installation.AgentWorkflowID).
	AgentWorkflowID string
}
