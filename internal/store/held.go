package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/internal/store/rules"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// HoldInput is a reply to hold: a reply of an agent session whose window cannot carry it
// (its quota is used up, the sends left are kept for the final answer, or it expired).
type HoldInput struct {
	// Session is the agent session the reply is made under. A session closed or past its
	// own expiry is accepted when its window expired: a late answer is what holding is for.
	Session SessionRef
	// RequestID is the reply's identity (required): holding it again finds the held reply.
	RequestID string
	Content   vocab.Content
	// Final marks the agent's final answer (it may use the window's kept slots).
	Final bool
	// ReplyWindowID, when set, is the window the session must belong to.
	ReplyWindowID int64
}

// HeldReply is a held reply as an operator or the agent sees it (never its content).
type HeldReply struct {
	HeldID           string
	Seq              int64
	AccountKey       string
	PeerID           string
	SourceMessageKey string
	ReplyWindowID    int64
	RequestID        string
	ContentType      string
	Final            bool
	SizeBytes        int32
	// Reason is why the window could not carry it: reply_quota_exhausted,
	// reply_slots_reserved or reply_window_expired.
	Reason     string
	Status     string
	AttemptID  string
	DropReason string
	DroppedBy  string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	UpdatedAt  time.Time
	// Position is the reply's place among the conversation's replies still to send
	// (1: the next), set by HoldReply.
	Position int32
}

// Drop reasons of a held reply (its audit record).
const (
	HeldDropExpired  = "age_limit"
	HeldDropOperator = "operator"
)

const maxHeldRequestID = 300

func newHeldID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", &Error{Code: vocab.CodeInternal, Msg: "random held reply id", Err: err}
	}
	return "hr_" + hex.EncodeToString(b[:]), nil
}

func heldFrom(r dbq.HeldReply) HeldReply {
	h := HeldReply{HeldID: r.HeldID, Seq: r.HeldSeq, AccountKey: r.AccountKey, PeerID: r.PeerID,
		SourceMessageKey: r.SourceMessageKey, ReplyWindowID: r.ReplyWindowID, RequestID: r.RequestID,
		ContentType: r.ContentType, Final: r.Final, SizeBytes: r.SizeBytes, Reason: r.Reason, Status: r.Status,
		DropReason: r.DropReason, DroppedBy: r.DroppedBy, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, UpdatedAt: r.UpdatedAt}
	if r.AttemptID != nil {
		h.AttemptID = *r.AttemptID
	}
	return h
}

// HoldReply keeps a reply its window cannot carry, sealed, in order behind the
// conversation's other held replies, to be sent first when the user's next message opens
// a new window. It refuses, writing nothing: a reply the window can carry now or one to a
// window retired by a newer message (reply_not_holdable, reply_window_inactive), a bot
// that was removed (account_not_found), a session that is not the window's or not live
// while the window is (invalid_agent_session), media (not held), a request id used for
// other content (attempt_conflict), and a reply past the conversation's limits
// (held_limit_reached). Holding the same request again returns the held reply.
//
// A message whose window expired before its agent answered becomes held: its answer is
// held (FinishMessage does the same for an agent's "handled" while replies are held).
func (s *Store) HoldReply(ctx context.Context, now time.Time, in HoldInput) (HeldReply, error) {
	if err := validNow(now); err != nil {
		return HeldReply{}, err
	}
	if in.RequestID == "" || len(in.RequestID) > maxHeldRequestID {
		return HeldReply{}, fail(vocab.CodeInvalidInput, "a held reply needs a request id of 1..%d bytes", maxHeldRequestID)
	}
	if in.Content.Type != "text" {
		return HeldReply{}, fail(vocab.CodeReplyNotHoldable, "only text replies are held; a %s reply is refused", in.Content.Type)
	}
	pc, err := s.validateContent(in.Content, nil)
	if err != nil {
		return HeldReply{}, err
	}
	maxReplies, maxBytes, maxAge := s.limits.HeldLimits()
	size := int64(len(in.Content.Text))
	var out HeldReply
	err = s.inTx(ctx, "hold reply", func(q *dbq.Queries) error {
		row, err := findSession(ctx, q, in.Session)
		if err != nil {
			return err
		}
		sess := row.AgentSession
		if in.ReplyWindowID != 0 && sess.ReplyWindowID != in.ReplyWindowID {
			return fail(vocab.CodeInvalidAgentSession, "the agent session belongs to another reply window")
		}
		a, err := batchRow[dbq.Account](q.LockAccount(ctx, []string{sess.AccountKey}))
		if err != nil {
			return err
		}
		w, err := lockWindow(ctx, q, sess.ReplyWindowID)
		if err != nil {
			return err
		}
		reason, err := rules.CheckHold(now, ruleSession(row), ruleWindow(w), ruleAccount(a), s.limits.FinalSlots, in.Final)
		if err != nil {
			return ruled(err)
		}
		expired := reason == vocab.CodeReplyWindowExpired
		status := row.MessageStatus
		prior, err := q.HeldReplyByRequest(ctx, sess.SourceMessageKey, in.RequestID)
		switch {
		case err == nil:
			if prior.Fingerprint != pc.fingerprint {
				return fail(vocab.CodeAttemptConflict, "request id was used for another reply")
			}
			out = heldFrom(prior)
			out.Position, err = heldPosition(ctx, q, prior)
			return err
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		load, err := q.ConversationHeldLoad(ctx, sess.AccountKey, sess.PeerID)
		if err != nil {
			return err
		}
		position, err := rules.AdmitHeld(rules.HeldLoad{Replies: load.Replies, Bytes: load.Bytes}, size, maxReplies, maxBytes)
		if err != nil {
			return ruled(err)
		}
		id, err := newHeldID()
		if err != nil {
			return err
		}
		sealed, err := s.keys.Seal(sealing.PurposeHeldReply, id, sealing.NewSecret(string(pc.payload)))
		if err != nil {
			return &Error{Code: vocab.CodeInternal, Msg: "seal held reply", Err: err}
		}
		r, err := q.InsertHeldReply(ctx, dbq.InsertHeldReplyParams{
			HeldID: id, AccountKey: sess.AccountKey, PeerID: sess.PeerID, SourceMessageKey: sess.SourceMessageKey,
			ReplyWindowID: w.ReplyWindowID, RequestID: in.RequestID, ContentType: in.Content.Type, Final: in.Final,
			Fingerprint: pc.fingerprint, SizeBytes: int32(size), Reason: string(reason),
			KeyGeneration: &sealed.KeyGeneration, Nonce: sealed.Nonce, Ciphertext: sealed.Ciphertext,
			Now: now, ExpiresAt: now.Add(maxAge),
		})
		if err != nil {
			return err
		}
		if rules.SettlesHeldMessage(expired, status) {
			// Settled by the window's expiry: its answer is held now.
			if _, err := batchRows[dbq.InboundMessage](q.SetMessageStatus(ctx, []dbq.SetMessageStatusParams{{MessageKey: sess.SourceMessageKey,
				Status: vocab.MessageHeld, Now: now, FromStatuses: []string{vocab.MessageFailed, vocab.MessageHandled}}})); err != nil {
				return err
			}
		}
		out = heldFrom(r)
		out.Position = position
		return nil
	})
	return out, err
}

// heldPosition is a held reply's place among its conversation's replies still to send
// (rules.HeldPosition; 0 once it is settled): they go out in the order they were held.
func heldPosition(ctx context.Context, q *dbq.Queries, h dbq.HeldReply) (int32, error) {
	if !rules.HeldToSend(h.Status) {
		return 0, nil
	}
	waiting, err := q.WaitingHeldReplies(ctx, h.AccountKey, h.PeerID)
	if err != nil {
		return 0, err
	}
	ids := make([]string, len(waiting))
	for i, r := range waiting {
		ids[i] = r.HeldID
	}
	return rules.HeldPosition(h.HeldID, h.Status, ids), nil
}

// FindHeldReply returns the reply a session's request held, if any (ok false: none).
func (s *Store) FindHeldReply(ctx context.Context, ref SessionRef, requestID string) (out HeldReply, ok bool, err error) {
	err = s.read(ctx, "find held reply", func(q *dbq.Queries) error {
		row, err := findSession(ctx, q, ref)
		if err != nil {
			return err
		}
		h, err := q.HeldReplyByRequest(ctx, row.AgentSession.SourceMessageKey, requestID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		out, ok = heldFrom(h), true
		out.Position, err = heldPosition(ctx, q, h)
		return err
	})
	return out, ok, err
}

// WaitingHeld lists the ids of a conversation's replies still to send, in order.
func (s *Store) WaitingHeld(ctx context.Context, accountKey, peerID string) ([]string, error) {
	var ids []string
	err := s.read(ctx, "waiting held replies", func(q *dbq.Queries) error {
		rows, err := q.WaitingHeldReplies(ctx, accountKey, peerID)
		for _, r := range rows {
			ids = append(ids, r.HeldID)
		}
		return err
	})
	return ids, err
}

// HeldDelivery is the outcome of StartHeldDelivery: the send prepared for the held reply
// (as ReserveAndStart's, started or waiting for its turn), or the held reply itself when
// it needs no send (settled already, or dropped past its age limit).
type HeldDelivery struct {
	PreparedSend
	Held HeldReply
	// Settled: the held reply is sent, unknown, failed or dropped; nothing was prepared.
	Settled bool
}

// StartHeldDelivery prepares the send of a held reply through an open window of its
// conversation: under the locks of the account, the window and the held reply it checks
// the window as any send (expired, retired, account not active), keeps the window's
// final slots for the window's own answer (a held reply is never final there:
// reply_slots_reserved or reply_quota_exhausted when none is left), drops the held reply
// unsent when it passed its age limit (held_reply_expired), and, when the bot's pacing
// and the peer's send in flight allow, reserves and starts one attempt (source held,
// request id held/<id>) and marks the held reply sending in the same transaction.
// Otherwise nothing is written and the result says until when to wait. A held reply
// already carried by an attempt of this window returns that attempt.
func (s *Store) StartHeldDelivery(ctx context.Context, now time.Time, windowID int64, heldID string, pacing SendPacing) (HeldDelivery, error) {
	if err := validNow(now); err != nil {
		return HeldDelivery{}, err
	}
	var out HeldDelivery
	err := s.inTx(ctx, "start held delivery", func(q *dbq.Queries) error {
		a, w, err := lockAccountAndWindow(ctx, q, windowID)
		if err != nil {
			return err
		}
		h, err := q.LockHeldReply(ctx, heldID)
		if err != nil {
			return notFound(err, vocab.CodeHeldReplyNotFound, "unknown held reply")
		}
		if h.AccountKey != w.AccountKey || h.PeerID != w.PeerID {
			return fail(vocab.CodeHeldReplyNotFound, "the held reply belongs to another conversation")
		}
		out.Held = heldFrom(h)
		out.Window = windowFrom(w)
		switch rules.DecideHeldDelivery(now, h.Status, h.ExpiresAt) {
		case rules.HeldCarried:
			att, err := q.GetSendAttempt(ctx, *h.AttemptID)
			if err != nil {
				return err
			}
			if att.ReplyWindowID != windowID {
				return fail(vocab.CodeSendInProgress, "another window's send carries the held reply")
			}
			out.Attempt, err = attemptFrom(att)
			return err
		case rules.HeldSettled:
			out.Settled = true
			return nil
		case rules.HeldExpired:
			d, err := q.DropHeldReply(ctx, dbq.DropHeldReplyParams{HeldID: heldID, DropReason: HeldDropExpired,
				DroppedBy: "age limit", Now: now})
			if err != nil {
				return err
			}
			out.Held, out.Settled = heldFrom(d), true
			return nil
		}
		if err := checkWindowUsable(now, w, a); err != nil {
			return err
		}
		if err := rules.CheckHeldQuota(ruleWindow(w), ruleAccount(a), s.limits.FinalSlots); err != nil {
			return ruled(err)
		}
		g := gatewaySend{source: vocab.HeldWaiting /* source held */, contentType: h.ContentType, fingerprint: h.Fingerprint,
			requestID: func(index int32) string {
				// Each try has its own request id: a try that surely never left gives the
				// reply back, and the same window may carry it again.
				return fmt.Sprintf("held/%s/%d", heldID, index)
			},
			content: func() ([]byte, []byte, error) {
				payload, err := s.keys.Open(sealing.PurposeHeldReply, heldID,
					sealing.Sealed{KeyGeneration: derefInt32(h.KeyGeneration), Nonce: h.Nonce, Ciphertext: h.Ciphertext})
				if err != nil {
					return nil, nil, &Error{Code: vocab.CodeSealedUnreadable, Msg: "open held reply", Err: err}
				}
				meta, err := json.Marshal(map[string]any{"held_id": heldID, "held_for": h.SourceMessageKey})
				return []byte(payload.Reveal()), meta, err
			}}
		started, err := s.startGatewaySend(ctx, q, now, w, a, g, pacing, &out.PreparedSend)
		if err != nil || !started {
			return err
		}
		marked, err := q.MarkHeldSending(ctx, &out.Attempt.AttemptID, now, heldID)
		if err != nil {
			return notFound(err, vocab.CodeAttemptConflict, "held reply changed under its lock")
		}
		out.Held = heldFrom(marked)
		return nil
	})
	return out, err
}

// lockAccountAndWindow locks a window's account, then the window (the store's lock order).
func lockAccountAndWindow(ctx context.Context, q *dbq.Queries, windowID int64) (dbq.Account, dbq.ReplyWindow, error) {
	a, err := batchRow[dbq.Account](q.LockAccountOfWindow(ctx, []int64{windowID}))
	if err != nil {
		return a, dbq.ReplyWindow{}, notFound(err, vocab.CodeReplyWindowNotFound, "unknown reply window")
	}
	w, err := lockWindow(ctx, q, windowID)
	if err != nil {
		return a, w, notFound(err, vocab.CodeReplyWindowNotFound, "unknown reply window")
	}
	return a, w, nil
}

// gatewaySend is a send the gateway itself makes in a window (a held reply, a reminder):
// its source, its content (read only when it starts) and its request id for a send index.
type gatewaySend struct {
	source, contentType, fingerprint string
	requestID                        func(index int32) string
	content                          func() (payload, metadata []byte, err error)
}

// startGatewaySend reserves and starts a gateway send in window w of account a, both
// locked by the caller, who checked the window and its quota: when the bot's pacing and
// the peer's send in flight allow, the window's counters move and the attempt is recorded
// sending (started true, out filled as ReserveAndStart fills it); otherwise nothing is
// written and out says until when to wait.
func (s *Store) startGatewaySend(ctx context.Context, q *dbq.Queries, now time.Time, w dbq.ReplyWindow, a dbq.Account,
	g gatewaySend, pacing SendPacing, out *PreparedSend) (started bool, err error) {
	reads, err := queueSendContext(ctx, q, w.ReplyWindowID).read()
	if err != nil {
		return false, err
	}
	if err := rules.CheckSendIndex(reads.nextIndex); err != nil {
		return false, ruled(err)
	}
	turn := rules.StartTurn(now, ruleAccount(a), rulePacing(&pacing), reads.peerSending)
	out.NotBefore, out.BlockedUntil, out.InFlight = turn.NotBefore, turn.BlockedUntil, turn.InFlight
	if !turn.Ready(now) {
		return false, nil // its turn has not come: nothing written
	}
	payload, meta, err := g.content()
	if err != nil {
		return false, err
	}
	index, msg := reads.nextIndex, w.SourceMessageKey
	requestID := g.requestID(index)
	reserved := q.ReserveStartedWindowSend(ctx, []dbq.ReserveStartedWindowSendParams{{
		Now: now, ReplyWindowID: w.ReplyWindowID, ExpectedIndex: w.NextSendIndex}})
	inserted := q.InsertSendAttempt(ctx, []dbq.InsertSendAttemptParams{{
		AttemptID: AttemptID(msg, index), ClientMessageID: ClientMessageID(msg, index),
		SourceMessageKey: msg, AccountKey: w.AccountKey, PeerID: w.PeerID, ReplyWindowID: w.ReplyWindowID,
		SendIndex: index, WindowSendIndex: w.NextSendIndex, Source: g.source, ContentType: g.contentType,
		Payload: payload, Metadata: meta, Fingerprint: g.fingerprint, Status: vocab.AttemptSending,
		RequestID: &requestID, Now: now,
	}})
	srow, err := batchRow[dbq.ReserveStartedWindowSendRow](reserved)
	if err != nil {
		return false, notFound(err, vocab.CodeAttemptConflict, "the gateway's send lost its race")
	}
	arow, err := batchRow[dbq.SendAttempt](inserted)
	if err != nil {
		return false, err
	}
	if out.Attempt, err = attemptFrom(arow); err != nil {
		return false, err
	}
	out.Window = windowFrom(srow.ReplyWindow)
	st, err := s.sendStart(out.Attempt, srow.ReplyWindow, touchedAccount(srow), reads)
	if err != nil {
		return false, err
	}
	out.Started = &st
	return true, nil
}

// DropHeldReply drops an account's held reply that waits to be sent, for an operator
// (by names them in its audit record): it is never sent. Another account's or an unknown
// held reply is held_reply_not_found; one already being sent or settled is
// attempt_conflict. Nothing is written on a refusal.
func (s *Store) DropHeldReply(ctx context.Context, now time.Time, accountKey, heldID, by string) (HeldReply, error) {
	if err := validNow(now); err != nil {
		return HeldReply{}, err
	}
	if by == "" || len(by) > 200 {
		return HeldReply{}, fail(vocab.CodeInvalidInput, "the operator's name must be 1..200 bytes")
	}
	var out HeldReply
	err := s.inTx(ctx, "drop held reply", func(q *dbq.Queries) error {
		h, err := q.LockHeldReply(ctx, heldID)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err != nil || h.AccountKey != accountKey {
			return fail(vocab.CodeHeldReplyNotFound, "no held reply %s of account %s", heldID, accountKey)
		}
		if h.Status != vocab.HeldWaiting {
			return fail(vocab.CodeAttemptConflict, "the held reply is %s, not held", h.Status)
		}
		d, err := q.DropHeldReply(ctx, dbq.DropHeldReplyParams{HeldID: heldID, DropReason: HeldDropOperator, DroppedBy: by, Now: now})
		if err != nil {
			return err
		}
		out = heldFrom(d)
		return nil
	})
	return out, err
}

// HeldFilter selects held replies: an account's (every account's when empty), of some
// statuses (every status when empty), newest first, at most Limit (0: 100; at most 1000).
type HeldFilter struct {
	AccountKey string
	Statuses   []string
	Limit      int32
}

// ListHeldReplies lists held replies (never their content).
func (s *Store) ListHeldReplies(ctx context.Context, f HeldFilter) ([]HeldReply, error) {
	for _, st := range f.Statuses {
		if !validHeldStatus(st) {
			return nil, fail(vocab.CodeInvalidInput, "unknown held reply status %q", st)
		}
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	if f.Limit > 1000 {
		f.Limit = 1000
	}
	var acct *string
	if f.AccountKey != "" {
		acct = &f.AccountKey
	}
	statuses := f.Statuses
	if statuses == nil {
		statuses = []string{}
	}
	var out []HeldReply
	err := s.read(ctx, "list held replies", func(q *dbq.Queries) error {
		rows, err := q.ListHeldReplies(ctx, acct, statuses, f.Limit)
		for _, r := range rows {
			out = append(out, heldFrom(dbq.HeldReply{HeldID: r.HeldID, HeldSeq: r.HeldSeq, AccountKey: r.AccountKey,
				PeerID: r.PeerID, SourceMessageKey: r.SourceMessageKey, ReplyWindowID: r.ReplyWindowID, RequestID: r.RequestID,
				ContentType: r.ContentType, Final: r.Final, SizeBytes: r.SizeBytes, Reason: r.Reason, Status: r.Status,
				AttemptID: r.AttemptID, DropReason: r.DropReason, DroppedBy: r.DroppedBy, CreatedAt: r.CreatedAt,
				ExpiresAt: r.ExpiresAt, UpdatedAt: r.UpdatedAt}))
		}
		return err
	})
	return out, err
}

func validHeldStatus(st string) bool {
	for _, v := range vocab.HeldStatuses {
		if st == v {
			return true
		}
	}
	return false
}

// HeldCount is what one conversation holds still to send.
type HeldCount struct {
	AccountKey string
	PeerID     string
	Replies    int32
	Bytes      int64
}

// WaitingHeldCounts lists, per conversation, the held replies still to send.
func (s *Store) WaitingHeldCounts(ctx context.Context) ([]HeldCount, error) {
	var out []HeldCount
	err := s.read(ctx, "held reply counts", func(q *dbq.Queries) error {
		rows, err := q.WaitingHeldCounts(ctx)
		for _, r := range rows {
			out = append(out, HeldCount{AccountKey: r.AccountKey, PeerID: r.PeerID, Replies: r.Replies, Bytes: r.Bytes})
		}
		return err
	})
	return out, err
}

func derefInt32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
