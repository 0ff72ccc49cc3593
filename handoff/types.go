package handoff

import (
	"context"

	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/store"
)

// Handler receives deliverable messages (the agent hand-off, design.md §5).
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
type PermanentError struct{ Reason string }

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
