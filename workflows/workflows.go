// Package workflows holds ilinkflow's Temporal workflows: AccountPoller (one per
// active account), ReplyWindow (one per reply window), Enrollment (one per QR login
// offer) and Retention (one per run of the installation's retention schedule). They are
// deterministic state machines (docs/architecture.md#temporal-orchestration); every
// effect runs in an activity. Names, ids and payloads are in package wfapi.
package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/wfapi"
)

// Register registers the workflows under their wfapi names, each with its
// versioning behaviour, which a worker uses only when it runs as a Worker Deployment
// Version (an unversioned worker ignores it):
//
//   - AccountPoller is AutoUpgrade: it runs forever (continue-as-new), so it must move to
//     the deployment's current version; it does at its next workflow task. The new
//     version's poller code must therefore replay the current run's history (a change to
//     it ships behind workflow.GetVersion, kept until every run has continued as new).
//     Pinned with upgrade on continue-as-new would let the new code start from a fresh
//     run only, but that is experimental and the servers this is tested on (the dev
//     server of the pinned CLI) do not honour it.
//   - ReplyWindow, Enrollment and Retention are Pinned: a window (up to 24 h), an
//     enrollment and a retention run (minutes) finish on the version they started on,
//     which drains, and a change to them needs no patch.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(AccountPoller, workflow.RegisterOptions{Name: wfapi.AccountPollerWorkflow,
		VersioningBehavior: VersioningAccountPoller})
	r.RegisterWorkflowWithOptions(ReplyWindow, workflow.RegisterOptions{Name: wfapi.ReplyWindowWorkflow,
		VersioningBehavior: VersioningReplyWindow})
	r.RegisterWorkflowWithOptions(Enrollment, workflow.RegisterOptions{Name: wfapi.EnrollmentWorkflow,
		VersioningBehavior: VersioningEnrollment})
	r.RegisterWorkflowWithOptions(Retention, workflow.RegisterOptions{Name: wfapi.RetentionWorkflow,
		VersioningBehavior: VersioningRetention})
}

// The versioning behaviour of each workflow type (see Register).
const (
	VersioningAccountPoller = workflow.VersioningBehaviorAutoUpgrade
	VersioningReplyWindow   = workflow.VersioningBehaviorPinned
	VersioningEnrollment    = workflow.VersioningBehaviorPinned
	VersioningRetention     = workflow.VersioningBehaviorPinned
)
