package activities

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ilinkflow/ilinkflow/internal/actapi"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// offerTimeout bounds the first hand-off a poll makes for a window it opened (the
// HandOff activity's own start-to-close bound).
const offerTimeout = 2 * time.Minute

// slowWindowStart is how long a window's first offer and start may take before it is
// logged: its poll waits for it before the poll ends.
const slowWindowStart = 5 * time.Second

// windowStarter gives the windows a poll opens their workflows without holding up the
// poll: for a deliverable message it first hands the message off (the window's first
// offer, so the workflow needs no HandOff activity for it), then starts the workflow with
// the outcome. It runs each window in its own goroutine, tells retired windows to end
// only after their own start, and collects what it could not start or signal so that the
// poller's workflow does it (SyncWindows).
type windowStarter struct {
	a  *Activities
	wg sync.WaitGroup

	mu sync.Mutex
	// starting holds the windows whose offer or start is under way; true when the window
	// was retired meanwhile (it is signalled right after its start).
	starting map[int64]bool
	failed   actapi.WindowsInput // what must be done by the workflow instead
}

func newWindowStarter(a *Activities) *windowStarter {
	return &windowStarter{a: a, starting: map[int64]bool{}}
}

// add starts the opened windows and retires the retired ones; ctx is the poll's.
func (ws *windowStarter) add(ctx context.Context, opened []actapi.WindowRef, retired []int64) {
	ctx = context.WithoutCancel(ctx) // a committed window gets its workflow even if the poll ends
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, ref := range opened {
		ws.starting[ref.ReplyWindowID] = false
		ws.wg.Add(1)
		go ws.start(ctx, ref)
	}
	for _, id := range retired {
		if _, ok := ws.starting[id]; ok {
			ws.starting[id] = true
			continue
		}
		ws.wg.Add(1)
		go func() {
			defer ws.wg.Done()
			ws.signalRetired(ctx, id)
		}()
	}
}

// start makes the first offer of a deliverable window, then starts its workflow.
func (ws *windowStarter) start(ctx context.Context, ref actapi.WindowRef) {
	defer ws.wg.Done()
	var offer *wfapi.Offer
	began := time.Now()
	if ref.Deliverable {
		octx, cancel := context.WithTimeout(ctx, offerTimeout)
		offer = ws.a.firstOffer(octx, ref)
		cancel()
	}
	offered := time.Now()
	err := ws.a.startWindow(ctx, ref, offer)
	if took := time.Since(began); took > slowWindowStart {
		// The poll that opened the window waits for its start before it ends.
		ws.a.log().Warn("a window's first offer and workflow start were slow", "reply_window_id", ref.ReplyWindowID,
			"offer", offered.Sub(began).Round(time.Millisecond), "start", time.Since(offered).Round(time.Millisecond))
	}
	ws.mu.Lock()
	retire := ws.starting[ref.ReplyWindowID]
	delete(ws.starting, ref.ReplyWindowID)
	if err != nil {
		ws.a.log().Warn("starting a window workflow from the poll failed", "reply_window_id", ref.ReplyWindowID, "error", err)
		ws.failed.Opened = append(ws.failed.Opened, ref)
		if retire {
			ws.failed.Retired = append(ws.failed.Retired, ref.ReplyWindowID)
		}
		ws.mu.Unlock()
		return
	}
	ws.mu.Unlock()
	if retire {
		ws.signalRetired(ctx, ref.ReplyWindowID)
	}
}

// signalRetired tells a retired window's workflow to end, or leaves it to the workflow.
func (ws *windowStarter) signalRetired(ctx context.Context, id int64) {
	if err := ws.a.signalRetired(ctx, id); err != nil {
		ws.a.log().Warn("telling a retired window to end failed", "reply_window_id", id, "error", err)
		ws.mu.Lock()
		ws.failed.Retired = append(ws.failed.Retired, id)
		ws.mu.Unlock()
	}
}

// busy reports whether offers or starts are under way.
func (ws *windowStarter) busy() bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.starting) > 0
}

// failures reports whether something could not be started or signalled so far.
func (ws *windowStarter) failures() bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.failed.Opened)+len(ws.failed.Retired) > 0
}

// wait waits for the offers and starts under way and returns what failed.
func (ws *windowStarter) wait() actapi.WindowsInput {
	ws.wg.Wait()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.failed
}

// firstOffer hands a window's message off before its workflow exists. It returns nil
// when the workflow must hand off itself: a retryable failure (its HandOff activity
// retries with back-off) or a refusal (it learns the refusal and ends the offers).
func (a *Activities) firstOffer(ctx context.Context, ref actapi.WindowRef) *wfapi.Offer {
	out, err := a.HandOff(ctx, actapi.HandOffInput{ReplyWindowID: ref.ReplyWindowID, Attempt: 1})
	if err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() == actapi.ErrTypeHandOffFailed {
			return &wfapi.Offer{MessageKey: ref.MessageKey, Failed: true}
		}
		a.log().Info("first hand-off from the poll did not succeed; the window's workflow hands off",
			"reply_window_id", ref.ReplyWindowID, "error", err)
		return nil
	}
	return &wfapi.Offer{SessionID: out.SessionID, MessageKey: out.MessageKey, Delivered: out.Delivered,
		Replies: out.Replies, Handled: out.Handled}
}
