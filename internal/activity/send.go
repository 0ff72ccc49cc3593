package activity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/faultpoint"
	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/pause"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// Bounds of the completion fields (the store refuses longer ones).
const (
	maxErrorMessage = vocab.MaxErrorMessageBytes
)

// Send runs one reply through a window: reserve (idempotent by request id) and start in
// one transaction when nothing must wait between them, transmit once, complete. A
// transmit whose outcome is unknown completes the attempt as unknown and is never
// re-sent; a retried activity that finds its attempt already sending completes it as
// unknown.
//
// An empty RequestID defaults to the scheduled activity's identity (run id and activity
// id, stable across retries of that activity).
//
// Sends of one bot are serialized and paced by the store, under the account's row lock:
// a send starts only when the bot's breaker is closed, Config.SendGap has passed since
// its last send and no other send to the peer is in flight; otherwise the attempt stays
// reserved and the activity waits for its turn. A store refusal (quota, expired or
// retired window, invalid session, invalid content) is an answer (activities.SendOutput.ErrorCode,
// nil error); only infrastructure failures are errors.
//
// A send that answers a message (SendInput.FinishHandled) and was confirmed sent marks
// the message handled in the same activity (finishSent).
func (a *Activities) Send(ctx context.Context, in activities.SendInput) (activities.SendAnswer, error) {
	out, err := a.send(ctx, in)
	if err != nil || in.FinishHandled == "" || out.Status != vocab.AttemptSent {
		return activities.SendAnswer{SendOutput: out}, err
	}
	return a.finishSent(ctx, in.FinishHandled, out)
}

// finishSent marks the message a sent reply answered handled (the store's FinishMessage
// rule). A store refusal (another verdict recorded first) leaves the verdict to the
// workflow, which learns it from its own finish; an infrastructure failure is the
// activity's error, and the retry finds the attempt sent (never sends it again) and
// finishes once more.
func (a *Activities) finishSent(ctx context.Context, messageKey string, out activities.SendOutput) (activities.SendAnswer, error) {
	fctx, cancel := detached(ctx, 10*time.Second)
	m, err := a.recordVerdict(fctx, messageKey, vocab.MessageHandled, "")
	cancel()
	switch {
	case err == nil:
		return activities.SendAnswer{SendOutput: out, MessageStatus: m.Status}, nil
	case store.IsRuleViolation(err):
		a.log().Info("message not finished with its reply", "message", messageKey, "code", store.CodeOf(err))
		return activities.SendAnswer{SendOutput: out}, nil
	}
	return activities.SendAnswer{}, storeErr("finish message", err)
}

// send is Send without the finish.
func (a *Activities) send(ctx context.Context, in activities.SendInput) (activities.SendOutput, error) {
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
	pacing := store.SendPacing{Gap: cfg.SendGap}
	prep, err := a.Store.ReserveAndStart(ctx, now(), store.ReplyInput{Session: ref, Content: in.Content,
		RequestID: requestID, ReplyWindowID: in.ReplyWindowID, Final: in.Final}, pacing)
	if err != nil {
		return a.refusal("reserve reply", err)
	}
	att := prep.Attempt
	log := a.log().With("account", att.AccountKey, "attempt", att.AttemptID, "reply_window_id", att.ReplyWindowID)
	switch {
	case prep.Started != nil:
	case att.Status == vocab.AttemptSending:
		// Started by an earlier execution that never recorded the outcome: the request
		// may have reached iLink, so it is never sent again.
		log.Warn("attempt found sending after a retry; outcome unknown")
		return a.finish(ctx, store.Completion{AttemptID: att.AttemptID, Status: vocab.AttemptUnknown,
			ErrorCode: vocab.SendOutcomeUnknown, ErrorMessage: "send interrupted before its outcome was recorded"})
	case att.Status != vocab.AttemptPending:
		return a.output(prep.Window, att, prep.BlockedUntil), nil
	default:
		if prep, err = a.awaitStart(ctx, ref, prep, pacing); err != nil {
			return a.releaseOr(ctx, att, "start reply", err)
		}
		if prep.Started == nil { // the breaker is open
			return a.release(ctx, att, vocab.SendThrottled, prep.BlockedUntil)
		}
	}
	return a.transmit(ctx, log, att, prep.Started)
}

// transmit sends a started attempt once and completes it: its media uploaded first (once),
// the outcome classified and recorded, "typing" ended, and the bot's throttle penalty
// recorded when iLink throttled it. From the request on, nothing is retried.
func (a *Activities) transmit(ctx context.Context, log *slog.Logger, att store.Attempt, st *store.SendStart) (activities.SendOutput, error) {
	cfg := a.cfg()
	cl, err := a.botClient(st.Account)
	if err != nil {
		log.Error("no iLink client for the account", "error", err)
		return a.finish(ctx, store.Completion{AttemptID: att.AttemptID, Status: vocab.AttemptFailed,
			FailType: vocab.FailTransport, ErrorCode: vocab.SendNotSent, ErrorMessage: "no iLink client for the account"})
	}

	item := itemOf(att.Content)
	if att.Content.Media != nil {
		// Media is uploaded once and its upload recorded before the message is sent: a
		// retry sends what the first upload stored (or, started already, never sends).
		var code string
		if item, code = a.uploadedItem(ctx, cl, att); code != "" {
			log.Warn("media upload failed; not sent", "code", code)
			return a.finish(ctx, store.Completion{AttemptID: att.AttemptID, Status: vocab.AttemptFailed,
				FailType: vocab.FailTransport, ErrorCode: vocab.SendNotSent, ErrorMessage: "media upload failed: " + code})
		}
	}

	// From here on the request may leave: the outcome is recorded, never retried.
	res, sendErr := cl.SendItem(ctx, ilink.SendOptions{
		ToUserID: att.PeerID, ContextToken: ilink.Secret(st.ContextToken.Reveal()), ClientID: att.ClientMessageID,
	}, item)
	faultpoint.Hit(faultpoint.SendInFlight, att.AccountKey)
	at := now()
	c, throttled := a.classify(st.Window, sendErr, res, at)
	c.AttemptID = att.AttemptID
	if sendErr != nil {
		log.Warn("send failed", "status", c.Status, "fail_type", c.FailType, "error", sendErr)
	}
	out, err := a.finish(ctx, c)
	if c.Status != vocab.AttemptFailed || c.FailType != vocab.FailTransport {
		a.stopTyping(ctx, att.AccountKey, att.PeerID) // the first reply ends "typing"
	}
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

// inFlightWait is how long a send waits before it looks again whether another send to
// the same peer (a superseded window's, or a system notice) has completed.
const inFlightWait = 250 * time.Millisecond

// awaitStart waits for a reserved attempt's turn (pacing, another send in flight) and
// starts it. It returns with Started nil when the bot's breaker is open.
func (a *Activities) awaitStart(ctx context.Context, ref store.SessionRef, prep store.PreparedSend, pacing store.SendPacing) (store.PreparedSend, error) {
	for prep.Started == nil && prep.BlockedUntil == nil {
		d := time.Until(prep.NotBefore)
		if prep.InFlight {
			d = max(d, inFlightWait)
		}
		if err := pause.For(ctx, d); err != nil {
			return prep, err // the attempt stays pending; a retry resumes it
		}
		var err error
		if prep, err = a.Store.StartSend(ctx, now(), ref, prep.Attempt.AttemptID, pacing); err != nil {
			return prep, err
		}
	}
	return prep, nil
}

// classify turns the outcome of one transmission into a completion. A ret -2 is judged
// by our own bookkeeping (store.ClassifyRejection); throttled reports that the bot's
// sends must stop for the penalty.
//
// started is the window as the start left it (its transmitted count includes this send).
func (a *Activities) classify(started store.Window, err error, res *ilink.SendResult, at time.Time) (c store.Completion, throttled bool) {
	c = store.Completion{}
	if err == nil {
		c.Status = vocab.AttemptSent
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
		c.Status = vocab.AttemptFailed
		if store.ClassifyRejection(started, at) == store.RejectionWindow {
			c.FailType, c.ErrorCode = vocab.FailRejected, vocab.SendRejected
			return c, false
		}
		c.FailType, c.ErrorCode = vocab.FailThrottled, vocab.SendThrottled
		return c, true
	case code == ilink.CodeStaleToken:
		c.Status, c.FailType, c.ErrorCode = vocab.AttemptFailed, vocab.FailStaleToken, vocab.SendStaleToken
	case code == ilink.CodeNotSent:
		c.Status, c.FailType, c.ErrorCode = vocab.AttemptFailed, vocab.FailTransport, vocab.SendNotSent
	case code == ilink.CodeOutcomeUnknown, ilink.MayHaveTakenEffect(err),
		code == ilink.CodeHTTPStatus && ie != nil && ie.Status >= 500:
		c.Status, c.ErrorCode = vocab.AttemptUnknown, vocab.SendOutcomeUnknown
	default:
		c.Status, c.FailType, c.ErrorCode = vocab.AttemptFailed, vocab.FailRejected, vocab.SendRejected
	}
	return c, false
}

// finish records a completion, even after the activity was cancelled, retrying a few
// times on infrastructure errors. A completion refused because another execution already
// completed the attempt returns the stored outcome.
func (a *Activities) finish(ctx context.Context, c store.Completion) (activities.SendOutput, error) {
	var err error
	for try := 0; try < 3; try++ {
		cctx, cancel := detached(ctx, 10*time.Second)
		var done store.SendOutcome
		done, err = a.Store.CompleteSend(cctx, now(), c)
		cancel()
		if err == nil {
			a.Metrics.Send(metrics.SendOutcome(done.Attempt.Status, done.Attempt.ErrorCode))
			return a.output(done.Window, done.Attempt, nil), nil
		}
		if store.IsRuleViolation(err) {
			break
		}
		_ = pause.For(context.WithoutCancel(ctx), time.Duration(try+1)*200*time.Millisecond)
	}
	if store.CodeOf(err) == vocab.CodeAttemptConflict {
		if att, gerr := a.Store.GetAttempt(ctx, c.AttemptID); gerr == nil {
			w, _ := a.Store.GetWindow(ctx, att.ReplyWindowID)
			return a.output(w, att, nil), nil
		}
	}
	return activities.SendOutput{}, storeErr("complete attempt", err)
}

// release gives a pending attempt's reservation back with reason (which becomes its error
// code) and answers with the released attempt; blocked is when the bot's breaker closes
// (for a throttled release).
func (a *Activities) release(ctx context.Context, att store.Attempt, reason string, blocked *time.Time) (activities.SendOutput, error) {
	rel, err := a.Store.ReleaseSend(ctx, now(), att.AttemptID, reason)
	if err != nil {
		return activities.SendOutput{}, storeErr("release attempt", err)
	}
	a.Metrics.Send(metrics.SendOutcome(rel.Attempt.Status, rel.Attempt.ErrorCode))
	return a.output(rel.Window, rel.Attempt, blocked), nil
}

// releaseOr releases the attempt when err is a store refusal (answered with its code)
// and returns infrastructure errors as they are (the attempt stays pending for a retry).
func (a *Activities) releaseOr(ctx context.Context, att store.Attempt, op string, err error) (activities.SendOutput, error) {
	if store.IsRuleViolation(err) {
		return a.release(ctx, att, string(store.CodeOf(err)), nil)
	}
	return activities.SendOutput{}, fmt.Errorf("%s: %w", op, err)
}

// refusal answers (and counts) a store refusal before any attempt exists; infrastructure
// errors are returned (retryable).
func (a *Activities) refusal(op string, err error) (activities.SendOutput, error) {
	if store.IsRuleViolation(err) {
		a.Metrics.Send(metrics.SendRefused)
		return activities.SendOutput{Status: vocab.AttemptFailed, ErrorCode: string(store.CodeOf(err))}, nil
	}
	return activities.SendOutput{}, fmt.Errorf("%s: %w", op, err)
}

// output describes an attempt with its window's quota and, for a throttled one, when the
// bot's sends resume (blocked, when known).
func (a *Activities) output(w store.Window, att store.Attempt, blocked *time.Time) activities.SendOutput {
	out := activities.SendOutput{
		AttemptID: att.AttemptID, ClientMessageID: att.ClientMessageID, Status: att.Status,
		ProviderMessageID: att.ProviderMessageID, ErrorCode: att.OutcomeCode(), SendsLeft: w.SendsLeft(),
	}
	if att.ErrorCode == vocab.SendThrottled && blocked != nil {
		out.RetryAfter = *blocked
	}
	return out
}

// itemOf builds the one iLink item of a text send (media items: uploadedItem).
func itemOf(c vocab.Content) ilink.Item {
	return ilink.NewTextItem(c.Text)
}

// mediaUpload is what the sealed upload result of staged media holds: a secret (its CDN
// download reference and AES key), only ever stored sealed.
type mediaUpload struct {
	EncryptQueryParam string `json:"eqp"`
	AESKeyHex         string `json:"key"`
	RawSize           int64  `json:"raw"`
	CipherSize        int64  `json:"cipher"`
}

// uploadedItem returns the iLink item of a media attempt: the staged media's recorded
// upload, or a new upload of it recorded first. It answers a failure code instead (the
// message was not sent): media_not_found, or the upload's failure kind.
func (a *Activities) uploadedItem(ctx context.Context, cl *ilink.Client, att store.Attempt) (ilink.Item, string) {
	ref := att.Content.Media
	staged, err := a.Store.GetStagedMedia(ctx, ref.MediaID)
	if err != nil {
		return ilink.Item{}, string(store.CodeOf(err))
	}
	if staged.ReplyWindowID != att.ReplyWindowID || staged.Kind != att.Content.Type {
		return ilink.Item{}, string(vocab.CodeMediaNotFound)
	}
	upload := staged.Upload
	if upload.IsZero() {
		mt := map[string]ilink.MediaType{"image": ilink.MediaImage, "video": ilink.MediaVideo, "file": ilink.MediaFile}[staged.Kind]
		up, err := cl.UploadMedia(ctx, ilink.UploadRequest{ToUserID: att.PeerID, MediaType: mt, Data: []byte(staged.Data.Reveal())})
		if err != nil {
			return ilink.Item{}, "upload_" + string(ilink.CodeOf(err))
		}
		data, _ := json.Marshal(mediaUpload{EncryptQueryParam: up.EncryptQueryParam, AESKeyHex: up.AESKey.Reveal(),
			RawSize: up.RawSize, CipherSize: up.CipherSize})
		rctx, cancel := detached(ctx, 10*time.Second)
		upload, err = a.Store.RecordMediaUpload(rctx, now(), ref.MediaID, sealing.NewSecret(string(data)))
		cancel()
		if err != nil {
			return ilink.Item{}, "record_upload_" + string(store.CodeOf(err))
		}
	}
	var u mediaUpload
	if err := json.Unmarshal([]byte(upload.Reveal()), &u); err != nil {
		return ilink.Item{}, "upload_record_invalid"
	}
	m := &ilink.UploadedMedia{EncryptQueryParam: u.EncryptQueryParam, AESKey: ilink.Secret(u.AESKeyHex),
		RawSize: u.RawSize, CipherSize: u.CipherSize}
	switch staged.Kind {
	case "image":
		return m.ImageItem(), ""
	case "video":
		return m.VideoItem(), ""
	}
	return m.FileItem(staged.FileName), ""
}
