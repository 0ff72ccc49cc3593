package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/internal/store/rules"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// OpenSessionInput opens an agent session for the deliverable message of a window.
type OpenSessionInput struct {
	ReplyWindowID int64
	// Token is the bearer capability handed to the agent; only its SHA-256 is stored.
	Token sealing.Secret
	// TTL bounds the session; it never outlives the window (0: the window's expiry).
	TTL time.Duration
}

// OpenedSession is an agent session with what its hand-off needs, read in the session's
// transaction: the message (now processing), its window, and the bot's route (Routed is
// false on the worker's default route; the webhook secret is opened).
type OpenedSession struct {
	Session Session
	Message Message
	Window  Window
	Route   Route
	Routed  bool
	// RouteErr is why the route could not be opened (sealed_unreadable), else nil.
	RouteErr error
}

// OpenAgentSession opens an agent session bound to one window and its source message, and
// moves the message to processing. A message already processing may be offered again
// (an unhandled message is re-offered while its window is open). One transaction in two
// round trips: the locks and reads together, then the writes with COMMIT.
func (s *Store) OpenAgentSession(ctx context.Context, now time.Time, in OpenSessionInput) (traced OpenedSession, tracedErr error) {
	ctx, span := startSpan(ctx, "OpenAgentSession", "")
	defer func() { endSpan(span, tracedErr, traced.Session.AccountKey, traced.Session.SourceMessageKey) }()
	if err := validNow(now); err != nil {
		return OpenedSession{}, err
	}
	if len(in.Token.Reveal()) < 16 || len(in.Token.Reveal()) > 512 {
		return OpenedSession{}, fail(vocab.CodeInvalidInput, "session token must be 16..512 bytes")
	}
	if in.TTL < 0 {
		return OpenedSession{}, fail(vocab.CodeInvalidInput, "session TTL is negative")
	}
	var out OpenedSession
	err := s.inPipeline(ctx, "open agent session", func(p *pipeline, q *dbq.Queries) error {
		ids := []int64{in.ReplyWindowID}
		lock, offer, route := q.LockReplyWindow(ctx, ids), q.WindowOffer(ctx, ids), q.WindowRoute(ctx, ids)
		w, err := batchRow[dbq.ReplyWindow](lock)
		if err != nil {
			return notFound(err, vocab.CodeReplyWindowNotFound, "unknown reply window")
		}
		o, err := batchRow[dbq.WindowOfferRow](offer)
		if err != nil {
			return err
		}
		routes, err := batchRows[dbq.AccountRoute](route)
		if err != nil {
			return err
		}
		if err := checkWindowUsable(now, w, o.Account); err != nil {
			return err
		}
		m := o.InboundMessage
		if m.Status != vocab.MessageReceived && m.Status != vocab.MessageProcessing {
			return fail(vocab.CodeAttemptConflict, "message is %s, not deliverable", m.Status)
		}
		if len(routes) > 0 {
			// A route whose secret cannot be opened does not stop the offer: the hand-off
			// reports it (RouteErr) as it would a route it could not read.
			out.Route, out.RouteErr = s.routeOf(routes[0])
			out.Routed = true
		}
		expires := w.ExpiresAt
		if in.TTL > 0 && now.Add(in.TTL).Before(expires) {
			expires = now.Add(in.TTL)
		}
		offered := m
		offered.Status = vocab.MessageProcessing
		if out.Message, err = messageFrom(offered); err != nil {
			return err
		}
		id := uuid.New()
		q.SetMessageStatus(ctx, []dbq.SetMessageStatusParams{{
			MessageKey: m.MessageKey, Status: vocab.MessageProcessing, FailureReason: "", Now: now,
			FromStatuses: []string{vocab.MessageReceived, vocab.MessageProcessing},
		}})
		q.InsertAgentSession(ctx, []dbq.InsertAgentSessionParams{{
			SessionID: id, TokenHash: tokenHash(in.Token.Reveal()), SourceMessageKey: m.MessageKey,
			ReplyWindowID: w.ReplyWindowID, AccountKey: w.AccountKey, PeerID: w.PeerID, CreatedAt: now, ExpiresAt: expires,
		}})
		// Every decision is made: the writes travel with COMMIT, and only their own errors
		// can fail it (pipeline.commit reads them).
		p.commitQueued()
		out.Session = Session{SessionID: id.String(), SourceMessageKey: m.MessageKey, ReplyWindowID: w.ReplyWindowID,
			AccountKey: w.AccountKey, PeerID: w.PeerID, CreatedAt: now, ExpiresAt: expires}
		out.Window = windowFrom(w)
		return nil
	})
	if err != nil {
		return OpenedSession{}, err
	}
	return out, nil
}

// checkWindowUsable is the one rule for whether a window accepts work
// (rules.CheckWindowUsable): it is open and not expired, and its account (a is the
// window's account) is active at the window's generation.
func checkWindowUsable(now time.Time, w dbq.ReplyWindow, a dbq.Account) error {
	return ruled(rules.CheckWindowUsable(now, ruleWindow(w), ruleAccount(a)))
}

// findSession resolves a session reference to its session and its message's status.
func findSession(ctx context.Context, q *dbq.Queries, ref SessionRef) (dbq.SessionByTokenHashRow, error) {
	return queueSession(ctx, q, ref)()
}

// queueSession queues the read of a session reference (the session and its message's
// status) as a batch query, so that it can travel with the statements queued after it;
// read returns the session, or invalid_agent_session when there is none.
func queueSession(ctx context.Context, q *dbq.Queries, ref SessionRef) (read func() (dbq.SessionByTokenHashRow, error)) {
	invalid := func(err error) (dbq.SessionByTokenHashRow, error) {
		return dbq.SessionByTokenHashRow{}, notFound(err, vocab.CodeInvalidAgentSession, "agent session is not valid")
	}
	switch {
	case !ref.Token.IsZero() && len(ref.Token.Reveal()) <= 512:
		b := q.SessionByTokenHash(ctx, [][]byte{tokenHash(ref.Token.Reveal())})
		return func() (dbq.SessionByTokenHashRow, error) {
			r, err := batchRow[dbq.SessionByTokenHashRow](b)
			if err != nil {
				return invalid(err)
			}
			return r, nil
		}
	case ref.Token.IsZero() && ref.ID != "":
		id, err := uuid.Parse(ref.ID)
		if err != nil {
			return func() (dbq.SessionByTokenHashRow, error) {
				return dbq.SessionByTokenHashRow{}, fail(vocab.CodeInvalidAgentSession, "agent session is not valid")
			}
		}
		b := q.SessionByID(ctx, []uuid.UUID{id})
		return func() (dbq.SessionByTokenHashRow, error) {
			r, err := batchRow[dbq.SessionByIDRow](b)
			if err != nil {
				return invalid(err)
			}
			return dbq.SessionByTokenHashRow(r), nil
		}
	}
	return func() (dbq.SessionByTokenHashRow, error) {
		return dbq.SessionByTokenHashRow{}, fail(vocab.CodeInvalidAgentSession, "agent session is required")
	}
}

// sessionLocks are the locks of a session's account and window, queued so that the
// caller's own reads travel in the same round trip. Lock order everywhere: account, then
// window, then attempts (CommitPage and retirement take them in that order; another order
// deadlocks against them).
type sessionLocks struct {
	row     dbq.SessionByTokenHashRow
	account func() (dbq.Account, error)
	window  func() (dbq.ReplyWindow, error)
}

func queueSessionLocks(ctx context.Context, q *dbq.Queries, row dbq.SessionByTokenHashRow) sessionLocks {
	account := q.LockAccount(ctx, []string{row.AgentSession.AccountKey})
	return sessionLocks{
		row:     row,
		account: func() (dbq.Account, error) { return batchRow[dbq.Account](account) },
		window:  queueWindowLock(ctx, q, row.AgentSession.ReplyWindowID),
	}
}

// queueWindowLocks queues the locks of a window's account and of the window, keyed by the
// window alone; the session they are checked against is set later.
func queueWindowLocks(ctx context.Context, q *dbq.Queries, windowID int64) sessionLocks {
	account := q.LockAccountOfWindow(ctx, []int64{windowID})
	return sessionLocks{
		account: func() (dbq.Account, error) { return batchRow[dbq.Account](account) },
		window:  queueWindowLock(ctx, q, windowID),
	}
}

// queueWindowLock queues the lock of a reply window.
func queueWindowLock(ctx context.Context, q *dbq.Queries, windowID int64) func() (dbq.ReplyWindow, error) {
	b := q.LockReplyWindow(ctx, []int64{windowID})
	return func() (dbq.ReplyWindow, error) { return batchRow[dbq.ReplyWindow](b) }
}

// check reads the locks and checks them (rules.CheckSession), in this order: the session
// is bound to the window; the window accepts work (so a late agent hears "expired" rather
// than "invalid session"); the session itself is live (not closed, not past its own
// expiry, its message processing). On a rule error the window and account are returned
// too.
func (l sessionLocks) check(now time.Time) (dbq.ReplyWindow, dbq.Account, error) {
	a, err := l.account()
	if err != nil {
		return dbq.ReplyWindow{}, a, err
	}
	w, err := l.window()
	if err != nil {
		return w, a, err
	}
	return w, a, ruled(rules.CheckSession(now, ruleSession(l.row), ruleWindow(w), ruleAccount(a)))
}

// sessionWindow resolves a session reference, locks its account and window and checks
// every session and window rule (sessionLocks.check).
func sessionWindow(ctx context.Context, q *dbq.Queries, now time.Time, ref SessionRef) (dbq.AgentSession, dbq.ReplyWindow, error) {
	row, err := findSession(ctx, q, ref)
	if err != nil {
		return dbq.AgentSession{}, dbq.ReplyWindow{}, err
	}
	w, _, err := queueSessionLocks(ctx, q, row).check(now)
	return row.AgentSession, w, err
}

// SessionRef names an agent session: by its bearer token (the agent's capability, checked
// at the edge) or by its id (inside the gateway, where no secret may travel, e.g. through
// Temporal history). Exactly one is set.
type SessionRef struct {
	Token sealing.Secret
	ID    string
}

// ByToken refers to a session by its bearer token.
func ByToken(token sealing.Secret) SessionRef { return SessionRef{Token: token} }

// BySessionID refers to a session by its id.
func BySessionID(id string) SessionRef { return SessionRef{ID: id} }

// ValidateSession resolves a bearer token to its live session, checking every session
// and window rule (invalid_agent_session, reply_window_expired, reply_window_inactive,
// account_not_active, generation_conflict). It writes nothing.
func (s *Store) ValidateSession(ctx context.Context, now time.Time, ref SessionRef) (Session, error) {
	if err := validNow(now); err != nil {
		return Session{}, err
	}
	var out Session
	err := s.inTx(ctx, "validate session", func(q *dbq.Queries) error {
		sess, _, err := sessionWindow(ctx, q, now, ref)
		if err != nil {
			return err
		}
		out = Session{SessionID: sess.SessionID.String(), SourceMessageKey: sess.SourceMessageKey,
			ReplyWindowID: sess.ReplyWindowID, AccountKey: sess.AccountKey, PeerID: sess.PeerID,
			CreatedAt: sess.CreatedAt, ExpiresAt: sess.ExpiresAt}
		return nil
	})
	return out, err
}

// FinishMessage records the agent's verdict on a message it was handed: handled, or
// failed with a reason. Its sessions close. Handled while some of its answer is held
// makes it held (handled once those replies are sent). Finishing twice with the same verdict is a
// no-op (retries), a different verdict is attempt_conflict.
func (s *Store) FinishMessage(ctx context.Context, now time.Time, messageKey, status, reason string) (traced Message, tracedErr error) {
	ctx, span := startSpan(ctx, "FinishMessage", "")
	defer func() { endSpan(span, tracedErr, traced.AccountKey, messageKey) }()
	if err := validNow(now); err != nil {
		return Message{}, err
	}
	if err := validMessageKey(messageKey); err != nil {
		return Message{}, err
	}
	if status != vocab.MessageHandled && status != vocab.MessageFailed {
		return Message{}, fail(vocab.CodeInvalidInput, "status must be handled or failed")
	}
	if len(reason) > vocab.MaxReasonBytes {
		return Message{}, fail(vocab.CodeInvalidInput, "reason is too long")
	}
	var out Message
	// One transaction in two round trips: the message's lock with whether some of its
	// answer is held, then the writes with COMMIT.
	err := s.inPipeline(ctx, "finish message", func(p *pipeline, q *dbq.Queries) error {
		lock := q.LockInboundMessage(ctx, []string{messageKey})
		waiting := q.MessageHasWaitingHeld(ctx, []string{messageKey})
		m, err := batchRow[dbq.InboundMessage](lock)
		if err != nil {
			return notFound(err, vocab.CodeInvalidInput, "unknown message")
		}
		held, err := batchRow[bool](waiting)
		if err != nil {
			return err
		}
		step, err := rules.DecideVerdict(m.Status, status)
		if err != nil {
			return ruled(err)
		}
		if step == rules.VerdictRecorded {
			// Handled means answered: while some of the answer is held, the message is held.
			moved := q.SetMessageStatus(ctx, []dbq.SetMessageStatusParams{{
				MessageKey: messageKey, Status: rules.VerdictStatus(status, held && status == vocab.MessageHandled),
				FailureReason: reason, Now: now, FromStatuses: []string{vocab.MessageReceived, vocab.MessageProcessing},
			}})
			q.CloseMessageSessions(ctx, []dbq.CloseMessageSessionsParams{{Now: now, MessageKey: messageKey}})
			p.commitQueued()
			// The message is locked and its status was checked: the update moves it.
			rows, err := batchRows[dbq.InboundMessage](moved)
			if err != nil {
				return err
			}
			if len(rows) == 1 {
				m = rows[0]
			}
		}
		out, err = messageFrom(m)
		return err
	})
	return out, err
}

// GetMessage returns an inbound message.
func (s *Store) GetMessage(ctx context.Context, messageKey string) (Message, error) {
	if err := validMessageKey(messageKey); err != nil {
		return Message{}, err
	}
	var out Message
	err := s.read(ctx, "get message", func(q *dbq.Queries) error {
		m, err := q.GetInboundMessage(ctx, messageKey)
		if err != nil {
			return notFound(err, vocab.CodeInvalidInput, "unknown message")
		}
		out, err = messageFrom(m)
		return err
	})
	return out, err
}
