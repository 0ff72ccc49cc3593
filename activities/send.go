package activities

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/ilinkflow/ilinkflow/ilink"
	"github.com/ilinkflow/ilinkflow/metrics"
	"github.com/ilinkflow/ilinkflow/store"
)

// iLink outcomes reported in SendOutput.ErrorCode (besides the store codes).
const (
	SendThrottled      = "throttled"
	SendRejected       = "rejected"
	SendStaleToken     = "stale_token"
	SendNotSent        = "not_sent"
	SendOutcomeUnknown = "outcome_unknown"
)

// Bounds of the completion fields (the store refuses longer ones).
const (
	maxErrorMessage = 2048
)

// Send runs one reply through a window: reserve (idempotent by request id), pace and
// gate per bot, start, transmit once, complete. A transmit whose outcome is unknown
// completes the attempt as unknown and is never re-sent; a retried activity that finds
// its attempt already sending completes it as unknown.
//
// An empty RequestID defaults to the scheduled activity's identity (run id and activity
// id, stable across retries of that activity).
//
// Sends of one bot are serialized across the fleet by a PostgreSQL advisory lock (when
// the activities have a pool) and paced by Config.SendGap from the bot's last send. A
// store refusal (quota, expired or retired window, invalid session, invalid content) is
// an answer (SendOutput.ErrorCode, nil error); only infrastructure failures are errors.
func (a *Activities) Send(ctx context.Context, in SendInput) (SendOutput, error) {
	cfg := a.cfg()
	ref := store.BySessionID(in.SessionID)
	requestID := in.RequestID
	if requestID == "" && activity.IsActivity(ctx) {
		// Without a request id, this scheduled activity is the identity: its id is
		// stable across retries.
		info := activity.GetInfo(ctx)
		requestID = "activity:" + info.WorkflowExecution.RunID + "/" + info.ActivityID
	}
	if activity.IsActivity(ctx) {
		// Heartbeats let Temporal retry this send soon after a worker crash; the retry
		// completes an attempt it finds sending as unknown.
		stop := heartbeat(ctx, cfg.HeartbeatEvery, func() any { return nil })
		defer stop()
	}
	if in.ReplyWindowID != 0 {
		sess, err := a.Store.ValidateSession(ctx, now(), ref)
		if err == nil && sess.ReplyWindowID != in.ReplyWindowID {
			err = &store.Error{Code: store.CodeInvalidAgentSession, Msg: "the agent session belongs to another reply window"}
		}
		if err != nil {
			return a.refusal("validate session", err)
		}
	}
	att, err := a.Store.ReserveReply(ctx, now(), store.ReplyInput{Session: ref, Content: in.Content, RequestID: requestID})
	if err != nil {
		return a.refusal("reserve reply", err)
	}
	log := a.log().With("account", att.AccountKey, "attempt", att.AttemptID, "reply_window_id", att.ReplyWindowID)
	switch att.Status {
	case store.AttemptPending:
	case store.AttemptSending:
		// Started by an earlier execution that never recorded the outcome: the request
		// may have reached iLink, so it is never sent again.
		log.Warn("attempt found sending after a retry; outcome unknown")
		return a.finish(ctx, store.Completion{AttemptID: att.AttemptID, Status: store.AttemptUnknown,
			ErrorCode: SendOutcomeUnknown, ErrorMessage: "send interrupted before its outcome was recorded"})
	default:
		return a.output(ctx, att), nil
	}

	if a.Pool != nil {
		lock, err := waitLease(ctx, a.Pool, lockKey(sendLockNamespace, att.AccountKey))
		if err != nil {
			return SendOutput{}, err // the attempt stays pending; a retry resumes it
		}
		defer lock.release(ctx)
	}

	acct, err := a.Store.GetAccountWithSecret(ctx, att.AccountKey)
	if err != nil {
		return a.releaseOr(ctx, att, "read account", err)
	}
	if until := acct.SendsBlockedUntil; until != nil && now().Before(*until) {
		return a.release(ctx, att, SendThrottled)
	}
	if last := acct.LastSendAt; last != nil {
		if err := wait(ctx, time.Until(last.Add(cfg.SendGap))); err != nil {
			return SendOutput{}, err
		}
	}
	cl, err := a.botClient(acct)
	if err != nil {
		log.Error("no iLink client for the account", "error", err)
		return a.release(ctx, att, SendNotSent)
	}
	ws, err := a.Store.GetWindowSecret(ctx, att.ReplyWindowID)
	if err != nil {
		return a.releaseOr(ctx, att, "read window", err)
	}
	if _, err := a.Store.StartReply(ctx, now(), ref, att.AttemptID); err != nil {
		return a.releaseOr(ctx, att, "start reply", err)
	}

	// From here on the request may leave: the outcome is recorded, never retried.
	res, sendErr := cl.SendItem(ctx, ilink.SendOptions{
		ToUserID: att.PeerID, ContextToken: ilink.Secret(ws.ContextToken.Reveal()), ClientID: att.ClientMessageID,
	}, itemOf(att.Content))
	at := now()
	c, throttled := a.classify(ctx, att, ws.Window, sendErr, res, at)
	if sendErr != nil {
		log.Warn("send failed", "status", c.Status, "fail_type", c.FailType, "error", sendErr)
	}
	out, err := a.finish(ctx, c)
	if throttled {
		until := at.Add(cfg.ThrottlePenalty)
		bctx, cancel := detached(ctx, 10*time.Second)
		blocked, berr := a.Store.BlockSends(bctx, at, att.AccountKey, until)
		cancel()
		switch {
		case berr != nil:
			log.Error("could not record the throttle penalty", "error", berr)
		case blocked.SendsBlockedUntil != nil:
			out.RetryAfter = *blocked.SendsBlockedUntil
		}
	}
	return out, err
}

// classify turns the outcome of one transmission into a completion. A ret -2 is judged
// by our own bookkeeping (store.ClassifyRejection); throttled reports that the bot's
// sends must stop for the penalty.
func (a *Activities) classify(ctx context.Context, att store.Attempt, before store.Window, err error,
	res *ilink.SendResult, at time.Time) (c store.Completion, throttled bool) {
	c = store.Completion{AttemptID: att.AttemptID}
	if err == nil {
		c.Status = store.AttemptSent
		if res != nil && res.MessageID != 0 {
			c.ProviderMessageID = res.MessageID.String()
		}
		return c, false
	}
	c.ErrorMessage = clean(err.Error(), maxErrorMessage) // ilink errors carry no secret
	var ie *ilink.Error
	errors.As(err, &ie)
	switch code := ilink.CodeOf(err); {
	case code == ilink.CodeRejected:
		w, rerr := a.Store.GetWindow(ctx, att.ReplyWindowID)
		if rerr != nil { // the started send is counted in transmitted
			w = before
			w.Transmitted++
		}
		c.Status = store.AttemptFailed
		if store.ClassifyRejection(w, at) == store.RejectionWindow {
			c.FailType, c.ErrorCode = store.FailRejected, SendRejected
			return c, false
		}
		c.FailType, c.ErrorCode = store.FailThrottled, SendThrottled
		return c, true
	case code == ilink.CodeStaleToken:
		c.Status, c.FailType, c.ErrorCode = store.AttemptFailed, store.FailStaleToken, SendStaleToken
	case code == ilink.CodeNotSent:
		c.Status, c.FailType, c.ErrorCode = store.AttemptFailed, store.FailTransport, SendNotSent
	case code == ilink.CodeOutcomeUnknown, ilink.MayHaveTakenEffect(err),
		code == ilink.CodeHTTPStatus && ie != nil && ie.Status >= 500:
		c.Status, c.ErrorCode = store.AttemptUnknown, SendOutcomeUnknown
	default:
		c.Status, c.FailType, c.ErrorCode = store.AttemptFailed, store.FailRejected, SendRejected
	}
	return c, false
}

// finish records a completion, even after the activity was cancelled, retrying a few
// times on infrastructure errors. A completion refused because another execution already
// completed the attempt returns the stored outcome.
func (a *Activities) finish(ctx context.Context, c store.Completion) (SendOutput, error) {
	var err error
	for try := 0; try < 3; try++ {
		cctx, cancel := detached(ctx, 10*time.Second)
		var att store.Attempt
		att, err = a.Store.CompleteAttempt(cctx, now(), c)
		cancel()
		if err == nil {
			a.Metrics.Send(metrics.SendOutcome(att.Status, att.ErrorCode))
			return a.output(ctx, att), nil
		}
		if store.IsRuleViolation(err) {
			break
		}
		_ = wait(context.WithoutCancel(ctx), time.Duration(try+1)*200*time.Millisecond)
	}
	if store.CodeOf(err) == store.CodeAttemptConflict {
		if att, gerr := a.Store.GetAttempt(ctx, c.AttemptID); gerr == nil {
			return a.output(ctx, att), nil
		}
	}
	return SendOutput{}, storeErr("complete attempt", err)
}

// release gives a pending attempt's reservation back with reason (which becomes its error
// code) and answers with the released attempt.
func (a *Activities) release(ctx context.Context, att store.Attempt, reason string) (SendOutput, error) {
	if _, err := a.Store.ReleaseAttempt(ctx, now(), att.AttemptID, reason); err != nil {
		return SendOutput{}, storeErr("release attempt", err)
	}
	got, err := a.Store.GetAttempt(ctx, att.AttemptID)
	if err != nil {
		return SendOutput{}, storeErr("read attempt", err)
	}
	a.Metrics.Send(metrics.SendOutcome(got.Status, got.ErrorCode))
	return a.output(ctx, got), nil
}

// releaseOr releases the attempt when err is a store refusal (answered with its code)
// and returns infrastructure errors as they are (the attempt stays pending for a retry).
func (a *Activities) releaseOr(ctx context.Context, att store.Attempt, op string, err error) (SendOutput, error) {
	if store.IsRuleViolation(err) {
		return a.release(ctx, att, string(store.CodeOf(err)))
	}
	return SendOutput{}, fmt.Errorf("%s: %w", op, err)
}

// refusal answers (and counts) a store refusal before any attempt exists; infrastructure
// errors are returned (retryable).
func (a *Activities) refusal(op string, err error) (SendOutput, error) {
	if store.IsRuleViolation(err) {
		a.Metrics.Send(metrics.SendRefused)
		return SendOutput{Status: store.AttemptFailed, ErrorCode: string(store.CodeOf(err))}, nil
	}
	return SendOutput{}, fmt.Errorf("%s: %w", op, err)
}

// output describes an attempt, with its window's quota and, for a throttled one, when the
// bot's sends resume.
func (a *Activities) output(ctx context.Context, att store.Attempt) SendOutput {
	out := SendOutput{
		AttemptID: att.AttemptID, ClientMessageID: att.ClientMessageID, Status: att.Status,
		ProviderMessageID: att.ProviderMessageID, ErrorCode: att.ErrorCode,
	}
	if w, err := a.Store.GetWindow(ctx, att.ReplyWindowID); err == nil {
		out.SendsLeft = w.SendsLeft()
	}
	if att.ErrorCode == SendThrottled {
		if acct, err := a.Store.GetAccount(ctx, att.AccountKey); err == nil && acct.SendsBlockedUntil != nil {
			out.RetryAfter = *acct.SendsBlockedUntil
		}
	}
	return out
}

// itemOf builds the one iLink item of a send. Media items reference media already
// uploaded to the CDN.
func itemOf(c store.Content) ilink.Item {
	if c.Type == "text" {
		return ilink.NewTextItem(c.Text)
	}
	var ref store.MediaRef
	if c.Media != nil {
		ref = *c.Media
	}
	media := &ilink.CDNMedia{EncryptQueryParam: ref.EncryptQueryParam, EncryptType: ilink.EncryptTypePacked}
	switch c.Type {
	case "image":
		return ilink.Item{Type: ilink.ItemImage, ImageItem: &ilink.ImageItem{Media: media, MidSize: ref.Size}}
	case "file":
		return ilink.Item{Type: ilink.ItemFile, FileItem: &ilink.FileItem{Media: media, FileName: ref.FileName,
			Len: ilink.DecimalString(strconv.FormatInt(ref.Size, 10))}}
	case "video":
		return ilink.Item{Type: ilink.ItemVideo, VideoItem: &ilink.VideoItem{Media: media, VideoSize: ref.Size}}
	}
	return ilink.Item{}
}
