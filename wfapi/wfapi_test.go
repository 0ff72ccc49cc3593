package wfapi_test

import (
	"testing"

	"github.com/ilinkflow/ilinkflow/wfapi"
)

func TestWorkflowIDsNameTheInstallation(t *testing.T) {
	t.Parallel()
	inst := wfapi.Installation{ID: "0123456789ab"}
	for _, c := range []struct{ got, want string }{
		{inst.WindowWorkflowID(1), "ilink-window/0123456789ab/1"},
		{inst.WindowWorkflowID(8), "ilink-window/0123456789ab/8"},
		{inst.AgentWorkflowID("im_1"), "ilink-agent/0123456789ab/im_1"},
		{inst.PollerID("ilk_1"), "ilink-account/0123456789ab/ilk_1"},
		{wfapi.AccountPollerID(inst.ID, "ilk_1"), "ilink-account/0123456789ab/ilk_1"},
		{wfapi.EnrollmentID("qo_1"), "ilink-enrollment/qo_1"},
		{inst.RetentionScheduleID(), "ilink-retention/0123456789ab"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
	// Two installations never share a window's workflow id, though their serials do.
	if other := (wfapi.Installation{ID: "ba9876543210"}).WindowWorkflowID(1); other == inst.WindowWorkflowID(1) {
		t.Errorf("window 1 of two installations: both %s", other)
	}
}
