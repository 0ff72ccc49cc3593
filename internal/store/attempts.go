package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
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

// Reservation is the outcome of PrepareReply: a pending attempt, or — when the window had
// expired or its quota was used up — a failed attempt recording the refusal.
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

// ReserveReply reserves one send of the session's window: it allocates the next physical
// send index of the source message, derives the attempt id and client message id from
// it, and moves the window's next_send_index and reserved in the statement that checks
// the quota. Refusals are errors (reply_window_expired, reply_quota_exhausted, ...).
func (s *Store) ReserveReply(ctx context.Context, now time.Time, in ReplyInput) (Attempt, error) {
	r, err := s.reserve(ctx, now, in, false, nil)
	return r.Attempt, err
}

// PrepareReply is ReserveReply that records a refusal caused by the window (expired or
// quota exhausted) as a failed attempt instead of raising, so the agent's history shows it.
func (s *Store) PrepareReply(ctx context.Context, now time.Time, in ReplyInput) (Reservation, error) {
	r, err := s.reserve(ctx, now, in, true, nil)
	return r.Reservation, err
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

// ReserveAndStart is ReserveReply that also starts the attempt in the same transaction
// when nothing must wait between the two: the bot's breaker is closed, its pacing gap has
// passed and no other send to the peer is in flight. Otherwise the attempt stays pending
// and PreparedSend says until when; StartSend starts it later. A request id already used
// returns the attempt it made (neither reserved nor started again).
func (s *Store) ReserveAndStart(ctx context.Context, now time.Time, in ReplyInput, pacing SendPacing) (traced PreparedSend, tracedErr error) {
	ctx, span := startSpan(ctx, "ReserveAndStart", "")
	defer func() { endSpan(span, tracedErr, traced.Window.AccountKey, traced.Window.SourceMessageKey) }()
	return s.reserve(ctx, now, in, false, &pacing)
}

// reserve is ReserveReply, PrepareReply (record) and ReserveAndStart (pacing): one
// transaction whose locks and reads share a round trip, and whose writes travel with
// COMMIT.
func (s *Store) reserve(ctx context.Context, now time.Time, in ReplyInput, record bool, pacing *SendPacing) (PreparedSend, error) {
	r, err := s.newReservation(now, in, record, pacing)
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
	record    bool
	pacing    *SendPacing
	pc        preparedContent
	requestID *string

	sess    dbq.AgentSession
	sessRow dbq.SessionByTokenHashRow // sess with its message's status
	w       dbq.ReplyWindow
	acct    dbq.Account
	lockErr error // a rule the locks broke (recorded as a refusal or raised by decide)
	reads   startRead
	index   int32
	refused vocab.Code
	// startNow: the attempt starts in the reserving transaction (ReserveAndStart).
	startNow bool

	out PreparedSend
}

// newReservation checks a reply before anything is reserved: the clock, the content and
// its metadata, the request id.
func (s *Store) newReservation(now time.Time, in ReplyInput, record bool, pacing *SendPacing) (*reservation, error) {
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
	r := &reservation{s: s, now: now, in: in, record: record, pacing: pacing, pc: pc}
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
	if earlier.Fingerprint != r.pc.fingerprint {
		return true, fail(vocab.CodeAttemptConflict, "request id was used for other content")
	}
	r.out.Attempt, err = attemptFrom(earlier)
	if earlier.FailType == vocab.FailRefused {
		r.out.Refused = vocab.Code(earlier.ErrorCode)
	}
	r.out.Window = windowFrom(r.w)
	r.out.NotBefore, r.out.BlockedUntil = pacedStart(r.now, r.acct, r.pacing)
	return true, err
}

// decide reads the send context and decides the reservation under the locks: its send
// index, whether it is refused (expired window or exhausted quota, recorded as a failed
// attempt when record allows it, else raised) and, with pacing, whether it starts now.
func (r *reservation) decide(sendCtx sendContext) error {
	reads, err := sendCtx.read()
	if err != nil {
		return err
	}
	r.reads, r.index = reads, reads.nextIndex
	if r.lockErr != nil {
		if !r.record || CodeOf(r.lockErr) != vocab.CodeReplyWindowExpired {
			return r.lockErr
		}
		r.refused = vocab.CodeReplyWindowExpired
	}
	w := r.w
	if code := vocab.QuotaRefusal(sendsFor(w, r.acct), w.Reserved+w.Transmitted, r.s.limits.FinalSlots, r.in.Final); r.refused == "" && code != "" {
		if !r.record {
			if code == vocab.CodeReplySlotsReserved {
				return fail(code, "the window's sends left are kept for the final answer")
			}
			return fail(code, "reply quota of the window is exhausted")
		}
		r.refused = code
	}
	if r.index >= maxSendIndex {
		return fail(vocab.CodeReplyQuotaExhausted, "send indexes of the message are exhausted")
	}
	if r.pacing != nil {
		r.out.NotBefore, r.out.BlockedUntil = pacedStart(r.now, r.acct, r.pacing)
		r.out.InFlight = reads.peerSending
		r.startNow = r.out.BlockedUntil == nil && !r.now.Before(r.out.NotBefore) && !r.out.InFlight
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
	status, failType, message := vocab.AttemptPending, "", ""
	switch {
	case r.refused != "":
		status, failType = vocab.AttemptFailed, vocab.FailRefused
		message = "refused before transmission: " + string(r.refused)
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
		Status: status, ErrorCode: string(r.refused), ErrorMessage: message, FailType: failType,
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
	r.out.Refused = r.refused
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

// pacedStart is the one pacing rule: when a bot's next send may start (its last send
// plus the gap) and, while its throttle breaker is open, until when it is blocked.
func pacedStart(now time.Time, a dbq.Account, pacing *SendPacing) (notBefore time.Time, blocked *time.Time) {
	if pacing == nil {
		return time.Time{}, nil
	}
	if a.LastSendAt != nil {
		notBefore = a.LastSendAt.Add(pacing.Gap)
	}
	if until := a.SendsBlockedUntil; until != nil && now.Before(*until) {
		blocked = until
	}
	return notBefore, blocked
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

// ValidatePendingReply checks that a reserved attempt can still be started.
func (s *Store) ValidatePendingReply(ctx context.Context, now time.Time, ref SessionRef, attemptID string) (Attempt, error) {
	if err := validNow(now); err != nil {
		return Attempt{}, err
	}
	var out Attempt
	err := s.inTx(ctx, "validate pending reply", func(q *dbq.Queries) error {
		_, _, a, _, err := pendingAttempt(ctx, q, now, ref, attemptID, false)
		if err != nil {
			return err
		}
		out, err = attemptFrom(a)
		return err
	})
	return out, err
}

// StartReply moves a pending attempt to sending and its reservation to transmitted. At
// most one attempt per account and peer is sending at any time (send_in_progress).
func (s *Store) StartReply(ctx context.Context, now time.Time, ref SessionRef, attemptID string) (Attempt, error) {
	st, err := s.start(ctx, now, ref, attemptID, nil)
	if err != nil {
		return Attempt{}, err
	}
	return st.Started.Attempt, nil
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
		if pacing != nil {
			out.NotBefore, out.BlockedUntil = pacedStart(now, acct, pacing)
			out.InFlight = reads.peerSending
			if out.BlockedUntil != nil || now.Before(out.NotBefore) || out.InFlight {
				return nil
			}
		} else if reads.peerSending {
			return fail(vocab.CodeSendInProgress, "another send to this peer is in progress")
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

// Completion is the outcome of a transmission.
type Completion struct {
	AttemptID string
	// Status is sent, failed or unknown (the request may have reached iLink but no
	// answer came back: never re-sent automatically).
	Status            string
	ProviderMessageID string
	ErrorCode         string
	ErrorMessage      string
	// FailType is required for failed: rejected, throttled, stale_token or transport
	// (transport: the request surely never left, so the quota is given back).
	FailType string
}

// CompleteAttempt moves a sending attempt to sent, failed or unknown. Completing again
// with the same outcome returns the attempt unchanged (activity retries).
func (s *Store) CompleteAttempt(ctx context.Context, now time.Time, c Completion) (Attempt, error) {
	out, err := s.CompleteSend(ctx, now, c)
	return out.Attempt, err
}

// SendOutcome is a completed attempt with its window as the completion left it.
type SendOutcome struct {
	Attempt Attempt
	Window  Window
}

// CompleteSend is CompleteAttempt that also returns the attempt's window (its sends left),
// read in the same transaction.
func (s *Store) CompleteSend(ctx context.Context, now time.Time, c Completion) (traced SendOutcome, tracedErr error) {
	ctx, span := startSpan(ctx, "CompleteSend", "")
	defer func() { endSpan(span, tracedErr, traced.Attempt.AccountKey, traced.Attempt.SourceMessageKey) }()
	if err := validNow(now); err != nil {
		return SendOutcome{}, err
	}
	switch c.Status {
	case vocab.AttemptSent:
		if c.FailType != "" {
			return SendOutcome{}, fail(vocab.CodeInvalidInput, "a sent attempt has no fail type")
		}
	case vocab.AttemptUnknown:
		if c.FailType != "" || c.ProviderMessageID != "" {
			return SendOutcome{}, fail(vocab.CodeInvalidInput, "an unknown outcome has no fail type or provider id")
		}
	case vocab.AttemptFailed:
		switch c.FailType {
		case vocab.FailRejected, vocab.FailThrottled, vocab.FailStaleToken, vocab.FailTransport:
		default:
			return SendOutcome{}, fail(vocab.CodeInvalidInput, "fail type must be rejected, throttled, stale_token or transport")
		}
	default:
		return SendOutcome{}, fail(vocab.CodeInvalidInput, "status must be sent, failed or unknown")
	}
	if len(c.ProviderMessageID) > maxProviderIDBytes || len(c.ErrorCode) > 128 || len(c.ErrorMessage) > vocab.MaxErrorMessageBytes {
		return SendOutcome{}, fail(vocab.CodeInvalidInput, "completion fields are too long")
	}
	arg := dbq.CompleteSendingAttemptParams{AttemptID: c.AttemptID, Status: c.Status, ProviderMessageID: c.ProviderMessageID,
		ErrorCode: c.ErrorCode, ErrorMessage: c.ErrorMessage, FailType: c.FailType, Now: now}
	if c.FailType != vocab.FailTransport {
		// The common case: the attempt is sending and moves on, in one statement that is a
		// transaction of its own.
		row, err := batchRow[dbq.CompleteSendingAttemptRow](dbq.New(s.pool).CompleteSendingAttempt(ctx, []dbq.CompleteSendingAttemptParams{arg}))
		if err == nil {
			out := SendOutcome{Window: windowFrom(row.ReplyWindow)}
			out.Attempt, err = attemptFrom(row.SendAttempt)
			return out, err
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return SendOutcome{}, wrapDB("complete attempt", err)
		}
	}
	// A transport failure gives the send back to the quota in the same transaction; an
	// attempt that was not sending is a retry (the same outcome) or a conflict.
	var out SendOutcome
	err := s.inPipeline(ctx, "complete attempt", func(p *pipeline, q *dbq.Queries) error {
		// In one statement and one round trip when the attempt is sending and moves on,
		// its window coming back with it.
		set := q.CompleteSendingAttempt(ctx, []dbq.CompleteSendingAttemptParams{arg})
		if c.FailType != vocab.FailTransport {
			// Nothing is decided after the update: COMMIT travels with it (an attempt that
			// is not sending is not updated, and the retry check below only reads).
			p.commitQueued()
		}
		moved, err := batchRow[dbq.CompleteSendingAttemptRow](set)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		row, w := moved.SendAttempt, moved.ReplyWindow
		if errors.Is(err, pgx.ErrNoRows) {
			// Not sending: a retry of the same completion finds it done.
			window := q.WindowOfAttempt(ctx, []string{c.AttemptID})
			attempt := q.LockSendAttempt(ctx, []string{c.AttemptID})
			if w, err = batchRow[dbq.ReplyWindow](window); err != nil {
				return notFound(err, vocab.CodeAttemptConflict, "unknown attempt")
			}
			if row, err = batchRow[dbq.SendAttempt](attempt); err != nil {
				return notFound(err, vocab.CodeAttemptConflict, "unknown attempt")
			}
			if row.Status != c.Status || row.ProviderMessageID != c.ProviderMessageID || row.FailType != c.FailType {
				return fail(vocab.CodeAttemptConflict, "attempt is %s, not sending", row.Status)
			}
		} else if c.FailType == vocab.FailTransport {
			// The request surely never left: the send is given back to the quota.
			unstarted, err := batchRow[dbq.ReplyWindow](q.UnstartWindowSend(ctx, []dbq.UnstartWindowSendParams{{
				Now: now, ReplyWindowID: row.ReplyWindowID}}))
			switch {
			case err == nil:
				w = unstarted
			case !errors.Is(err, pgx.ErrNoRows):
				return err
			}
		}
		out.Window = windowFrom(w)
		out.Attempt, err = attemptFrom(row)
		return err
	})
	return out, err
}

// ReleaseAttempt gives the reservation of a pending attempt back and fails it with the
// reason. It reports false when the attempt is not pending (already started or ended).
func (s *Store) ReleaseAttempt(ctx context.Context, now time.Time, attemptID, reason string) (bool, error) {
	out, err := s.ReleaseSend(ctx, now, attemptID, reason)
	return out.Released, err
}

// Release is the outcome of ReleaseSend: the attempt and its window as they are after it.
type Release struct {
	SendOutcome
	// Released is false when the attempt was not pending (already started or ended).
	Released bool
}

// ReleaseSend is ReleaseAttempt that also returns the attempt and its window.
func (s *Store) ReleaseSend(ctx context.Context, now time.Time, attemptID, reason string) (traced Release, tracedErr error) {
	ctx, span := startSpan(ctx, "ReleaseSend", "")
	defer func() { endSpan(span, tracedErr, "", "") }()
	if err := validNow(now); err != nil {
		return Release{}, err
	}
	if reason == "" {
		reason = "cancelled_before_transmit"
	}
	if len(reason) > 128 {
		return Release{}, fail(vocab.CodeInvalidInput, "reason is too long")
	}
	var out Release
	err := s.inTx(ctx, "release attempt", func(q *dbq.Queries) error {
		// Lock order: window, then attempt (as retirement does).
		w, err := batchRow[dbq.ReplyWindow](q.WindowOfAttempt(ctx, []string{attemptID}))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		window := q.LockReplyWindow(ctx, []int64{w.ReplyWindowID})
		locked := q.LockSendAttempt(ctx, []string{attemptID})
		if w, err = batchRow[dbq.ReplyWindow](window); err != nil {
			return err
		}
		a, err := batchRow[dbq.SendAttempt](locked)
		if err != nil {
			return err
		}
		out.Window = windowFrom(w)
		if out.Attempt, err = attemptFrom(a); err != nil || a.Status != vocab.AttemptPending {
			return err
		}
		released := q.ReleaseWindowReservations(ctx, []dbq.ReleaseWindowReservationsParams{{
			Released: 1, Now: now, ReplyWindowID: a.ReplyWindowID}})
		set := q.SetAttemptStatus(ctx, []dbq.SetAttemptStatusParams{{
			AttemptID: attemptID, FromStatus: vocab.AttemptPending, Status: vocab.AttemptFailed, ErrorCode: reason,
			ErrorMessage: "reservation released before transmission", FailType: vocab.FailReleased, Now: now,
		}})
		if w, err = batchRow[dbq.ReplyWindow](released); err != nil {
			return notFound(err, vocab.CodeAttemptConflict, "window holds no reservation to release")
		}
		if a, err = batchRow[dbq.SendAttempt](set); err != nil {
			return err
		}
		out.Window = windowFrom(w)
		out.Attempt, err = attemptFrom(a)
		out.Released = true
		return err
	})
	return out, err
}

// PendingWindow is a window holding attempts reserved but not started.
type PendingWindow struct {
	ReplyWindowID int64
	Pending       int
	// Oldest is when the oldest of them was reserved.
	Oldest time.Time
}

// ListPendingWindows lists the windows that hold pending attempts.
func (s *Store) ListPendingWindows(ctx context.Context) ([]PendingWindow, error) {
	var out []PendingWindow
	err := s.read(ctx, "list pending windows", func(q *dbq.Queries) error {
		rows, err := q.PendingAttemptCounts(ctx)
		for _, r := range rows {
			out = append(out, PendingWindow{ReplyWindowID: r.ReplyWindowID, Pending: int(r.Pending), Oldest: r.Oldest})
		}
		return err
	})
	return out, err
}

// RecoverPendingAttempts releases every pending attempt (after a crash of the only
// process nothing is in flight before start): each is failed as abandoned and its
// window's reservation given back. Counters are checked, never assumed. It returns how
// many attempts it recovered.
func (s *Store) RecoverPendingAttempts(ctx context.Context, now time.Time) (int, error) {
	return s.recoverPending(ctx, now, nil)
}

// RecoverPendingAttemptsOf is RecoverPendingAttempts for the listed windows only: those
// whose sends nobody can resume any more (a fleet recovers only what no live process
// owns).
func (s *Store) RecoverPendingAttemptsOf(ctx context.Context, now time.Time, windowIDs []int64) (int, error) {
	only := make(map[int64]bool, len(windowIDs))
	for _, id := range windowIDs {
		only[id] = true
	}
	if len(only) == 0 {
		return 0, validNow(now)
	}
	return s.recoverPending(ctx, now, only)
}

// recoverPending recovers the pending attempts of the windows in only (all when nil).
func (s *Store) recoverPending(ctx context.Context, now time.Time, only map[int64]bool) (int, error) {
	if err := validNow(now); err != nil {
		return 0, err
	}
	var total int
	err := s.inTx(ctx, "recover pending attempts", func(q *dbq.Queries) error {
		groups, err := q.PendingAttemptCounts(ctx)
		if err != nil {
			return err
		}
		for _, g := range groups {
			if only != nil && !only[g.ReplyWindowID] {
				continue
			}
			if _, err := lockWindow(ctx, q, g.ReplyWindowID); err != nil {
				return err
			}
			failed, err := q.FailPendingAttemptsOfWindow(ctx, dbq.FailPendingAttemptsOfWindowParams{
				ReplyWindowID: g.ReplyWindowID, ErrorCode: "abandoned_before_transmit",
				ErrorMessage: "send stopped before network transmission", FailType: vocab.FailReleased, Now: now,
			})
			if err != nil {
				return err
			}
			if failed != int64(g.Pending) {
				return fail(vocab.CodeAttemptConflict, "pending attempts of window %d changed during recovery", g.ReplyWindowID)
			}
			if _, err := batchRow[dbq.ReplyWindow](q.ReleaseWindowReservations(ctx, []dbq.ReleaseWindowReservationsParams{{
				Released: g.Pending, Now: now, ReplyWindowID: g.ReplyWindowID}})); err != nil {
				return notFound(err, vocab.CodeAttemptConflict, fmt.Sprintf("window %d holds fewer reservations than pending attempts", g.ReplyWindowID))
			}
			total += int(g.Pending)
		}
		return nil
	})
	return total, err
}

// SystemSendInput is a notice the gateway itself sends inside a window.
type SystemSendInput struct {
	MessageKey string
	Content    vocab.Content
	Metadata   map[string]any
}

// ReserveStartedSystemAttempt reserves and starts a system send in one step; it counts
// against the same quota and obeys the same one-send-per-peer rule.
func (s *Store) ReserveStartedSystemAttempt(ctx context.Context, now time.Time, in SystemSendInput) (Attempt, error) {
	if err := validNow(now); err != nil {
		return Attempt{}, err
	}
	if err := validMessageKey(in.MessageKey); err != nil {
		return Attempt{}, err
	}
	pc, err := s.validateContent(in.Content, in.Metadata)
	if err != nil {
		return Attempt{}, err
	}
	var out Attempt
	err = s.inTx(ctx, "reserve system attempt", func(q *dbq.Queries) error {
		ref, err := q.GetReplyWindowBySource(ctx, in.MessageKey)
		if err != nil {
			return notFound(err, vocab.CodeReplyWindowNotFound, "message has no reply window")
		}
		// One round trip: the locks (account, then window) and the reads.
		account := q.LockAccount(ctx, []string{ref.AccountKey})
		window := q.LockReplyWindow(ctx, []int64{ref.ReplyWindowID})
		context := queueSendContext(ctx, q, ref.ReplyWindowID)
		a, err := batchRow[dbq.Account](account)
		if err != nil {
			return err
		}
		w, err := batchRow[dbq.ReplyWindow](window)
		if err != nil {
			return err
		}
		reads, err := context.read()
		if err != nil {
			return err
		}
		index := reads.nextIndex
		if err := checkWindowUsable(now, w, a); err != nil {
			return err
		}
		if w.Reserved+w.Transmitted >= w.MaxSends {
			return fail(vocab.CodeReplyQuotaExhausted, "reply quota of the window is exhausted")
		}
		if reads.peerSending {
			return fail(vocab.CodeSendInProgress, "another send to this peer is in progress")
		}
		if index >= maxSendIndex {
			return fail(vocab.CodeReplyQuotaExhausted, "send indexes of the message are exhausted")
		}
		started := q.ReserveStartedWindowSend(ctx, []dbq.ReserveStartedWindowSendParams{{
			Now: now, ReplyWindowID: w.ReplyWindowID, ExpectedIndex: w.NextSendIndex}})
		inserted := q.InsertSendAttempt(ctx, []dbq.InsertSendAttemptParams{{
			AttemptID: AttemptID(in.MessageKey, index), ClientMessageID: ClientMessageID(in.MessageKey, index),
			SourceMessageKey: in.MessageKey, AccountKey: w.AccountKey, PeerID: w.PeerID, ReplyWindowID: w.ReplyWindowID,
			SendIndex: index, WindowSendIndex: w.NextSendIndex, Source: "system", ContentType: in.Content.Type,
			Payload: pc.payload, Metadata: pc.metadata, Fingerprint: pc.fingerprint, Status: vocab.AttemptSending, Now: now,
		}})
		if _, err := batchRow[dbq.ReserveStartedWindowSendRow](started); err != nil {
			return notFound(err, vocab.CodeAttemptConflict, "system reservation lost its race")
		}
		row, err := batchRow[dbq.SendAttempt](inserted)
		if err != nil {
			return err
		}
		out, err = attemptFrom(row)
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

// ListAttempts returns the attempts of a source message in send order.
func (s *Store) ListAttempts(ctx context.Context, messageKey string) ([]Attempt, error) {
	if err := validMessageKey(messageKey); err != nil {
		return nil, err
	}
	var out []Attempt
	err := s.read(ctx, "list attempts", func(q *dbq.Queries) error {
		rows, err := q.ListAttemptsOfMessage(ctx, messageKey)
		if err != nil {
			return err
		}
		for _, r := range rows {
			a, err := attemptFrom(r)
			if err != nil {
				return err
			}
			out = append(out, a)
		}
		return nil
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
