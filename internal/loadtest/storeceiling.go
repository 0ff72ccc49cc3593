package loadtest

// The store's own ceiling: the saturation loop's exchanges carried by the store alone.
//
// A storeSystem makes, for one user message, the store calls the worker makes for it on
// the echo path, in the worker's order and with the inputs its activities pass, without
// Temporal and without iLink. Per exchange of bot b:
//
//  1. the page (PollAccount's commit, internal/activity/poll.go): CommitPage of a one-message
//     page from the bot's owner, a fresh context token, the cursor the last commit moved
//     to and a new one, the message converted as convertMessage converts a text message
//     of the simulator (no provider sequence: see below);
//  2. the retired signal of the window the page superseded (internal/activity/windows.go
//     signalRetired): WindowWorkflowID of each retired window;
//  3. the first offer the poll makes before the window's workflow exists
//     (internal/activity/starter.go firstOffer, internal/activity/handoff.go HandOff):
//     OpenAgentSession (a fresh session token, the worker's session TTL of 0: it reads
//     the window and the route too), Installation, the typing keep-alive's first show (the Typer's GetAccountWithSecret,
//     in the background as the worker shows it), then the echo agent's answer
//     (handoff.Echo, in process);
//  4. the window's workflow start (startWindow): WindowWorkflowID of the opened window;
//  5. the reply of the hand-off's answer (workflows/window.go took → sendOne, the Send
//     activity of internal/activity/send.go): ReserveAndStart with the request id the workflow
//     gives it ("handoff-1-1"), StartSend while the attempt waits its turn (awaitStart),
//     CompleteSend as sent with a provider message id as the simulator answers one, then
//     the end of "typing" (the Typer's GetAccountWithSecret, once the keep-alive's show is
//     done: the Typer orders a conversation's typing calls);
//  6. the verdict (window.finish, internal/activity/finish.go): FinishMessage handled, then the
//     end of "typing" again (GetAccountWithSecret).
//
// Once per bot, when the system is made, it does what a poll activity does at its start
// (TakePollLease, GetAccountWithSecret for the cursor and owner), and while it runs it
// renews the leases as a worker's lease keeper does (one RenewPollLeases for all every
// third of the lease's TTL). The lease is not what CommitPage checks; it keeps a worker
// from polling the same bots meanwhile (its epoch, 0, is older than any poll activity's:
// the system never asks a live poll to let go, and lets go when one asks).
//
// Left out, because they are not the store's (their store reads stay, as listed above):
// the long poll (getupdates), the send (sendmessage) and typing calls to iLink; every
// Temporal call: the window workflow's start, the retired signal, the workflow tasks, the
// scheduling of the Send and FinishMessage activity. Left out because they are not
// per message in a closed loop: the poll activity's release of its lease at its end,
// RecordPoll (an empty long poll, which a bot with a message waiting does not make), the
// keep-alive's later shows (every 5 s while no reply is reserved: the reply comes
// sooner), and the window's expiry (ExpireWindow, SweepMedia: the next message of the
// bot retires the window instead; only each bot's last window expires). Retries are left
// out too: where the worker would retry or re-offer, the exchange fails with the store's
// error (a failed page commit makes the bot's next exchange read its cursor again, as a
// retried poll activity does).
//
// The pages carry no provider sequence. The simulator numbers a bot's messages from 1;
// a sequence of this system's own could not be ordered against those of the same bots,
// and a message whose sequence is lower than the open window's is absorbed, not answered.
// Without one, messages are ordered by sent-at, which this system keeps increasing per
// bot (by at least a millisecond, the resolution of iLink's create_time_ms).
//
// Pacing: the worker paces a bot's sends by its --send-gap (2 s by default, 10 ms in a
// saturation run). The store ceiling is what the store can do, not what iLink's pacing
// lets through, so it starts sends with no gap (store.SendPacing{}): a send starts at once
// unless the store finds another send to the peer in flight or the bot's breaker open.
// What the store made it wait is counted (storeSystem.waits; 0 in a closed loop).
//
// Exchanges of one bot run one at a time, whole (a bot's poller commits one page at a
// time, and the closed loop sends a bot's next message after its reply); an exchange
// returns once the message's verdict is stored, one transaction after the reply would
// have reached the user, so a bot's next page never overlaps its previous message's
// completion and verdict as it may in the gateway. The latency exchangeTimed reports
// runs from the page's receipt to the start of the reply's send, where the worker would
// transmit it.
//
// The soak (soak.go) drives the same exchanges with the store's time on a simulated clock
// (storeSystem.clock: the now each call passes; leases and latencies stay on the wall
// clock), and may carry several of a bot's messages on one page (exchangePage), as a
// poll that finds several queued does: they merge into one delivery and one reply.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/activity"
	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/pause"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// Settings of the store ceiling, those of the worker's activity.
const (
	// storeLeaseTTL is the poll leases' TTL (the worker's default).
	storeLeaseTTL = activity.DefaultLeaseTTL
	// storeInFlightWait is how long a send waits before it looks again whether another
	// send to the peer completed (activities' inFlightWait).
	storeInFlightWait = 250 * time.Millisecond
	// localLeaseValidity is how long after a renewal started its leases are trusted (the
	// lease keeper's: less than the TTL the database counts from a later instant).
	localLeaseValidity = storeLeaseTTL * 8 / 10
	// storeTypingTimeout bounds the keep-alive's first show of "typing" (the Typer's).
	storeTypingTimeout = 3 * time.Second
)

// Errors of the store ceiling's poll leases.
var (
	// errStoreLeaseLost: a bot's poll lease was taken over or not renewed in time.
	errStoreLeaseLost = errors.New("loadtest: the store ceiling's poll lease was lost")
	// errStoreLeaseHeld: a live poll held a bot's lease for longer than a lease lives.
	errStoreLeaseHeld = errors.New("loadtest: a bot's poll lease is held")
)

// storeSystem is the store ceiling's system: it carries exchanges through the store alone.
type storeSystem struct {
	st     *store.Store
	bots   []*storeBot
	holder string
	// ids issues provider message ids, inbound and sent (decimal, as iLink's grow).
	ids atomic.Uint64
	// done is closed once the leases were released after the system's context ended.
	done chan struct{}

	mu sync.Mutex
	// sent holds, per message key, the attempts completed as sent, while the message's
	// exchange runs (settle then counts it doubled or not and forgets it).
	sent map[string]map[string]bool
	// doubledSettled counts the settled messages with more than one attempt sent.
	doubledSettled int
	// validUntil is how long the leases are trusted after the last renewal (as the
	// worker's lease keeper trusts them).
	validUntil time.Time
	// waited counts the starts the store made wait, and for how long in all.
	waited    int
	waitedFor time.Duration
	// typingFailed counts the typing reads that failed (not an exchange's failure).
	typingFailed atomic.Int64
	// clock is the store's time for the exchanges' calls (the now they pass); nil is the
	// wall clock. The soak sets a simulated one before its first exchange. Latencies and
	// the poll leases always run on the wall clock.
	clock func() time.Time
}

// exchangeTimes are what one exchange measured, on the wall clock.
type exchangeTimes struct {
	// latency runs from the page's receipt (before its commit) to the start of the first
	// reply's send, where the worker would transmit it.
	latency time.Duration
	// commit is the page commit (the CommitPage call).
	commit time.Duration
	// send is the first reply's send in the store: from ReserveAndStart to the return of
	// CompleteSend, with any wait for its start.
	send time.Duration
}

// storeBot is one bot of a storeSystem, with its poll's state.
type storeBot struct {
	bot
	generation int32
	lease      store.PollLease
	// takenFrom is when the take of the lease started.
	takenFrom time.Time

	mu sync.Mutex // held for a whole exchange
	// cursor is where the bot's last page commit left it; stale when a commit failed
	// (then the next exchange reads it again).
	cursor string
	stale  bool
	// lastSentAt is the sent-at of the bot's last message.
	lastSentAt time.Time
	lost       atomic.Bool // the lease was taken over
}

// newStoreSystem makes the store ceiling's system for bots, enrolled in st as a confirmed
// QR enrollment leaves them: it takes each bot's poll lease and reads its account, as a
// poll activity does at its start. The leases are renewed until ctx ends, then released
// (storeSystem.closed says when). A bot whose lease a live poll holds is refused (after
// waiting a lease's TTL, for the leases of a worker that was killed to expire): the store
// ceiling never shares a bot with a worker.
//
// The system is a *storeSystem: besides satSystem it measures its own latency
// (exchangeTimed), counts the store's waits before a send (waits), and says when its
// leases were released (closed).
func newStoreSystem(ctx context.Context, st *store.Store, bots []bot) (satSystem, error) {
	if len(bots) == 0 {
		return nil, errors.New("loadtest: the store ceiling needs at least one bot")
	}
	if _, err := st.Installation(ctx); err != nil {
		return nil, fmt.Errorf("store ceiling: installation: %w", err)
	}
	s := &storeSystem{st: st, holder: storeLeaseHolder(), done: make(chan struct{}),
		sent: map[string]map[string]bool{}}
	s.ids.Store(uint64(time.Now().UnixNano())) // past any id an earlier system of this process used
	s.bots = make([]*storeBot, len(bots))
	release := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, sb := range s.bots {
			if sb != nil && sb.lease.Holder != "" {
				_, _ = st.ReleasePollLease(rctx, sb.lease) // best effort: an unreleased lease expires
			}
		}
	}
	leaseWait := time.Now().Add(storeLeaseTTL + 5*time.Second)
	for i, b := range bots {
		sb, err := s.openBot(ctx, b, leaseWait)
		if sb != nil {
			s.bots[i] = sb
		}
		if err != nil {
			release()
			return nil, fmt.Errorf("store ceiling: bot %d (%s): %w", i+1, b.id, err)
		}
	}
	// Trusted as long as the earliest lease, as the lease keeper trusts a lease.
	s.validUntil = s.bots[0].takenFrom.Add(localLeaseValidity)
	for _, sb := range s.bots {
		if until := sb.takenFrom.Add(localLeaseValidity); until.Before(s.validUntil) {
			s.validUntil = until
		}
	}
	go func() {
		defer close(s.done)
		defer release()
		s.renewLeases(ctx)
	}()
	return s, nil
}

// storeLeaseHolder names the store ceiling's lease holder (host, pid and a random part).
func storeLeaseHolder() string {
	host, _ := os.Hostname()
	if len(host) > 64 {
		host = host[:64]
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("loadtest-store-ceiling/%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// openBot takes a bot's poll lease and reads its account (PollAccount's takePollLease and
// pollTarget), waiting until leaseWait for a lease a dead worker left to expire. The bot
// is returned with its lease also when the read then fails.
func (s *storeSystem) openBot(ctx context.Context, b bot, leaseWait time.Time) (*storeBot, error) {
	lease := store.PollLease{AccountKey: b.accountKey, Holder: s.holder, Epoch: 0, Attempt: 1}
	var takenFrom time.Time
	for {
		takenFrom = time.Now()
		taken, _, err := s.st.TakePollLease(ctx, lease, storeLeaseTTL)
		if err != nil {
			return nil, fmt.Errorf("take poll lease: %w", err)
		}
		if taken {
			break
		}
		// A worker killed before it released its leases holds them until they expire.
		if time.Now().After(leaseWait) {
			return nil, fmt.Errorf("a live poll holds the bot's poll lease (is a worker polling it?): %w", errStoreLeaseHeld)
		}
		if err := pause.For(ctx, time.Second); err != nil {
			return nil, err
		}
	}
	sb := &storeBot{bot: b, lease: lease, takenFrom: takenFrom}
	acct, err := s.st.GetAccountWithSecret(ctx, b.accountKey)
	if err != nil {
		return sb, fmt.Errorf("read account: %w", err)
	}
	switch {
	case acct.Status != vocab.AccountActive:
		return sb, fmt.Errorf("account is %s, not active", acct.Status)
	case acct.OwnerPeerID != b.owner:
		return sb, fmt.Errorf("account's owner is %q, not the bot's %q", acct.OwnerPeerID, b.owner)
	}
	sb.generation, sb.cursor = acct.Generation, acct.Cursor
	return sb, nil
}

// renewLeases renews the leases every third of their TTL until ctx ends or none is held
// (the worker's lease keeper: one statement for all).
func (s *storeSystem) renewLeases(ctx context.Context) {
	every := storeLeaseTTL / 3
	t := time.NewTicker(every)
	defer t.Stop()
	byKey := make(map[string]*storeBot, len(s.bots))
	for _, sb := range s.bots {
		byKey[sb.accountKey] = sb
	}
	for len(byKey) > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		keys := make([]string, 0, len(byKey))
		for key := range byKey {
			keys = append(keys, key)
		}
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, every)
		kept, err := s.st.RenewPollLeases(rctx, s.holder, keys, storeLeaseTTL)
		cancel()
		if err != nil {
			continue // trusted until validUntil
		}
		held := make(map[string]bool, len(kept))
		for _, r := range kept {
			if r.Epoch == 0 && r.Attempt == 1 && !r.Wanted {
				held[r.AccountKey] = true
			}
		}
		for key, sb := range byKey {
			if !held[key] {
				// Taken over, or a poll asked for it: let go (the bot's exchanges fail).
				sb.lost.Store(true)
				delete(byKey, key)
				rctx, cancel := context.WithTimeout(ctx, every)
				_, _ = s.st.ReleasePollLease(rctx, sb.lease) // best effort: it expires
				cancel()
			}
		}
		s.mu.Lock()
		s.validUntil = start.Add(localLeaseValidity)
		s.mu.Unlock()
	}
}

// closed is closed once the leases were released: the system's context ended, or every
// lease was lost.
func (s *storeSystem) closed() <-chan struct{} { return s.done }

// checkLease fails when the bot's lease is lost or past its trusted validity.
func (s *storeSystem) checkLease(sb *storeBot) error {
	s.mu.Lock()
	valid := time.Now().Before(s.validUntil)
	s.mu.Unlock()
	if sb.lost.Load() || !valid {
		return errStoreLeaseLost
	}
	return nil
}

// now is the store's time for an exchange's call (see storeSystem.clock).
func (s *storeSystem) now() time.Time {
	if s.clock != nil {
		return s.clock()
	}
	return time.Now()
}

// doubled counts the messages with more than one attempt completed as sent.
func (s *storeSystem) doubled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.doubledSettled
	for _, atts := range s.sent {
		if len(atts) > 1 {
			n++
		}
	}
	return n
}

// settle ends the watch over a message's sends once its exchange returned (no later
// exchange sends for it): counted if it was doubled, then forgotten, so that what the
// system holds stays bounded by the exchanges under way.
func (s *storeSystem) settle(messageKey string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sent[messageKey]) > 1 {
		s.doubledSettled++
	}
	delete(s.sent, messageKey)
}

// waits reports how many sends the store made wait for their start (pacing, another send
// to the peer in flight) and for how long in all.
func (s *storeSystem) waits() (n int, total time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waited, s.waitedFor
}

// exchange carries message n of bot b through the store (see the file's comment for the
// store calls, in order). It returns once the message is finished handled, or with the
// error of the step that failed.
func (s *storeSystem) exchange(ctx context.Context, b, n int) error {
	_, err := s.exchangeTimed(ctx, b, n)
	return err
}

// exchangeTimed is exchange that also returns the message's latency: from the page's
// receipt (before its commit) to the start of the reply's send, the instant the worker
// would transmit the reply to iLink. A wait for the bot's previous exchange is not
// counted.
func (s *storeSystem) exchangeTimed(ctx context.Context, b, n int) (time.Duration, error) {
	t, err := s.exchangePage(ctx, b, n, 1)
	return t.latency, err
}

// exchangePage carries messages n to n+count-1 of bot b through the store as one page:
// the page's messages are merged into one delivery (the last one's), which the echo
// agent answers once; count 1 is exchange. It returns what it measured.
func (s *storeSystem) exchangePage(ctx context.Context, b, n, count int) (exchangeTimes, error) {
	var t exchangeTimes
	if b < 0 || b >= len(s.bots) {
		return t, fmt.Errorf("store ceiling: no bot %d (of %d)", b, len(s.bots))
	}
	if count < 1 {
		return t, fmt.Errorf("store ceiling: a page of %d messages", count)
	}
	sb := s.bots[b]
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return t, err
	}
	if err := s.checkLease(sb); err != nil {
		return t, fmt.Errorf("store ceiling: bot %d: %w", b+1, err)
	}
	received := time.Now()
	win, took, err := s.commit(ctx, sb, s.now(), n, count)
	t.commit = took
	if err != nil {
		return t, fmt.Errorf("store ceiling: bot %d message %d: %w", b+1, n, err)
	}
	defer s.settle(win.MessageKey)
	sent, err := s.answer(ctx, win)
	if err != nil {
		return t, fmt.Errorf("store ceiling: bot %d message %d (window %d): %w", b+1, n, win.ReplyWindowID, err)
	}
	t.latency, t.send = sent.at.Sub(received), sent.took
	return t, nil
}

// commit stores messages n to n+count-1 of the bot as one page (the poll's commit), at the
// store's time received, and tells the windows it superseded to end (their workflow ids
// read). It returns the window the page opened for its deliverable message.
func (s *storeSystem) commit(ctx context.Context, sb *storeBot, received time.Time, n, count int) (store.OpenedWindow, time.Duration, error) {
	var none store.OpenedWindow
	if sb.stale {
		// A retried poll activity starts again from the stored cursor.
		acct, err := s.st.GetAccountWithSecret(ctx, sb.accountKey)
		if err != nil {
			return none, 0, fmt.Errorf("read account: %w", err)
		}
		sb.cursor, sb.generation, sb.stale = acct.Cursor, acct.Generation, false
	}
	next, err := newStoreCursor(s.ids.Add(1))
	if err != nil {
		return none, 0, err
	}
	// iLink's create_time_ms: milliseconds, increasing per bot (see the file's comment).
	sentAt := received.Truncate(time.Millisecond)
	entries := make([]store.PageEntry, count)
	for i := range entries {
		if !sentAt.After(sb.lastSentAt) {
			sentAt = sb.lastSentAt.Add(time.Millisecond)
		}
		token, err := newStoreContextToken()
		if err != nil {
			return none, 0, err
		}
		entries[i] = store.PageEntry{
			ProviderMessageID: strconv.FormatUint(s.ids.Add(1), 10),
			PeerID:            sb.owner,
			SentAt:            sentAt,
			Cursor:            sb.cursor,
			ContextToken:      token,
			Payload:           store.Payload{Summary: fmt.Sprintf("saturation message %d", n+i)}, // the saturation loop's text
		}
		sb.lastSentAt = sentAt
	}
	began := time.Now()
	res, err := s.st.CommitPage(ctx, received, store.PageInput{
		AccountKey: sb.accountKey, Generation: sb.generation,
		ExpectedCursor: sb.cursor, NextCursor: next, Entries: entries,
	})
	took := time.Since(began)
	if err != nil {
		sb.stale = true
		return none, took, fmt.Errorf("commit page: %w", err)
	}
	sb.cursor = res.Cursor
	for _, id := range res.RetiredWindowIDs {
		if _, err := s.st.WindowWorkflowID(ctx, id); err != nil {
			return none, took, fmt.Errorf("workflow id of retired window %d: %w", id, err)
		}
	}
	switch {
	case res.Generation > sb.generation:
		return none, took, fmt.Errorf("page stored after the account was rotated to generation %d", res.Generation)
	case res.AccountStatus != vocab.AccountActive:
		return none, took, fmt.Errorf("page stored after the account became %s", res.AccountStatus)
	case res.Inserted != count || res.Deliverable == nil || res.Opened == nil || !res.Opened.Deliverable:
		return none, took, fmt.Errorf("the page of %d messages was not stored as new and deliverable (inserted %d, duplicates %d, absorbed %d, deferred %d)",
			count, res.Inserted, res.Duplicates, res.Absorbed, res.Deferred)
	}
	return *res.Opened, took, nil
}

// sendTimes are one reply's send, on the wall clock.
type sendTimes struct {
	// at is when the send started in the store (the worker would transmit it then).
	at time.Time
	// took runs from the reservation to the completion's return.
	took time.Duration
}

// answer hands the window's message to the echo agent, sends its reply and records the
// verdict, as the poll's first offer, the window's workflow and its activities do. It
// returns the first reply's send: when it started (the worker would transmit it then)
// and how long it took in the store.
func (s *storeSystem) answer(ctx context.Context, win store.OpenedWindow) (sent sendTimes, err error) {
	// The first offer (HandOff from the poll).
	token, err := newStoreSessionToken()
	if err != nil {
		return sent, err
	}
	opened, err := s.st.OpenAgentSession(ctx, s.now(), store.OpenSessionInput{ReplyWindowID: win.ReplyWindowID, Token: token})
	if err != nil {
		return sent, fmt.Errorf("open agent session: %w", err)
	}
	sess, msg, w := opened.Session, opened.Message, opened.Window
	inst, err := s.st.Installation(ctx)
	if err != nil {
		return sent, fmt.Errorf("installation: %w", err)
	}
	// The keep-alive's first show of "typing" reads the account in the background (on its
	// own deadline); the end of "typing" after the send waits for it (the Typer orders a
	// conversation's calls).
	shown := make(chan struct{})
	go func() {
		defer close(shown)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTypingTimeout)
		defer cancel()
		s.typingRead(sctx, w.AccountKey)
	}()
	defer func() { <-shown }()
	ans, err := handoff.Echo{}.Deliver(ctx, handoff.Delivery{Message: msg, SessionID: sess.SessionID, SessionToken: token, Window: w,
		WindowWorkflowID: inst.WindowWorkflowID(w.ReplyWindowID), AgentWorkflowID: inst.AgentWorkflowID(msg.MessageKey)})
	if err != nil {
		return sent, fmt.Errorf("echo agent: %w", err)
	}
	// The window's workflow start (the poll's startWindow).
	if _, err := s.st.WindowWorkflowID(ctx, win.ReplyWindowID); err != nil {
		return sent, fmt.Errorf("window workflow id: %w", err)
	}
	// The workflow's took: each reply through sendOne (the Send activity), then finish.
	if len(ans.Replies) == 0 {
		return sent, errors.New("the echo agent answered no reply")
	}
	for i, text := range ans.Replies {
		st, err := s.send(ctx, sess, text, fmt.Sprintf("handoff-1-%d", i+1))
		if err != nil {
			return sent, err
		}
		if i == 0 {
			sent = st
		}
		<-shown
		s.typingRead(ctx, w.AccountKey) // the end of "typing" after a reply
	}
	if !ans.Handled {
		return sent, errors.New("the echo agent did not answer handled")
	}
	if _, err := s.st.FinishMessage(ctx, s.now(), msg.MessageKey, vocab.MessageHandled, ""); err != nil {
		return sent, fmt.Errorf("finish message: %w", err)
	}
	s.typingRead(ctx, w.AccountKey) // the end of "typing" after the verdict
	return sent, nil
}

// send is the Send activity for one reply of the hand-off's answer: reserve and start
// (no pacing gap), wait for its turn when the store says so, and complete it as sent
// (iLink's answer to the send left out). It returns when the send started and how long
// the store took for it in all.
func (s *storeSystem) send(ctx context.Context, sess store.Session, text, requestID string) (started sendTimes, err error) {
	ref := store.BySessionID(sess.SessionID)
	reserving := time.Now()
	var pacing store.SendPacing // no gap: see the file's comment
	prep, err := s.st.ReserveAndStart(ctx, s.now(), store.ReplyInput{Session: ref,
		Content: vocab.Content{Type: "text", Text: text}, RequestID: requestID}, pacing)
	if err != nil {
		return started, fmt.Errorf("reserve reply: %w", err)
	}
	att := prep.Attempt
	switch {
	case prep.Started != nil:
	case att.Status != vocab.AttemptPending:
		// Made by an earlier exchange: the store would not send it again.
		return started, fmt.Errorf("reply %s found %s, not reserved by this exchange", att.AttemptID, att.Status)
	default:
		began := time.Now()
		for prep.Started == nil && prep.BlockedUntil == nil {
			d := prep.NotBefore.Sub(s.now())
			if prep.InFlight {
				d = max(d, storeInFlightWait)
			}
			if err := pause.For(ctx, d); err != nil {
				return started, err
			}
			if prep, err = s.st.StartSend(ctx, s.now(), ref, att.AttemptID, pacing); err != nil {
				return started, fmt.Errorf("start reply: %w", err)
			}
		}
		s.mu.Lock()
		s.waited++
		s.waitedFor += time.Since(began)
		s.mu.Unlock()
		if prep.Started == nil {
			if _, err := s.st.ReleaseSend(ctx, s.now(), att.AttemptID, vocab.SendThrottled); err != nil {
				return started, fmt.Errorf("release throttled reply: %w", err)
			}
			return started, fmt.Errorf("reply %s not sent: the bot's sends are blocked until %v", att.AttemptID, prep.BlockedUntil)
		}
	}
	// The reply is transmitted here in the worker; the simulator answers with a message id.
	started.at = time.Now()
	done, err := s.st.CompleteSend(ctx, s.now(), store.Completion{AttemptID: att.AttemptID, Status: vocab.AttemptSent,
		ProviderMessageID: strconv.FormatUint(s.ids.Add(1), 10)})
	started.took = time.Since(reserving)
	if err != nil {
		return started, fmt.Errorf("complete reply %s: %w", att.AttemptID, err)
	}
	if done.Attempt.Status != vocab.AttemptSent {
		return started, fmt.Errorf("reply %s completed %s, not sent", att.AttemptID, done.Attempt.Status)
	}
	s.mu.Lock()
	atts := s.sent[done.Attempt.SourceMessageKey]
	if atts == nil {
		atts = map[string]bool{}
		s.sent[done.Attempt.SourceMessageKey] = atts
	}
	atts[done.Attempt.AttemptID] = true
	s.mu.Unlock()
	return started, nil
}

// typingRead is the store's part of a typing call (show or cancel): the Typer reads the
// account and its bot token. Its failure is only counted: the worker only logs it.
func (s *storeSystem) typingRead(ctx context.Context, accountKey string) {
	if _, err := s.st.GetAccountWithSecret(ctx, accountKey); err != nil {
		s.typingFailed.Add(1)
	}
}

// newStoreContextToken is a fresh context token shaped like the simulator's (48 bytes,
// base64).
func newStoreContextToken() (sealing.Secret, error) {
	var b [48]byte
	if _, err := rand.Read(b[:]); err != nil {
		return sealing.Secret{}, err
	}
	b[0], b[1] = 0x08, 0xA0|b[1]&0x0f
	return sealing.NewSecret(base64.StdEncoding.EncodeToString(b[:])), nil
}

// newStoreCursor is a fresh cursor shaped like the simulator's get_updates_buf (66 bytes,
// base64), unique by seq.
func newStoreCursor(seq uint64) (string, error) {
	b := make([]byte, 0, 66)
	b = append(b, 0x0a, 0x40)
	b = strconv.AppendUint(b, seq, 16)
	tail := make([]byte, 66-len(b))
	if _, err := rand.Read(tail); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(append(b, tail...)), nil
}

// newStoreSessionToken is a fresh agent session token as the hand-off makes one (32
// random bytes, base64url).
func newStoreSessionToken() (sealing.Secret, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return sealing.Secret{}, err
	}
	return sealing.NewSecret(base64.RawURLEncoding.EncodeToString(b[:])), nil
}
