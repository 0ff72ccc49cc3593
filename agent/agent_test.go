package agent_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/agent"
	"github.com/ilinkflow/ilinkflow/devserver"
)

func TestMain(m *testing.M) { os.Exit(devserver.Main(m)) }

// replier is an agent workflow that answers at once.
func replier(ctx workflow.Context, in agent.Input) error {
	_, err := agent.WorkflowReplyTo(ctx, in, "an answer", "")
	return err
}

// Right after a hand-off the window's workflow may not be started yet: the reply activity
// retries a missing window workflow twice before it calls the window closed.
func TestAReplyToAWindowWorkflowNotStartedYetIsRetriedBeforeItIsClosed(t *testing.T) {
	srv := devserver.Start(t)
	_, tc := srv.NewNamespace(t)
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(replier)
	agent.RegisterActivities(env, tc)
	attempts := 0
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == agent.ReplyActivity {
			attempts++
		}
	})
	env.ExecuteWorkflow(replier, agent.Input{ReplyWindowID: 987654321, SessionID: "00000000-0000-0000-0000-000000000001"})
	err := env.GetWorkflowError()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != agent.CodeWindowClosed || !app.NonRetryable() {
		t.Fatalf("reply to a window without a workflow: %v, want a non-retryable %s", err, agent.CodeWindowClosed)
	}
	if attempts != 3 {
		t.Fatalf("%d attempts, want 3: two retries for a workflow not started yet, then closed", attempts)
	}
}
