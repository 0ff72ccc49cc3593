package handoff

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// Workflow hands a message to an agent written as a Temporal workflow: it starts
// WorkflowType on TaskQueue with the delivery's AgentWorkflowID (the installation's id
// for the message, wfapi.Installation.AgentWorkflowID) and a wfapi.AgentInput (never the bearer token: the input lands in history). A retried or
// repeated hand-off finds the running agent workflow and starts nothing
// (USE_EXISTING); an agent workflow of the message that already closed is not run again
// (REJECT_DUPLICATE): it ended without finishing the message, so the hand-off fails
// permanently and the message is marked failed. The agent replies and finishes through
// package agent; its answer here is empty.
type Workflow struct {
	Client       client.Client
	WorkflowType string
	TaskQueue    string
}

// Deliver starts (or finds) the message's agent workflow.
func (h *Workflow) Deliver(ctx context.Context, d Delivery) (Answer, error) {
	if d.AgentWorkflowID == "" || d.WindowWorkflowID == "" {
		// Only a delivery made by the HandOff activity names both workflows.
		return Answer{}, &PermanentError{Code: CodeDeliveryInvalid,
			Reason: "the delivery names no agent workflow or no window workflow"}
	}
	in := AgentInput(d)
	id := d.AgentWorkflowID
	_, err := h.Client.ExecuteWorkflow(ctx, wfapi.StartOptions(client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                h.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		// A running agent workflow is used as it is (no error); a closed one is an error.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}, in.AccountKey, in.PeerID), h.WorkflowType, in)
	var invalid *serviceerror.InvalidArgument
	switch {
	case err == nil:
		return Answer{}, nil
	case temporal.IsWorkflowExecutionAlreadyStartedError(err):
		return Answer{}, &PermanentError{Code: CodeAgentWorkflowClosed,
			Reason: fmt.Sprintf("agent workflow %s already closed without finishing the message", id)}
	case errors.As(err, &invalid):
		return Answer{}, &PermanentError{Code: CodeAgentWorkflowRefused,
			Reason: fmt.Sprintf("agent workflow %s (%s on task queue %s) cannot start: %v", id, h.WorkflowType, h.TaskQueue, err)}
	}
	return Answer{}, fmt.Errorf("start agent workflow %s: %w", id, err)
}

// AgentInput is the agent workflow's input for a delivery: everything but the token, file
// names as vocab.SafeFileName makes them.
func AgentInput(d Delivery) wfapi.AgentInput {
	in := wfapi.AgentInput{
		MessageKey: d.Message.MessageKey, AccountKey: d.Message.AccountKey, PeerID: d.Message.PeerID,
		SentAt: d.Message.SentAt, ReplyWindowID: d.Window.ReplyWindowID, SessionID: d.SessionID,
		ExpiresAt: d.Window.ExpiresAt, SendsLeft: d.Window.SendsLeft(), WindowWorkflowID: d.WindowWorkflowID,
	}
	summary, attachments := shown(d.Message.Payload)
	in.Summary = summary
	for i, a := range attachments {
		in.Attachments = append(in.Attachments, wfapi.AgentAttachment{
			Kind: a.Kind, Position: a.Position, Name: a.Name, Size: a.Size, Text: a.Text,
			FetchPath: fetchPath(d.Message.MessageKey, i, a)})
	}
	return in
}

// fetchPath is the reply API path that downloads an attachment, or "" when it has no
// media to download (a file, voice or video without a CDN locator).
func fetchPath(messageKey string, index int, a store.Attachment) string {
	if a.Kind != "image" && a.Position < vocab.MediaPositionBase {
		return ""
	}
	return wfapi.AttachmentPath(messageKey, index)
}
