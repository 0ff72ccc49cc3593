package activity

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func TestFetchedPageIsCommittedBeforeReturnAndTheInboxHoldsTheMessageOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	in := h.inject(ilinksim.InjectRequest{Text: "hello", Duplicates: []ilinksim.DuplicateSpec{{Mode: ilinksim.DupSame}}})

	res, err := h.poll(false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Opened) != 1 || res.Messages != 1 || res.Pages < 1 || res.StaleToken || res.UpstreamError != "" || res.Stopped != "" {
		t.Fatalf("result %+v, want one opened window and one message", res)
	}
	w := res.Opened[0]
	if !w.Deliverable || w.AccountKey != h.key || w.ExpiresAt.IsZero() {
		t.Fatalf("window ref %+v", w)
	}
	// The page was committed when the activity returned: the message, its window and the
	// moved cursor are in the store.
	msg, err := h.store.GetMessage(h.ctx, w.MessageKey)
	if err != nil {
		t.Fatal(err)
	}
	if msg.ProviderMessageID != itoa(in.MessageID) || msg.Payload == nil || msg.Payload.Summary != "hello" {
		t.Fatalf("message %+v", msg)
	}
	if h.account().Cursor == "" || h.account().LastPollAt == nil {
		t.Fatalf("cursor or health not recorded: %+v", h.account())
	}
	// The duplicate copy (same page or the next) never makes a second row.
	if _, err := h.poll(true); err != nil {
		t.Fatal(err)
	}
	if n := h.count("SELECT count(*) FROM inbound_messages"); n != 1 {
		t.Fatalf("inbox holds %d messages, want 1", n)
	}
	if n := h.count("SELECT count(*) FROM reply_windows"); n != 1 {
		t.Fatalf("%d windows, want 1", n)
	}
}

func TestIdlePollReturnsAfterItsSessionAndRecordsHealth(t *testing.T) {
	t.Parallel()
	// A session many long-poll holds long, so that even a loaded machine polls more than once.
	h := newHarness(t, func(o *options) {
		o.config = func(c *Config) { c.PollSession = time.Second }
	})
	start := time.Now()
	res, err := h.poll(false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Opened) != 0 || res.Messages != 0 {
		t.Fatalf("idle result %+v", res)
	}
	if time.Since(start) < h.acts.Config.PollSession {
		t.Fatalf("returned after %v, before the poll session of %v", time.Since(start), h.acts.Config.PollSession)
	}
	if n := h.requests("getupdates"); n < 2 {
		t.Fatalf("%d getupdates in an idle session, want the loop to keep polling", n)
	}
	if h.account().LastPollAt == nil {
		t.Fatal("an empty round trip did not record the account's health")
	}
}

func TestProbePollMakesOneRoundTrip(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	if _, err := h.poll(true); err != nil {
		t.Fatal(err)
	}
	if n := h.requests("getupdates"); n != 1 {
		t.Fatalf("probe made %d getupdates, want 1", n)
	}
}

func TestTwoPollAccountCallsForOneAccountNeverPollAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *options) {
		o.config = func(c *Config) { c.PollSession = time.Hour }
	})
	leased := make(chan struct{})
	var once sync.Once
	h.acts.hooks = &testHooks{leased: func(store.PollLease) { once.Do(func() { close(leased) }) }}

	stop := make(chan struct{})
	first := h.env()
	first.SetWorkerStopChannel(stop)
	type outcome struct {
		res activities.PollResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := runIn[activities.PollResult](first, h.acts.PollAccount, activities.PollInput{AccountKey: h.key, Generation: 1})
		done <- outcome{res, err}
	}()
	<-leased

	// The second attempt cannot take the lease while the first holds it: it fails
	// (retryable) without a round trip to iLink.
	before := h.requests("getupdates")
	_, err := h.poll(true)
	wantRetryable(t, err)
	if !strings.Contains(err.Error(), "lease") {
		t.Fatalf("second poller failed with %v, want the lease refusal", err)
	}

	// A graceful worker stop ends the first one, frees the lease and hands the poll over:
	// a retryable error that Temporal retries at once on another worker.
	close(stop)
	out := <-done
	wantRetryable(t, out.err)
	if !strings.Contains(out.err.Error(), "PollHandedOver") || out.res.Stopped != "" || out.res.StaleToken || out.res.UpstreamError != "" {
		t.Fatalf("stopped poller: %+v %v, want it handed over", out.res, out.err)
	}
	if n := h.requests("msg/notifystop"); n != 1 {
		t.Fatalf("%d notifystop calls after a graceful worker stop, want 1", n)
	}
	if got := h.requests("getupdates"); got < before {
		t.Fatalf("request log went backwards")
	}
	// Freed as a hand-on: should the retry be dropped by a stopping worker, the
	// supervisors' recheck of claimed leases finds the lease still free.
	if stuck, err := h.store.RecheckClaimedPollLeases(h.ctx, 0, 0, 10); err != nil || len(stuck) != 1 || stuck[0].AccountKey != h.key {
		t.Fatalf("recheck after a stop's hand-over: %+v %v, want the bot's lease", stuck, err)
	}
	if _, err := h.poll(true); err != nil {
		t.Fatalf("lease not released after the first poller ended: %v", err)
	}
}

func TestPollStopsFetchingWhenItsLeaseIsTakenOver(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *options) {
		o.config = func(c *Config) { c.PollSession = time.Hour }
		// A long poll with nothing to hand out is held for a minute, so only the lease's
		// loss can end the second one soon (held 50 ms, it could end by itself before the
		// lease's renewal, every 100 ms, noticed the loss, and a third one start). The
		// first one answers at once with an empty page.
		o.sim = func(c *ilinksim.Config) { c.LongPollHold = time.Minute }
	})
	if err := h.ctl.AddFault(context.Background(), ilinksim.Fault{Endpoint: "getupdates", Kind: ilinksim.FaultBody,
		Body: `{"ret":0,"msgs":[]}`}); err != nil {
		t.Fatal(err)
	}
	h.acts.hooks = &testHooks{
		beforeFetch: func(n int) {
			if n == 1 { // after one round trip, another worker takes the lease over
				if _, err := h.pool.Exec(context.Background(), "UPDATE poll_leases SET holder = 'another-worker', epoch = epoch + 1"); err != nil {
					t.Errorf("take the lease over: %v", err)
				}
			}
		},
	}
	_, err := h.poll(false)
	wantRetryable(t, err)
	if !strings.Contains(err.Error(), "lease") {
		t.Fatalf("poll ended with %v, want the lease loss", err)
	}
	if n := h.requests("getupdates"); n > 2 {
		t.Fatalf("%d getupdates, want at most 2 (the in-flight long poll ends as soon as the lease is gone)", n)
	}
	if !strings.Contains(h.logs.String(), "poll lease lost during a long poll") {
		t.Fatal("the second long poll was not ended by the lease's loss")
	}
}

func TestANewerPollTakesTheLeaseOverAndTheOlderStopsBeforeItPolls(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *options) {
		o.config = func(c *Config) { c.PollSession = time.Hour }
	})
	var (
		mu       sync.Mutex
		inFlight int
		overlap  bool
		leases   []store.PollLease
	)
	leased := make(chan struct{}, 2)
	h.acts.hooks = &testHooks{
		leased: func(l store.PollLease) {
			mu.Lock()
			leases = append(leases, l)
			mu.Unlock()
			leased <- struct{}{}
		},
		beforeFetch: func(int) {
			mu.Lock()
			defer mu.Unlock()
			inFlight++
			overlap = overlap || inFlight > 1
		},
		afterFetch: func(int) {},
	}
	h.acts.hooks.fetched = func() {
		mu.Lock()
		defer mu.Unlock()
		inFlight--
	}
	type outcome struct {
		res activities.PollResult
		err error
	}
	older := make(chan outcome, 1)
	go func() {
		res, err := run[activities.PollResult](h, h.acts.PollAccount, activities.PollInput{AccountKey: h.key, Generation: 1, LeaseEpoch: 1})
		older <- outcome{res, err}
	}()
	<-leased

	// The newer poll (the poller replaced the activity) finds the lease held: it is
	// refused (Temporal retries it) and asks the holder to let go.
	_, err := run[activities.PollResult](h, h.acts.PollAccount, activities.PollInput{AccountKey: h.key, Generation: 1, LeaseEpoch: 2, Probe: true})
	wantRetryable(t, err)
	out := <-older // the older poll lets go at its next renewal
	if out.err == nil || !strings.Contains(out.err.Error(), "newer poll") {
		t.Fatalf("older poll ended %+v %v, want the lease asked for by a newer poll", out.res, out.err)
	}
	// The retry of the newer poll takes it.
	if _, err := run[activities.PollResult](h, h.acts.PollAccount, activities.PollInput{AccountKey: h.key, Generation: 1, LeaseEpoch: 2, Probe: true}); err != nil {
		t.Fatalf("newer poll after the older let go: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if overlap {
		t.Fatal("two polls of one bot were in flight at once")
	}
	if len(leases) != 2 || leases[0].Epoch != 1 || leases[1].Epoch != 2 {
		t.Fatalf("leases taken %+v, want epoch 1 then 2", leases)
	}
}

func TestStaleTokenIsReportedAsAResult(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	if err := h.ctl.KillBot(h.ctx, h.bot.BotID); err != nil {
		t.Fatal(err)
	}
	res, err := h.poll(false)
	if err != nil || !res.StaleToken || res.UpstreamError != "" {
		t.Fatalf("result %+v %v, want StaleToken", res, err)
	}
}

func TestUpstream5xxIsReportedAndNothingIsCommitted(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.inject(ilinksim.InjectRequest{Text: "kept for later"})
	if err := h.ctl.AddFault(h.ctx, ilinksim.Fault{Endpoint: "getupdates", Kind: ilinksim.FaultStatus, Status: 502}); err != nil {
		t.Fatal(err)
	}
	res, err := h.poll(false)
	if err != nil || res.UpstreamError != "http_status" || res.StaleToken {
		t.Fatalf("result %+v %v, want UpstreamError http_status", res, err)
	}
	if n := h.count("SELECT count(*) FROM inbound_messages"); n != 0 {
		t.Fatalf("%d messages committed after a 5xx", n)
	}
	if c := h.account().Cursor; c != "" {
		t.Fatalf("cursor moved to %q after a 5xx", c)
	}
	// The next poll gets the message: nothing was lost.
	res, err = h.poll(false)
	if err != nil || res.Messages != 1 {
		t.Fatalf("next poll %+v %v", res, err)
	}
}

func TestPollOfAnInactiveOrRotatedAccountStops(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	res, err := run[activities.PollResult](h, h.acts.PollAccount, activities.PollInput{AccountKey: h.key, Generation: 2})
	if err != nil || res.Stopped != string(vocab.CodeGenerationConflict) {
		t.Fatalf("wrong generation: %+v %v", res, err)
	}
	res, err = run[activities.PollResult](h, h.acts.PollAccount, activities.PollInput{AccountKey: store.AccountKey("nobody@im.bot"), Generation: 1})
	if err != nil || res.Stopped != string(vocab.CodeAccountNotFound) {
		t.Fatalf("unknown account: %+v %v", res, err)
	}
	now := time.Now()
	if err := runErr(h, h.acts.PauseAccount, activities.PauseInput{
		AccountKey: h.key, Generation: 1, Until: now.Add(time.Hour), Reason: "test", Now: now}); err != nil {
		t.Fatal(err)
	}
	res, err = h.poll(false)
	if err != nil || res.Stopped != string(vocab.CodeAccountNotActive) {
		t.Fatalf("paused account: %+v %v", res, err)
	}
	if n := h.requests("getupdates"); n != 0 {
		t.Fatalf("%d getupdates for accounts that cannot poll", n)
	}
}

func TestMessageWithoutMessageIDGetsAStableID(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.inject(ilinksim.InjectRequest{Text: "no id", NoMessageID: true,
		Duplicates: []ilinksim.DuplicateSpec{{Mode: ilinksim.DupSame}}})
	res, err := h.poll(false)
	if err != nil || len(res.Opened) != 1 {
		t.Fatalf("poll: %+v %v", res, err)
	}
	if _, err := h.poll(true); err != nil {
		t.Fatal(err)
	}
	msg, err := h.store.GetMessage(h.ctx, res.Opened[0].MessageKey)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(msg.ProviderMessageID, "nomsg:") || len(msg.ProviderMessageID) != len("nomsg:")+32 {
		t.Fatalf("derived id %q", msg.ProviderMessageID)
	}
	if n := h.count("SELECT count(*) FROM inbound_messages"); n != 1 {
		t.Fatalf("the redelivered copy without an id made %d rows, want 1", n)
	}
}

func TestMessageIDsKeepAllSixtyFourBits(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.inject(ilinksim.InjectRequest{Text: "max", MessageID: 18446744073709551615})
	res, err := h.poll(false)
	if err != nil || len(res.Opened) != 1 {
		t.Fatalf("poll: %+v %v", res, err)
	}
	msg, err := h.store.GetMessage(h.ctx, res.Opened[0].MessageKey)
	if err != nil || msg.ProviderMessageID != "18446744073709551615" {
		t.Fatalf("message %+v %v", msg, err)
	}
}

// An idle bot costs no Temporal heartbeat: the poll's liveness is its database lease, so
// a poll session records none however long it lasts (Temporal Cloud bills each one).
func TestAPollSessionRecordsNoTemporalHeartbeat(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var mu sync.Mutex
	beats := 0
	env := h.env()
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) {
		mu.Lock()
		beats++
		mu.Unlock()
	})
	h.inject(ilinksim.InjectRequest{Text: "beat"})
	// A page, then idle sessions whose long polls block, until they polled several times
	// (one idle session on an idle machine; more when a busy one is slow to answer).
	for sessions := 0; sessions < 2 || h.requests("getupdates") < 3; sessions++ {
		if sessions == 50 {
			t.Fatalf("%d getupdates in %d sessions, want the sessions to have polled several times", h.requests("getupdates"), sessions)
		}
		if _, err := runIn[activities.PollResult](env, h.acts.PollAccount, activities.PollInput{AccountKey: h.key, Generation: 1}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if beats != 0 {
		t.Fatalf("%d heartbeats recorded by poll sessions, want none", beats)
	}
}

func TestNotifyStartAndStopReachIlinkAndFailuresAreIgnored(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ref := activities.AccountRef{AccountKey: h.key, Generation: 1}
	if err := runErr(h, h.acts.NotifyStart, ref); err != nil {
		t.Fatal(err)
	}
	st, err := h.ctl.BotState(h.ctx, h.bot.BotID)
	if err != nil || !st.Online {
		t.Fatalf("bot not online after notifystart: %+v %v", st, err)
	}
	if err := runErr(h, h.acts.NotifyStop, ref); err != nil {
		t.Fatal(err)
	}
	if err := h.ctl.AddFault(h.ctx, ilinksim.Fault{Endpoint: "msg/notifystart", Kind: ilinksim.FaultStatus, Status: 500}); err != nil {
		t.Fatal(err)
	}
	if err := runErr(h, h.acts.NotifyStart, ref); err != nil {
		t.Fatalf("a failed notify must be ignored: %v", err)
	}
	if err := runErr(h, h.acts.NotifyStop, activities.AccountRef{AccountKey: store.AccountKey("nobody@im.bot"), Generation: 1}); err != nil {
		t.Fatalf("a notify for an unknown account must be ignored: %v", err)
	}
}

// runErr executes an activity that returns only an error.
func runErr(h *harness, fn any, args ...any) error {
	_, err := h.env().ExecuteActivity(fn, args...)
	return err
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }
