package workflows

import (
	"errors"

	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/wfapi"
)

// AccountPoller polls one account (being written).
func AccountPoller(ctx workflow.Context, in wfapi.PollerInput) error { return errors.New("todo") }

// ReplyWindow owns one reply window (being written).
func ReplyWindow(ctx workflow.Context, in wfapi.WindowInput) error { return errors.New("todo") }

// Enrollment drives one QR login (being written).
func Enrollment(ctx workflow.Context, in wfapi.EnrollmentInput) (wfapi.EnrollmentState, error) {
	return wfapi.EnrollmentState{}, errors.New("todo")
}
