package workflows_test

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"

	"github.com/ilinkflow/ilinkflow/workflows"
)

// TestRecordedHistoriesReplayDeterministically replays the histories recorded by the
// end-to-end test (ILINKFLOW_RECORD_HISTORIES=1 go test -run TestEndToEnd ./e2e/) against
// the current workflow code: a change that breaks determinism for running workflows fails
// here before it reaches a worker.
func TestRecordedHistoriesReplayDeterministically(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("found %d recorded histories, want one per workflow type at least", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			workflows.Register(r)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
