package activity

import (
	"context"
	"sync"
	"time"

	"github.com/ilinkflow/ilinkflow/activities"
)

// offerTimeout bounds the first hand-off a poll makes for a window it opened (the
// HandOff activity's own start-to-close bound).
const offerTimeout = 2 * time.Minute

// slowWindowStart is how long a window's first offer and start may take before it is
// logged: its poll waits for it before the poll ends.
const slowWindowStart = 5 * time.Second

// windowStarter gives the windows a poll opens their workflows without holding up the
// poll: wfclient.LaunchWindow, with the poll's HandOff as the first offer (the window was
// opened by this poll's commit, so the offer is surely its first), so the workflow needs
// no HandOff activity for it. It runs each window in its own goroutine, tells retired
// windows to end only after their own start, and collects what it could not start or
// signal so that the poller's workflow does it (SyncWindows).
type windowStarter struct {
	a  *Activities
	wg sync.WaitGroup

	mu sync.Mutex
	// starting holds the windows whose offer or start is under way; true when the window
	// was retired meanwhile (it is signalled right after its start).
	starting map[int64]bool
	failed   activities.WindowsInput // what must be done by the workflow instead
}

func newWindowStarter(a *Activities) *windowStarter {
	return &windowStarter{a: a, starting: map[int64]bool{}}
}

// add starts the opened windows and retires the retired ones; ctx is the poll's.
func (ws *windowStarter) add(ctx context.Context, opened []activities.WindowRef, retired []int64) {
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

// start gives an opened window its workflow, with its first offer
// (wfclient.LaunchWindow through startWindow).
func (ws *windowStarter) start(ctx context.Context, ref activities.WindowRef) {
	defer ws.wg.Done()
	began := time.Now()
	offered := began
	handOff := func(ctx context.Context, in activities.HandOffInput) (activities.HandOffOutput, error) {
		octx, cancel := context.WithTimeout(ctx, offerTimeout)
		defer cancel()
		out, err := ws.a.HandOff(octx, in)
		offered = time.Now()
		if err != nil {
			ws.a.log().Info("first hand-off from the poll did not succeed; the window's workflow offers unless it failed for good",
				"reply_window_id", ref.ReplyWindowID, "error", err)
		}
		return out, err
	}
	err := ws.a.startWindow(ctx, ref, handOff)
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
func (ws *windowStarter) wait() activities.WindowsInput {
	ws.wg.Wait()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.failed
}
