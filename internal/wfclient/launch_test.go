package wfclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/mocks"
	"go.temporal.io/sdk/temporal"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/wfclient"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// TestAFirstOfferBeforeTheStartIsMadeOnlyForTheWindowsOpener checks LaunchWindow's one
// decision on the first offer: a deliverable window whose caller gave the hand-off (the
// poll that opened it) is offered before the start and its workflow starts with the
// outcome; a permanent failure starts it with a failed offer (no offer by the workflow);
// a failure for now, a caller without a hand-off (sync, reconcile) or an undeliverable
// window starts it with none (the workflow offers, or has nothing to offer).
func TestAFirstOfferBeforeTheStartIsMadeOnlyForTheWindowsOpener(t *testing.T) {
	t.Parallel()
	ok := func(context.Context, activities.HandOffInput) (activities.HandOffOutput, error) {
		return activities.HandOffOutput{SessionID: "s1", MessageKey: "im_1", Delivered: true, Replies: []string{"hi"}}, nil
	}
	permanent := func(context.Context, activities.HandOffInput) (activities.HandOffOutput, error) {
		return activities.HandOffOutput{}, temporal.NewNonRetryableApplicationError("gone", activities.ErrTypeHandOffFailed, nil)
	}
	forNow := func(context.Context, activities.HandOffInput) (activities.HandOffOutput, error) {
		return activities.HandOffOutput{}, errors.New("agent unreachable")
	}
	cases := []struct {
		name        string
		deliverable bool
		handOff     func(context.Context, activities.HandOffInput) (activities.HandOffOutput, error)
		offers      int
		want        *wfapi.Offer
	}{
		{"opener", true, ok, 1, &wfapi.Offer{SessionID: "s1", MessageKey: "im_1", Delivered: true, Replies: []string{"hi"}}},
		{"failed for good", true, permanent, 1, &wfapi.Offer{MessageKey: "im_1", Failed: true}},
		{"failed for now", true, forNow, 1, nil},
		{"sync or reconcile", true, nil, 0, nil},
		{"undeliverable", false, ok, 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			offers := 0
			var handOff func(context.Context, activities.HandOffInput) (activities.HandOffOutput, error)
			if tc.handOff != nil {
				handOff = func(ctx context.Context, in activities.HandOffInput) (activities.HandOffOutput, error) {
					offers++
					if in.ReplyWindowID != 7 || in.Attempt != 1 {
						t.Errorf("first offer %+v, want window 7 attempt 1", in)
					}
					return tc.handOff(ctx, in)
				}
			}
			c := &mocks.Client{}
			var got wfapi.WindowInput
			c.On("ExecuteWorkflow", mock.Anything, mock.Anything, wfapi.ReplyWindowWorkflow, mock.Anything).
				Run(func(args mock.Arguments) { got = args.Get(3).(wfapi.WindowInput) }).Return(nil, nil).Once()
			out, err := wfclient.LaunchWindow(context.Background(), wfclient.WindowLaunch{Temporal: c, TaskQueue: "q",
				WorkflowID: "ilink-window/i/7", HandOff: handOff, ReofferAfter: time.Minute,
				Window: activities.WindowRef{ReplyWindowID: 7, AccountKey: "a", MessageKey: "im_1", PeerID: "p", Deliverable: tc.deliverable}})
			if err != nil || out != wfclient.WindowStarted {
				t.Fatalf("LaunchWindow: %v %v", out, err)
			}
			c.AssertExpectations(t)
			if offers != tc.offers {
				t.Errorf("%d offers before the start, want %d", offers, tc.offers)
			}
			switch {
			case (got.Offered == nil) != (tc.want == nil):
				t.Errorf("started with offer %+v, want %+v", got.Offered, tc.want)
			case tc.want != nil && (got.Offered.SessionID != tc.want.SessionID || got.Offered.MessageKey != tc.want.MessageKey ||
				got.Offered.Failed != tc.want.Failed || len(got.Offered.Replies) != len(tc.want.Replies)):
				t.Errorf("started with offer %+v, want %+v", got.Offered, tc.want)
			}
			if got.ReplyWindowID != 7 || got.ReofferAfter.D() != time.Minute {
				t.Errorf("started with %+v", got)
			}
		})
	}
}
