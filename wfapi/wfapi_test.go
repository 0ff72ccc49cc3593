package wfapi_test

import (
	"slices"
	"testing"

	"github.com/ilinkflow/ilinkflow/wfapi"
)

func TestNewWorkflowIDsNameTheInstallationAndLegacyWindowsKeepTheirIDs(t *testing.T) {
	t.Parallel()
	inst := wfapi.Installation{ID: "0123456789ab", LegacyWindowsThrough: 7}
	for _, c := range []struct{ got, want string }{
		{inst.WindowWorkflowID(8), "ilink-window/0123456789ab/8"},
		{inst.WindowWorkflowID(7), "ilink-window/7"},
		{inst.AgentWorkflowID(8, "im_1"), "ilink-agent/0123456789ab/im_1"},
		{inst.AgentWorkflowID(7, "im_1"), "ilink-agent/im_1"},
		{wfapi.AccountPollerID(inst.ID, "ilk_1"), "ilink-account/0123456789ab/ilk_1"},
		{wfapi.LegacyAccountPollerID("ilk_1"), "ilink-account/ilk_1"},
		{wfapi.EnrollmentID("qo_1"), "ilink-enrollment/qo_1"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
	// A fresh installation has no legacy windows: serial 1 is the installation's.
	if got := (wfapi.Installation{ID: "ba9876543210"}).WindowWorkflowID(1); got != "ilink-window/ba9876543210/1" {
		t.Errorf("first window of a fresh installation: %s", got)
	}
}

func TestPollersAreLookedForUnderTheInstallationsIDThenTheLegacyOneOnlyWhereAccountsPredateIt(t *testing.T) {
	t.Parallel()
	fresh := wfapi.Installation{ID: "0123456789ab"}
	if got := fresh.PollerIDs("ilk_1"); !slices.Equal(got, []string{"ilink-account/0123456789ab/ilk_1"}) {
		t.Errorf("fresh installation: %v", got)
	}
	upgraded := wfapi.Installation{ID: "0123456789ab", LegacyPollers: true}
	if got := upgraded.PollerIDs("ilk_1"); !slices.Equal(got, []string{"ilink-account/0123456789ab/ilk_1", "ilink-account/ilk_1"}) {
		t.Errorf("upgraded installation: %v", got)
	}
}

func TestAnAgentInputRecordedBeforeInstallationIDsAddressesTheLegacyWindowID(t *testing.T) {
	t.Parallel()
	if got := (wfapi.AgentInput{ReplyWindowID: 5}).WindowWorkflow(); got != "ilink-window/5" {
		t.Errorf("old input: %s", got)
	}
	in := wfapi.AgentInput{ReplyWindowID: 5, WindowWorkflowID: "ilink-window/0123456789ab/5"}
	if got := in.WindowWorkflow(); got != in.WindowWorkflowID {
		t.Errorf("new input: %s", got)
	}
}
