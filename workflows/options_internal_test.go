package workflows

import (
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/wfapi"
)

// A poll activity runs at most its workers' session plus the slack, so one dispatched to
// a worker that died before it took the bot's lease is retried soon; with the session
// unknown the 20-minute bound stays.
func TestAPollActivityIsBoundedByThePollSessionPlusItsSlack(t *testing.T) {
	if got := pollOptionsFor(wfapi.PollerConfig{PollSession: wfapi.Duration(3 * time.Second)}).StartToCloseTimeout; got != 3*time.Second+wfapi.PollSlack {
		t.Fatalf("3s session: start-to-close %v, want %v", got, 3*time.Second+wfapi.PollSlack)
	}
	if got := pollOptionsFor(wfapi.PollerConfig{}).StartToCloseTimeout; got != pollOptions.StartToCloseTimeout {
		t.Fatalf("unknown session: start-to-close %v, want %v", got, pollOptions.StartToCloseTimeout)
	}
	if got := pollOptionsFor(wfapi.PollerConfig{PollSession: wfapi.Duration(time.Hour)}).StartToCloseTimeout; got != pollOptions.StartToCloseTimeout {
		t.Fatalf("1h session: start-to-close %v, want at most %v", got, pollOptions.StartToCloseTimeout)
	}
}

// A poll is never executed eagerly on the worker that completed its poller's workflow
// task (the poller's tasks stick to one worker): it goes through matching to any worker,
// as a worker restarted or added gets its share of the polls that way.
func TestAPollGoesThroughMatchingNotEagerlyToThePollersWorker(t *testing.T) {
	for _, c := range []wfapi.PollerConfig{{}, {PollSession: wfapi.Duration(3 * time.Second)}} {
		if !pollOptionsFor(c).DisableEagerExecution {
			t.Fatalf("poll options for %+v ask for eager execution", c)
		}
	}
	if sendOptions.DisableEagerExecution {
		t.Fatal("a reply's send does not ask for eager execution")
	}
}
