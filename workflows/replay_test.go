package workflows_test

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"

	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/payloadcodec"
	"github.com/ilinkflow/ilinkflow/workflows"
)

// TestRecordedHistoriesReplayDeterministically replays the histories recorded by the
// end-to-end test (ILINKFLOW_RECORD_HISTORIES=1 go test -run TestEndToEnd ./internal/e2e/)
// against the current workflow code: a change that breaks determinism for running
// workflows fails here before it reaches a worker. They are the baseline every later
// change must replay; a change that records differently ships behind Worker Versioning or
// a patch (docs/architecture.md).
func TestRecordedHistoriesReplayDeterministically(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("found %d recorded histories, want one per workflow type at least", len(files))
	}
	// The histories are recorded with the payload codec on (the e2e worker's), under the
	// test key (testkit's): they replay with the codec's data converter.
	dc, err := payloadcodec.DataConverter(testkit.Keyring)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DataConverter: dc})
			if err != nil {
				t.Fatal(err)
			}
			workflows.Register(r)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
