package workflows_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/wfapi"
	"github.com/ilinkflow/ilinkflow/workflows"
)

func TestTheRetentionWorkflowRunsThePurgeAtTheWorkflowsTimeAndRetriesAFailure(t *testing.T) {
	t.Parallel()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(time.Minute)
	env.SetStartTime(mockedStart)
	workflows.Register(env)
	var mu sync.Mutex
	var calls []activities.PurgeInput
	env.OnActivity(mockedActs.PurgeExpired, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.PurgeInput) (activities.PurgeOutput, error) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, in)
			if len(calls) == 1 {
				return activities.PurgeOutput{}, errors.New("the database went away")
			}
			return activities.PurgeOutput{Purged: map[string]int{"content": 3, "rows": 1}, Done: true}, nil
		})
	env.ExecuteWorkflow(wfapi.RetentionWorkflow)
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	var out activities.PurgeOutput
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	if !out.Done || out.Purged["content"] != 3 || out.Purged["rows"] != 1 {
		t.Fatalf("result %+v", out)
	}
	if len(calls) != 2 {
		t.Fatalf("%d activity attempts, want 2 (one retry)", len(calls))
	}
	for _, c := range calls {
		if !c.Now.Equal(mockedStart) {
			t.Fatalf("activity input %+v, want the workflow's start %v", c, mockedStart)
		}
	}
}
