// Package workflows holds ilinkflow's three Temporal workflows: AccountPoller (one per
// active account), ReplyWindow (one per reply window) and Enrollment (one per QR login
// offer). They are deterministic state machines that follow design.md §4; every effect
// runs in an activity. Names, ids and payloads are in package wfapi.
package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/wfapi"
)

// Register registers the three workflows under their wfapi names.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(AccountPoller, workflow.RegisterOptions{Name: wfapi.AccountPollerWorkflow})
	r.RegisterWorkflowWithOptions(ReplyWindow, workflow.RegisterOptions{Name: wfapi.ReplyWindowWorkflow})
	r.RegisterWorkflowWithOptions(Enrollment, workflow.RegisterOptions{Name: wfapi.EnrollmentWorkflow})
}
