package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/db/dbq"
)

// ReplyInput is an agent's reply: one item sent through the window of its session.
type ReplyInput struct {
	Session SessionRef
	Content Content
	// Metadata is free-form JSON-encodable data kept with the attempt (at most 8 KiB).
	Metadata map[string]any
	// RequestID, when set, makes the reservation idempotent: a retry with the same id finds
	// the attempt it made (the same content is required) instead of reserving again.
	RequestID string
}

// Reservation is the outcome of PrepareReply: a pending attempt, or — when the window had
// expired or its quota was used up — a failed attempt recording the refusal.
type Reservation struct {
	Attempt Attempt
	// Refused is reply_window_expired or reply_quota_exhausted when the reply was refused.
	Refused Code
}

type preparedContent struct {
	payload     []byte
	metadata    []byte
	fingerprint string
}

// validateContent checks one outbound item before anything is reserved.
func (s *Store) validateContent(c Content, metadata map[string]any) (preparedContent, error) {
	switch c.Type {
	case "text":
		if c.Text == "" || c.Media != nil {
			return preparedContent{}, fail(CodeInvalidInput, "a text item needs text and no media")
		}
		if len(c.Text) > s.limits.MaxTextBytes {
			return preparedContent{}, fail(CodeInvalidInput, "text is %d bytes, the limit is %d", len(c.Text), s.limits.MaxTextBytes)
		}
		if !utf8.ValidString(c.Text) {
			return preparedContent{}, fail(CodeInvalidInput, "text is not UTF-8")
		}
	case "image", "file", "video":
		if c.Media == nil || c.Media.EncryptQueryParam == "" || len(c.Media.EncryptQueryParam) > 4096 ||
			len(c.Media.FileName) > 1024 || c.Media.Size < 0 || c.Text != "" {
			return preparedContent{}, fail(CodeInvalidInput, "a %s item needs a valid media reference", c.Type)
		}
		if c.Type == "file" && c.Media.FileName == "" {
			return preparedContent{}, fail(CodeInvalidInput, "a file item needs a file name")
		}
	default:
		return preparedContent{}, fail(CodeInvalidInput, "content type must be text, image, file or video")
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return preparedContent{}, fail(CodeInvalidInput, "content does not encode")
	}
	if metadata == nil {
		metadata = map[string]any{}
	}
	meta, err := json.Marshal(metadata) // map keys are sorted: canonical
	if err != nil || len(meta) > maxMetadataBytes {
		return preparedContent{}, fail(CodeInvalidInput, "metadata must be JSON of at most %d bytes", maxMetadataBytes)
	}
	sum := sha256.Sum256(append(append([]byte(c.Type), 0), payload...))
	return preparedContent{payload: payload, metadata: meta, fingerprint: hex.EncodeToString(sum[:])}, nil
}

// ReserveReply reserves one send of the session's window: it allocates the next physical
// send index of the source message, derives the attempt id and client message id from
// it, and moves the window's next_send_index and reserved in the statement that checks
// the quota. Refusals are errors (reply_window_expired, reply_quota_exhausted, ...).
func (s *Store) ReserveReply(ctx context.Context, now time.Time, in ReplyInput) (Attempt, error) {
	r, err := s.reserve(ctx, now, in, false)
	return r.Attempt, err
}

// PrepareReply is ReserveReply that records a refusal caused by the window (expired or
// quota exhausted) as a failed attempt instead of raising, so the agent's history shows it.
func (s *Store) PrepareReply(ctx context.Context, now time.Time, in ReplyInput) (Reservation, error) {
	return s.reserve(ctx, now, in, true)
}

func (s *Store) reserve(ctx context.Context, now time.Time, in ReplyInput, record bool) (Reservation, error) {
	if err := validNow(now); err != nil {
		return Reservation{}, err
	}
	pc, err := s.validateContent(in.Content, in.Metadata)
	if err != nil {
		return Reservation{}, err
	}
	if len(in.RequestID) > 256 {
		return Reservation{}, fail(CodeInvalidInput, "request id is too long")
	}
	var requestID *string
	if in.RequestID != "" {
		requestID = &in.RequestID
	}
	var out Reservation
	err = s.inTx(ctx, "reserve reply", func(q *dbq.Queries) error {
		var refused Code
		sess, w, err := sessionWindow(ctx, q, now, in.Session)
		if requestID != nil && sess.SourceMessageKey != "" {
			prior, perr := q.AttemptByRequest(ctx, sess.SourceMessageKey, requestID)
			if perr == nil {
				if prior.Fingerprint != pc.fingerprint {
					return fail(CodeAttemptConflict, "request id was used for other content")
				}
				out.Attempt, err = attemptFrom(prior)
				if prior.FailType == FailRefused {
					out.Refused = Code(prior.ErrorCode)
				}
				return err
			}
			if !errors.Is(perr, pgx.ErrNoRows) {
				return perr
			}
		}
		if err != nil {
			if !record || CodeOf(err) != CodeReplyWindowExpired {
				return err
			}
			refused = CodeReplyWindowExpired
		}
		if refused == "" && w.Reserved+w.Transmitted >= w.MaxSends {
			if !record {
				return fail(CodeReplyQuotaExhausted, "reply quota of the window is exhausted")
			}
			refused = CodeReplyQuotaExhausted
		}
		index, err := q.NextSendIndex(ctx, sess.SourceMessageKey)
		if err != nil {
			return err
		}
		if index >= maxSendIndex {
			return fail(CodeReplyQuotaExhausted, "send indexes of the message are exhausted")
		}
		status, failType, message := AttemptPending, "", ""
		if refused == "" {
			n, err := q.ReserveWindowSend(ctx, now, w.ReplyWindowID, w.NextSendIndex)
			if err != nil {
				return err
			}
			if n != 1 {
				return fail(CodeAttemptConflict, "reservation lost its race")
			}
		} else {
			status, failType = AttemptFailed, FailRefused
			message = "refused before transmission: " + string(refused)
		}
		row, err := q.InsertSendAttempt(ctx, dbq.InsertSendAttemptParams{
			AttemptID: AttemptID(sess.SourceMessageKey, index), ClientMessageID: ClientMessageID(sess.SourceMessageKey, index),
			SourceMessageKey: sess.SourceMessageKey, AccountKey: w.AccountKey, PeerID: w.PeerID,
			ReplyWindowID: w.ReplyWindowID, SendIndex: index, WindowSendIndex: w.NextSendIndex, Source: "agent",
			ContentType: in.Content.Type, Payload: pc.payload, Metadata: pc.metadata, Fingerprint: pc.fingerprint,
			Status: status, ErrorCode: string(refused), ErrorMessage: message, FailType: failType,
			RequestID: requestID, Now: now,
		})
		if err != nil {
			return err
		}
		out.Attempt, err = attemptFrom(row)
		out.Refused = refused
		return err
	})
	return out, err
}

// pendingAttempt loads a pending attempt of the session's window, with every session and
// window rule checked.
func pendingAttempt(ctx context.Context, q *dbq.Queries, now time.Time, ref SessionRef, attemptID string) (dbq.ReplyWindow, dbq.SendAttempt, error) {
	_, w, err := sessionWindow(ctx, q, now, ref)
	if err != nil {
		return w, dbq.SendAttempt{}, err
	}
	a, err := q.LockSendAttempt(ctx, attemptID)
	if err != nil {
		return w, a, notFound(err, CodeAttemptConflict, "unknown attempt")
	}
	if a.Status != AttemptPending || a.ReplyWindowID != w.ReplyWindowID || a.AccountKey != w.AccountKey || a.PeerID != w.PeerID {
		return w, a, fail(CodeAttemptConflict, "attempt is not a pending attempt of this session")
	}
	return w, a, nil
}

// ValidatePendingReply checks that a reserved attempt can still be started.
func (s *Store) ValidatePendingReply(ctx context.Context, now time.Time, ref SessionRef, attemptID string) (Attempt, error) {
	if err := validNow(now); err != nil {
		return Attempt{}, err
	}
	var out Attempt
	err := s.inTx(ctx, "validate pending reply", func(q *dbq.Queries) error {
		_, a, err := pendingAttempt(ctx, q, now, ref, attemptID)
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
	if err := validNow(now); err != nil {
		return Attempt{}, err
	}
	var out Attempt
	err := s.inTx(ctx, "start reply", func(q *dbq.Queries) error {
		w, a, err := pendingAttempt(ctx, q, now, ref, attemptID)
		if err != nil {
			return err
		}
		if _, err := q.SendingAttemptOfPeer(ctx, w.AccountKey, w.PeerID); err == nil {
			return fail(CodeSendInProgress, "another send to this peer is in progress")
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		row, err := q.SetAttemptStatus(ctx, dbq.SetAttemptStatusParams{
			AttemptID: a.AttemptID, FromStatus: AttemptPending, Status: AttemptSending, Now: now,
		})
		if err != nil {
			return notFound(err, CodeAttemptConflict, "attempt start lost its race")
		}
		n, err := q.StartWindowSend(ctx, now, w.ReplyWindowID)
		if err != nil {
			return err
		}
		if n != 1 {
			return fail(CodeAttemptConflict, "window holds no reservation to start")
		}
		if err := q.TouchLastSend(ctx, now, w.AccountKey); err != nil {
			return err
		}
		out, err = attemptFrom(row)
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
	if err := validNow(now); err != nil {
		return Attempt{}, err
	}
	switch c.Status {
	case AttemptSent:
		if c.FailType != "" {
			return Attempt{}, fail(CodeInvalidInput, "a sent attempt has no fail type")
		}
	case AttemptUnknown:
		if c.FailType != "" || c.ProviderMessageID != "" {
			return Attempt{}, fail(CodeInvalidInput, "an unknown outcome has no fail type or provider id")
		}
	case AttemptFailed:
		switch c.FailType {
		case FailRejected, FailThrottled, FailStaleToken, FailTransport:
		default:
			return Attempt{}, fail(CodeInvalidInput, "fail type must be rejected, throttled, stale_token or transport")
		}
	default:
		return Attempt{}, fail(CodeInvalidInput, "status must be sent, failed or unknown")
	}
	if len(c.ProviderMessageID) > maxProviderIDBytes || len(c.ErrorCode) > 128 || len(c.ErrorMessage) > 2048 {
		return Attempt{}, fail(CodeInvalidInput, "completion fields are too long")
	}
	var out Attempt
	err := s.inTx(ctx, "complete attempt", func(q *dbq.Queries) error {
		a, err := q.LockSendAttempt(ctx, c.AttemptID)
		if err != nil {
			return notFound(err, CodeAttemptConflict, "unknown attempt")
		}
		if a.Status == c.Status && a.ProviderMessageID == c.ProviderMessageID && a.FailType == c.FailType {
			out, err = attemptFrom(a)
			return err
		}
		if a.Status != AttemptSending {
			return fail(CodeAttemptConflict, "attempt is %s, not sending", a.Status)
		}
		row, err := q.SetAttemptStatus(ctx, dbq.SetAttemptStatusParams{
			AttemptID: a.AttemptID, FromStatus: AttemptSending, Status: c.Status, ProviderMessageID: c.ProviderMessageID,
			ErrorCode: c.ErrorCode, ErrorMessage: c.ErrorMessage, FailType: c.FailType, Now: now,
		})
		if err != nil {
			return err
		}
		if c.FailType == FailTransport {
			if _, err := q.UnstartWindowSend(ctx, now, a.ReplyWindowID); err != nil {
				return err
			}
		}
		out, err = attemptFrom(row)
		return err
	})
	return out, err
}

// ReleaseAttempt gives the reservation of a pending attempt back and fails it with the
// reason. It reports false when the attempt is not pending (already started or ended).
func (s *Store) ReleaseAttempt(ctx context.Context, now time.Time, attemptID, reason string) (bool, error) {
	if err := validNow(now); err != nil {
		return false, err
	}
	if reason == "" {
		reason = "cancelled_before_transmit"
	}
	if len(reason) > 128 {
		return false, fail(CodeInvalidInput, "reason is too long")
	}
	var released bool
	err := s.inTx(ctx, "release attempt", func(q *dbq.Queries) error {
		ref, err := q.GetSendAttempt(ctx, attemptID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		// Lock order: window, then attempt (as retirement does).
		if _, err := q.LockReplyWindow(ctx, ref.ReplyWindowID); err != nil {
			return err
		}
		a, err := q.LockSendAttempt(ctx, attemptID)
		if err != nil {
			return err
		}
		if a.Status != AttemptPending {
			return nil
		}
		n, err := q.ReleaseWindowReservations(ctx, 1, now, a.ReplyWindowID)
		if err != nil {
			return err
		}
		if n != 1 {
			return fail(CodeAttemptConflict, "window holds no reservation to release")
		}
		if _, err := q.SetAttemptStatus(ctx, dbq.SetAttemptStatusParams{
			AttemptID: attemptID, FromStatus: AttemptPending, Status: AttemptFailed, ErrorCode: reason,
			ErrorMessage: "reservation released before transmission", FailType: FailReleased, Now: now,
		}); err != nil {
			return err
		}
		released = true
		return nil
	})
	return released, err
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
			if _, err := q.LockReplyWindow(ctx, g.ReplyWindowID); err != nil {
				return err
			}
			failed, err := q.FailPendingAttemptsOfWindow(ctx, dbq.FailPendingAttemptsOfWindowParams{
				ReplyWindowID: g.ReplyWindowID, ErrorCode: "abandoned_before_transmit",
				ErrorMessage: "send stopped before network transmission", FailType: FailReleased, Now: now,
			})
			if err != nil {
				return err
			}
			if failed != int64(g.Pending) {
				return fail(CodeAttemptConflict, "pending attempts of window %d changed during recovery", g.ReplyWindowID)
			}
			n, err := q.ReleaseWindowReservations(ctx, g.Pending, now, g.ReplyWindowID)
			if err != nil {
				return err
			}
			if n != 1 {
				return fail(CodeAttemptConflict, "window %d holds fewer reservations than pending attempts", g.ReplyWindowID)
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
	Content    Content
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
			return notFound(err, CodeReplyWindowNotFound, "message has no reply window")
		}
		if _, err := q.LockAccount(ctx, ref.AccountKey); err != nil { // lock order: account, window
			return err
		}
		w, err := q.LockReplyWindow(ctx, ref.ReplyWindowID)
		if err != nil {
			return err
		}
		if err := checkWindowUsable(ctx, q, now, w); err != nil {
			return err
		}
		if w.Reserved+w.Transmitted >= w.MaxSends {
			return fail(CodeReplyQuotaExhausted, "reply quota of the window is exhausted")
		}
		if _, err := q.SendingAttemptOfPeer(ctx, w.AccountKey, w.PeerID); err == nil {
			return fail(CodeSendInProgress, "another send to this peer is in progress")
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		index, err := q.NextSendIndex(ctx, in.MessageKey)
		if err != nil {
			return err
		}
		if index >= maxSendIndex {
			return fail(CodeReplyQuotaExhausted, "send indexes of the message are exhausted")
		}
		n, err := q.ReserveStartedWindowSend(ctx, now, w.ReplyWindowID, w.NextSendIndex)
		if err != nil {
			return err
		}
		if n != 1 {
			return fail(CodeAttemptConflict, "system reservation lost its race")
		}
		if err := q.TouchLastSend(ctx, now, w.AccountKey); err != nil {
			return err
		}
		row, err := q.InsertSendAttempt(ctx, dbq.InsertSendAttemptParams{
			AttemptID: AttemptID(in.MessageKey, index), ClientMessageID: ClientMessageID(in.MessageKey, index),
			SourceMessageKey: in.MessageKey, AccountKey: w.AccountKey, PeerID: w.PeerID, ReplyWindowID: w.ReplyWindowID,
			SendIndex: index, WindowSendIndex: w.NextSendIndex, Source: "system", ContentType: in.Content.Type,
			Payload: pc.payload, Metadata: pc.metadata, Fingerprint: pc.fingerprint, Status: AttemptSending, Now: now,
		})
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
			return notFound(err, CodeAttemptConflict, "unknown attempt")
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
			return fail(CodeAccountNotFound, "unknown account")
		}
		row, err := q.GetAccount(ctx, accountKey)
		out = accountFrom(row)
		return err
	})
	return out, err
}
