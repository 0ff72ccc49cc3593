package workflows_test

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"

	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/payloadcodec"
	"github.com/ilinkflow/ilinkflow/workflows"
)

// TestRecordedHistoriesReplayDeterministically replays the histories recorded by the
// end-to-end test (ILINKFLOW_RECORD_HISTORIES=1 go test -run TestEndToEnd ./e2e/) against
// the current workflow code: a change that breaks determinism for running workflows fails
// here before it reaches a worker.
func TestRecordedHistoriesReplayDeterministically(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("found %d recorded histories, want one per workflow type at least", len(files))
	}
	// The recorded histories predate the payload codec: they replay with the default data
	// converter and with the codec's, which passes unencrypted payloads through (a worker
	// upgraded to the codec resumes the workflows it ran before). The key is the e2e
	// test's (testkit's), so histories recorded again (encrypted) replay too.
	keys := testkit.Keyring
	codec, err := payloadcodec.DataConverter(keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, dc := range []struct {
		name string
		dc   converter.DataConverter
	}{{"default", nil}, {"codec", codec}} {
		for _, f := range files {
			t.Run(dc.name+"/"+filepath.Base(f), func(t *testing.T) {
				r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DataConverter: dc.dc})
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
}
