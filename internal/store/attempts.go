package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/internal/store/rules"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// ReplyInput is an agent's reply: one item sent through the window of its session.
type ReplyInput struct {
	Session SessionRef
	Content vocab.Content
	// Metadata is free-form JSON-encodable data kept with the attempt (at most 8 KiB).
	Metadata map[string]any
	// RequestID, when set, makes the reservation idempotent: a retry with the same id finds
	// the attempt it made (the same content is required) instead of reserving again.
	RequestID string
	// ReplyWindowID, when set, is the window the session must belong to.
	ReplyWindowID int64
	// Final marks the agent's final answer: it may use the sends the window keeps for it
	// (Limits.FinalSlots); any other reply stops short of them (reply_slots_reserved).
	Final bool
}

// Reservation is the attempt a reservation made (or found, for a request id already used)
// and, when that attempt records a refusal (a failed attempt: the window had expired or its
// quota was used up), the refusal.
type Reservation struct {
	Attempt Attempt
	// Refused is reply_window_expired or reply_quota_exhausted when the reply was refused.
	Refused vocab.Code
}

type preparedContent struct {
	payload     []byte
	metadata    []byte
	fingerprint string
}

// validateContent checks one outbound item before anything is reserved.
func (s *Store) validateContent(c vocab.Content, metadata map[string]any) (preparedContent, error) {
	switch c.Type {
	case "text":
		if c.Text == "" || c.Media != nil {
			return preparedContent{}, fail(vocab.CodeInvalidInput, "a text item needs text and no media")
		}
		if f := vocab.CheckText(c.Text, s.limits.MaxTextBytes); f != vocab.TextOK {
			return preparedContent{}, fail(vocab.CodeInvalidInput, "%s", f.Describe(len(c.Text), s.limits.MaxTextBytes))
		}
	case "image", "file", "video":
		if c.Media == nil || uuid.Validate(c.Media.MediaID) != nil || len(c.Media.SHA256) > 64 ||
			len(c.Media.FileName) > vocab.MaxFileNameBytes || vocab.CheckFileName(c.Media.FileName) != vocab.TextOK ||
			c.Media.Size < 0 || c.Text != "" {
			return preparedContent{}, fail(vocab.CodeInvalidInput, "a %s item needs a valid media reference", c.Type)
		}
		if c.Type == "file" && c.Media.FileName == "" {
			return preparedContent{}, fail(vocab.CodeInvalidInput, "a file item needs a file name")
		}
	default:
		return preparedContent{}, fail(vocab.CodeInvalidInput, "content type must be text, image, file or video")
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return preparedContent{}, fail(vocab.CodeInvalidInput, "content does not encode")
	}
	if metadata == nil {
		metadata = map[string]any{}
	}
	meta, err := json.Marshal(metadata) // map keys are sorted: canonical
	if err != nil || len(meta) > maxMetadataBytes {
		return preparedContent{}, fail(vocab.CodeInvalidInput, "metadata must be JSON of at most %d bytes", maxMetadataBytes)
	}
	sum := sha256.Sum256(append(append([]byte(c.Type), 0), payload...))
	return preparedContent{payload: payload, metadata: meta, fingerprint: hex.EncodeToString(sum[:])}, nil
}

// SendPacing is when a bot may start a send: never while its throttle breaker is open,
// and not before Gap has passed since its last send.
type SendPacing struct {
	Gap time.Duration
}

// PreparedSend is the outcome of ReserveAndStart.
type PreparedSend struct {
	Reservation
	// Window is the window after the reservation (and start).
	Window Window
	// Started holds what transmitting needs when the attempt was started in the same
	// transaction; it is nil when the attempt is left pending (or was found, not made).
	Started *SendStart
	// NotBefore is when a pending attempt may start (the bot's pacing); BlockedUntil is
	// set while the bot's throttle breaker is open; InFlight while another send to the
	// peer has not completed.
	NotBefore    time.Time
	BlockedUntil *time.Time
	InFlight     bool
}

// SendStart is what transmitting a started attempt needs, read in the transaction that
// started it: the attempt, its window after the start, the window's context token and
// the bot's account with its token.
type SendStart struct {
	Attempt      Attempt
	Window       Window
	ContextToken sealing.Secret
	Account      AccountWithSecret
}

// ReserveAndStart reserves one send of the session's window: it allocates the next
// physical send index of the source message, derives the attempt id and client message id
// from it, and moves the window's next_send_index and reserved in the statement that
// checks the quota. Refusals are errors (reply_window_expired, reply_quota_exhausted, ...)
// and write nothing. It also starts the attempt in the same transaction when nothing must
// wait between the two: the bot's breaker is closed, its pacing gap has passed and no
// other send to the peer is in flight. Otherwise the attempt stays pending and
// PreparedSend says until when; StartSend starts it later. A request id already used
// returns the attempt it made (neither reserved nor started again).
func (s *Store) ReserveAndStart(ctx context.Context, now time.Time, in ReplyInput, pacing SendPacing) (traced PreparedSend, tracedErr error) {
	ctx, span := startSpan(ctx, "ReserveAndStart", "")
	defer func() { endSpan(span, tracedErr, traced.Window.AccountKey, traced.Window.SourceMessageKey) }()
	return s.reserve(ctx, now, in, &pacing)
}

// reserve is ReserveAndStart: one transaction whose locks and reads share a round trip,
// and whose writes travel with COMMIT.
func (s *Store) reserve(ctx context.Context, now time.Time, in ReplyInput, pacing *SendPacing) (PreparedSend, error) {
	r, err := s.newReservation(now, in, pacing)
	if err != nil {
		return PreparedSend{}, err
	}
	err = s.inPipeline(ctx, "reserve reply", func(p *pipeline, q *dbq.Queries) error {
		prior, sendCtx, err := r.lockSession(ctx, q)
		if err != nil {
			return err
		}
		if found, err := r.earlierAttempt(prior); found || err != nil {
			return err
		}
		if err := r.decide(sendCtx); err != nil {
			return err
		}
		writes := r.queueWrites(ctx, q)
		// Every decision is made, under the account's and the window's locks: COMMIT
		// travels with the writes. Should the window's counters not move, the attempt is
		// not recorded either (InsertSendAttempt checks), so nothing half is committed.
		p.commitQueued()
		return r.readWrites(writes)
	})
	return r.out, err
}

// reservation is one reserve under way: its checked input, what its transaction read
// and decided under the locks, and the outcome it fills.
type reservation struct {
	s         *Store
	now       time.Time
	in        ReplyInput
	pacing    *SendPacing
	pc        preparedContent
	requestID *string

	sess    dbq.AgentSession
	sessRow dbq.SessionByTokenHashRow // sess with its message's status
	w       dbq.ReplyWindow
	acct    dbq.Account
	lockErr error // a rule the locks broke (raised by decide)
	reads   startRead
	index   int32
	// startNow: the attempt starts in the reserving transaction (ReserveAndStart).
	startNow bool

	out PreparedSend
}

// newReservation checks a reply before anything is reserved: the clock, the content and
// its metadata, the request id.
func (s *Store) newReservation(now time.Time, in ReplyInput, pacing *SendPacing) (*reservation, error) {
	if err := validNow(now); err != nil {
		return nil, err
	}
	pc, err := s.validateContent(in.Content, in.Metadata)
	if err != nil {
		return nil, err
	}
	if len(in.RequestID) > 256 {
		return nil, fail(vocab.CodeInvalidInput, "request id is too long")
	}
	r := &reservation{s: s, now: now, in: in, pacing: pacing, pc: pc}
	if in.RequestID != "" {
		r.requestID = &r.in.RequestID
	}
	return r, nil
}

// lockSession finds the session and, in one round trip, takes its locks, reads the
// request's earlier attempt and queues the send context (next send index and, when the
// send may start at once, what starting it needs). When the caller names the window (the
// Send activity does), the session's read travels in that round trip too: the locks and
// reads are keyed by the window, and the session is checked against it as always. A rule
// the locks break is kept in lockErr; only other failures are returned.
func (r *reservation) lockSession(ctx context.Context, q *dbq.Queries) (attemptRead, sendContext, error) {
	if r.in.ReplyWindowID != 0 {
		return r.lockWindowSession(ctx, q)
	}
	row, err := findSession(ctx, q, r.in.Session)
	if err != nil {
		return nil, sendContext{}, err
	}
	r.sess, r.sessRow = row.AgentSession, row
	locks := queueSessionLocks(ctx, q, row)
	var prior attemptRead
	if r.requestID != nil {
		b := q.AttemptByRequest(ctx, []dbq.AttemptByRequestParams{{SourceMessageKey: r.sess.SourceMessageKey, RequestID: r.requestID}})
		prior = func() (dbq.SendAttempt, error) { return batchRow[dbq.SendAttempt](b) }
	}
	sendCtx := queueSendContext(ctx, q, r.sess.ReplyWindowID)
	return prior, sendCtx, r.checkLocks(locks)
}

// lockWindowSession is lockSession for a named window: one round trip for the session,
// the account's and the window's locks, the earlier attempt and the send context.
func (r *reservation) lockWindowSession(ctx context.Context, q *dbq.Queries) (attemptRead, sendContext, error) {
	wid := r.in.ReplyWindowID
	session := queueSession(ctx, q, r.in.Session)
	locks := queueWindowLocks(ctx, q, wid)
	var prior attemptRead
	if r.requestID != nil {
		b := q.AttemptByRequestOfWindow(ctx, []dbq.AttemptByRequestOfWindowParams{{ReplyWindowID: wid, RequestID: r.requestID}})
		prior = func() (dbq.SendAttempt, error) { return batchRow[dbq.SendAttempt](b) }
	}
	sendCtx := queueSendContext(ctx, q, wid)
	row, err := session()
	if err != nil {
		return nil, sendContext{}, err
	}
	r.sess, r.sessRow = row.AgentSession, row
	if r.sess.ReplyWindowID != wid {
		return nil, sendContext{}, fail(vocab.CodeInvalidAgentSession, "the agent session belongs to another reply window")
	}
	locks.row = row
	return prior, sendCtx, r.checkLocks(locks)
}

// checkLocks reads the session's locks and checks them (sessionLocks.check), keeping a
// broken rule in lockErr; only other failures are returned.
func (r *reservation) checkLocks(locks sessionLocks) error {
	r.w, r.acct, r.lockErr = locks.check(r.now)
	if r.lockErr != nil && !IsRuleViolation(r.lockErr) {
		return r.lockErr
	}
	return nil
}

// attemptRead reads a queued attempt lookup (nil: nothing was looked up).
type attemptRead func() (dbq.SendAttempt, error)

// earlierAttempt reads the attempt the request id already made (prior, nil without a
// request id). found reports that there is one: the outcome holds it (with err, if any)
// and nothing is reserved again.
func (r *reservation) earlierAttempt(prior attemptRead) (found bool, err error) {
	if prior == nil {
		return false, nil
	}
	earlier, err := prior()
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	refused, err := rules.MatchEarlierAttempt(r.pc.fingerprint, rules.EarlierAttempt{
		Fingerprint: earlier.Fingerprint, FailType: earlier.FailType, ErrorCode: earlier.ErrorCode})
	if err != nil {
		return true, ruled(err)
	}
	r.out.Attempt, err = attemptFrom(earlier)
	r.out.Refused = refused
	r.out.Window = windowFrom(r.w)
	r.out.NotBefore, r.out.BlockedUntil = pacedStart(r.now, r.acct, r.pacing)
	return true, err
}

// decide reads the send context and decides the reservation under the locks
// (rules.DecideReservation): its send index, whether it is refused (expired window or
// exhausted quota, raised) and, with pacing, whether it starts now.
func (r *reservation) decide(sendCtx sendContext) error {
	reads, err := sendCtx.read()
	if err != nil {
		return err
	}
	r.reads, r.index = reads, reads.nextIndex
	d, err := rules.DecideReservation(rules.ReserveInput{
		Now: r.now, Window: ruleWindow(r.w), Bot: ruleAccount(r.acct), LockRefusal: refusalOf(r.lockErr),
		Final: r.in.Final, FinalSlots: r.s.limits.FinalSlots, NextIndex: r.index,
		Pacing: rulePacing(r.pacing), PeerSending: reads.peerSending,
	})
	if err != nil {
		return ruled(err)
	}
	if r.pacing != nil {
		r.out.NotBefore, r.out.BlockedUntil, r.out.InFlight = d.Turn.NotBefore, d.Turn.BlockedUntil, d.Turn.InFlight
		r.startNow = d.StartNow
	}
	return nil
}

// reservationWrites are the results of a reservation's queued writes: the window's
// counters (counted, or started, with the bot's last send, when the attempt starts at
// once; neither for a refusal) and the attempt.
type reservationWrites struct {
	counted  *dbq.ReserveWindowSendBatchResults
	started  *dbq.ReserveStartedWindowSendBatchResults
	inserted *dbq.InsertSendAttemptBatchResults
}

// queueWrites queues the reservation's writes, to travel in one round trip: the window's
// counters (with the bot's last send when the attempt starts) and the attempt.
func (r *reservation) queueWrites(ctx context.Context, q *dbq.Queries) reservationWrites {
	var out reservationWrites
	w, sess, pc, now := r.w, r.sess, r.pc, r.now
	status := vocab.AttemptPending
	switch {
	case r.startNow:
		status = vocab.AttemptSending
		out.started = q.ReserveStartedWindowSend(ctx, []dbq.ReserveStartedWindowSendParams{{
			Now: now, ReplyWindowID: w.ReplyWindowID, ExpectedIndex: w.NextSendIndex}})
	default:
		out.counted = q.ReserveWindowSend(ctx, []dbq.ReserveWindowSendParams{{
			Now: now, ReplyWindowID: w.ReplyWindowID, ExpectedIndex: w.NextSendIndex}})
	}
	index := r.index
	out.inserted = q.InsertSendAttempt(ctx, []dbq.InsertSendAttemptParams{{
		AttemptID: AttemptID(sess.SourceMessageKey, index), ClientMessageID: ClientMessageID(sess.SourceMessageKey, index),
		SourceMessageKey: sess.SourceMessageKey, AccountKey: w.AccountKey, PeerID: w.PeerID,
		ReplyWindowID: w.ReplyWindowID, SendIndex: index, WindowSendIndex: w.NextSendIndex, Source: "agent",
		ContentType: r.in.Content.Type, Payload: pc.payload, Metadata: pc.metadata, Fingerprint: pc.fingerprint,
		Status:    status,
		RequestID: r.requestID, Now: now,
	}})
	return out
}

// readWrites reads the results of the queued writes (sent with COMMIT) in the order they
// were queued and fills the outcome: the attempt, the window after it and, when the
// attempt started, what transmitting it needs.
func (r *reservation) readWrites(writes reservationWrites) error {
	w, acct := r.w, r.acct
	var err error
	switch {
	case writes.counted != nil:
		w, err = batchRow[dbq.ReplyWindow](writes.counted)
	case writes.started != nil:
		var row dbq.ReserveStartedWindowSendRow
		row, err = batchRow[dbq.ReserveStartedWindowSendRow](writes.started)
		w, acct = row.ReplyWindow, touchedAccount(row)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fail(vocab.CodeAttemptConflict, "reservation lost its race")
	}
	if err != nil {
		return err
	}
	a, err := batchRow[dbq.SendAttempt](writes.inserted)
	if err != nil {
		return err
	}
	if r.out.Attempt, err = attemptFrom(a); err != nil {
		return err
	}
	r.out.Window = windowFrom(w)
	if r.startNow {
		st, err := r.s.sendStart(r.out.Attempt, w, acct, r.reads)
		if err != nil {
			return err
		}
		r.out.Started = &st
	}
	return nil
}

// touchedAccount is the account a started reservation left: as read, with its last send.
func touchedAccount(row dbq.ReserveStartedWindowSendRow) dbq.Account {
	a := row.Account
	a.LastSendAt = row.TouchedLastSendAt
	return a
}

// pacedStart is when a bot's next send may start and until when it is blocked
// (rules.PacedStart, the one pacing rule).
func pacedStart(now time.Time, a dbq.Account, pacing *SendPacing) (notBefore time.Time, blocked *time.Time) {
	return rules.PacedStart(now, ruleAccount(a), rulePacing(pacing))
}

// sendContext is what reserving and starting a send reads besides its locks (one
// statement, queued with them).
type sendContext struct {
	row func() (dbq.SendContextRow, error)
}

type startRead struct {
	nextIndex     int32
	peerSending   bool
	windowSecret  *dbq.ReplyWindowSecret
	accountSecret *dbq.AccountSecret
}

// queueSendContext queues the send context of a window's send (SendContext).
func queueSendContext(ctx context.Context, q *dbq.Queries, windowID int64) sendContext {
	b := q.SendContext(ctx, []int64{windowID})
	return sendContext{row: func() (dbq.SendContextRow, error) { return batchRow[dbq.SendContextRow](b) }}
}

func (c sendContext) read() (startRead, error) {
	r, err := c.row()
	if err != nil {
		return startRead{}, err
	}
	out := startRead{nextIndex: r.NextIndex, peerSending: r.PeerSending}
	if r.WindowKeyGeneration != nil {
		out.windowSecret = &dbq.ReplyWindowSecret{KeyGeneration: *r.WindowKeyGeneration, Nonce: r.WindowNonce, Ciphertext: r.WindowCiphertext}
	}
	if r.AccountGeneration != nil && r.AccountKeyGeneration != nil {
		out.accountSecret = &dbq.AccountSecret{AccountGeneration: *r.AccountGeneration,
			KeyGeneration: *r.AccountKeyGeneration, Nonce: r.AccountNonce, Ciphertext: r.AccountCiphertext}
	}
	return out, nil
}

// sendStart opens what a started attempt's transmission needs.
func (s *Store) sendStart(att Attempt, w dbq.ReplyWindow, a dbq.Account, reads startRead) (SendStart, error) {
	if reads.windowSecret == nil {
		return SendStart{}, fail(vocab.CodeReplyWindowInactive, "reply window holds no context token")
	}
	if reads.accountSecret == nil {
		return SendStart{}, fail(vocab.CodeAccountNotFound, "account has no secret")
	}
	token, err := s.openContextToken(w, *reads.windowSecret)
	if err != nil {
		return SendStart{}, err
	}
	acct, err := s.openAccountSecret(a, *reads.accountSecret)
	if err != nil {
		return SendStart{}, err
	}
	return SendStart{Attempt: att, Window: windowFrom(w), ContextToken: token, Account: acct}, nil
}

// pendingAttempt locks a pending attempt of the session's window, with every session
// and window rule checked; reads (optional) are queued with the locks.
func pendingAttempt(ctx context.Context, q *dbq.Queries, now time.Time, ref SessionRef, attemptID string,
	withStart bool) (dbq.ReplyWindow, dbq.Account, dbq.SendAttempt, startRead, error) {
	var reads startRead
	row, err := findSession(ctx, q, ref)
	if err != nil {
		return dbq.ReplyWindow{}, dbq.Account{}, dbq.SendAttempt{}, reads, err
	}
	locks := queueSessionLocks(ctx, q, row)
	locked := q.LockSendAttempt(ctx, []string{attemptID})
	var context sendContext
	if withStart {
		context = queueSendContext(ctx, q, row.AgentSession.ReplyWindowID)
	}
	w, acct, lockErr := locks.check(now)
	a, err := batchRow[dbq.SendAttempt](locked)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return w, acct, a, reads, err
	}
	attemptErr := notFound(err, vocab.CodeAttemptConflict, "unknown attempt")
	if withStart {
		if reads, err = context.read(); err != nil {
			return w, acct, a, reads, err
		}
	}
	switch {
	case lockErr != nil:
		return w, acct, a, reads, lockErr
	case attemptErr != nil:
		return w, acct, a, reads, attemptErr
	case a.Status != vocab.AttemptPending || a.ReplyWindowID != w.ReplyWindowID || a.AccountKey != w.AccountKey || a.PeerID != w.PeerID:
		return w, acct, a, reads, fail(vocab.CodeAttemptConflict, "attempt is not a pending attempt of this session")
	}
	return w, acct, a, reads, nil
}

// StartSend starts a pending attempt when the bot may send now (pacing as in
// ReserveAndStart, checked under the account's lock). Otherwise it changes nothing and
// says why: PreparedSend.BlockedUntil (the breaker), NotBefore (pacing) or InFlight
// (another send to the peer has not completed).
func (s *Store) StartSend(ctx context.Context, now time.Time, ref SessionRef, attemptID string, pacing SendPacing) (traced PreparedSend, tracedErr error) {
	ctx, span := startSpan(ctx, "StartSend", "")
	defer func() { endSpan(span, tracedErr, traced.Window.AccountKey, traced.Window.SourceMessageKey) }()
	return s.start(ctx, now, ref, attemptID, &pacing)
}

func (s *Store) start(ctx context.Context, now time.Time, ref SessionRef, attemptID string, pacing *SendPacing) (PreparedSend, error) {
	if err := validNow(now); err != nil {
		return PreparedSend{}, err
	}
	var out PreparedSend
	err := s.inTx(ctx, "start reply", func(q *dbq.Queries) error {
		w, acct, a, reads, err := pendingAttempt(ctx, q, now, ref, attemptID, true)
		if err != nil {
			return err
		}
		if out.Attempt, err = attemptFrom(a); err != nil {
			return err
		}
		out.Window = windowFrom(w)
		turn, startNow, err := rules.DecideStart(now, ruleAccount(acct), rulePacing(pacing), reads.peerSending)
		if err != nil {
			return ruled(err)
		}
		out.NotBefore, out.BlockedUntil, out.InFlight = turn.NotBefore, turn.BlockedUntil, turn.InFlight
		if !startNow {
			return nil
		}
		set := q.SetAttemptStatus(ctx, []dbq.SetAttemptStatusParams{{
			AttemptID: a.AttemptID, FromStatus: vocab.AttemptPending, Status: vocab.AttemptSending, Now: now,
		}})
		counted := q.StartWindowSend(ctx, []dbq.StartWindowSendParams{{Now: now, ReplyWindowID: w.ReplyWindowID}})
		touched := q.TouchLastSend(ctx, []dbq.TouchLastSendParams{{Now: now, AccountKey: w.AccountKey}})
		row, err := batchRow[dbq.SendAttempt](set)
		if err != nil {
			return notFound(err, vocab.CodeAttemptConflict, "attempt start lost its race")
		}
		if w, err = batchRow[dbq.ReplyWindow](counted); err != nil {
			return notFound(err, vocab.CodeAttemptConflict, "window holds no reservation to start")
		}
		if acct, err = batchRow[dbq.Account](touched); err != nil {
			return err
		}
		if out.Attempt, err = attemptFrom(row); err != nil {
			return err
		}
		out.Window = windowFrom(w)
		st, err := s.sendStart(out.Attempt, w, acct, reads)
		out.Started = &st
		return err
	})
	return out, err
}

// GetAttempt returns a send attempt.
func (s *Store) GetAttempt(ctx context.Context, attemptID string) (Attempt, error) {
	var out Attempt
	err := s.read(ctx, "get attempt", func(q *dbq.Queries) error {
		row, err := q.GetSendAttempt(ctx, attemptID)
		if err != nil {
			return notFound(err, vocab.CodeAttemptConflict, "unknown attempt")
		}
		out, err = attemptFrom(row)
		return err
	})
	return out, err
}

// BlockSends opens the throttle circuit breaker of a bot: no send of it starts before
// until (the first one after is the probe).
func (s *Store) BlockSends(ctx context.Context, now time.Time, accountKey string, until time.Time) (Account, error) {
	if err := validNow(now); err != nil {
		return Account{}, err
	}
	if err := validAccountKey(accountKey); err != nil {
		return Account{}, err
	}
	var out Account
	err := s.inTx(ctx, "block sends", func(q *dbq.Queries) error {
		n, err := q.BlockSends(ctx, until, now, accountKey)
		if err != nil {
			return err
		}
		if n != 1 {
			return fail(vocab.CodeAccountNotFound, "unknown account")
		}
		row, err := q.GetAccount(ctx, accountKey)
		out = accountFrom(row)
		return err
	})
	return out, err
}

// FindReply finds the attempt a request id made through a session's message, whatever
// became of the session and its window since (an agent repeating a request after the
// window ended learns the first request's outcome). ok is false when the session is
// unknown or the request made no attempt.
func (s *Store) FindReply(ctx context.Context, ref SessionRef, requestID string) (out SendOutcome, ok bool, err error) {
	if requestID == "" || len(requestID) > 256 {
		return out, false, nil
	}
	err = s.read(ctx, "find reply", func(q *dbq.Queries) error {
		row, err := findSession(ctx, q, ref)
		if err != nil {
			if IsRuleViolation(err) {
				return nil
			}
			return err
		}
		a, err := batchRow[dbq.SendAttempt](q.AttemptByRequest(ctx, []dbq.AttemptByRequestParams{{
			SourceMessageKey: row.AgentSession.SourceMessageKey, RequestID: &requestID}}))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		w, err := batchRow[dbq.ReplyWindow](q.GetReplyWindow(ctx, []int64{a.ReplyWindowID}))
		if err != nil {
			return err
		}
		out.Window = windowFrom(w)
		out.Attempt, err = attemptFrom(a)
		ok = err == nil
		return err
	})
	return out, ok, err
}
