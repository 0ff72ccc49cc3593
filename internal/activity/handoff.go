package activity

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/temporal"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/tracing"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// sessionTokenBytes is the entropy of an agent session token.
const sessionTokenBytes = 32

// newSessionToken returns a fresh bearer token: 32 random bytes, base64url.
func newSessionToken() sealing.Secret {
	var b [sessionTokenBytes]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return sealing.NewSecret(base64.RawURLEncoding.EncodeToString(b[:]))
}

// HandOff opens an agent session for the window's deliverable message and delivers it
// to the agent of the bot's route (Activities.Handler on the default route).
//
// A retry opens another session (a re-offer, which the store allows); the token of each
// goes to the agent only, never to the result or an error (a handler's error text and
// answer are redacted). A store refusal (window expired or retired, message already
// handled or failed) is a non-retryable error typed with the store code; a handler
// failure is retryable, except a *PermanentError: the message is then marked failed with
// its reason and the error is non-retryable, typed activities.ErrTypeHandOffFailed.
func (a *Activities) HandOff(ctx context.Context, in activities.HandOffInput) (activities.HandOffOutput, error) {
	token := newSessionToken()
	offer, err := a.Store.OpenAgentSession(ctx, now(), store.OpenSessionInput{
		ReplyWindowID: in.ReplyWindowID, Token: token, TTL: a.cfg().SessionTTL,
	})
	if err != nil {
		return activities.HandOffOutput{}, storeErr("open agent session", err)
	}
	sess, msg, w := offer.Session, offer.Message, offer.Window
	out := activities.HandOffOutput{SessionID: sess.SessionID, MessageKey: sess.SourceMessageKey, SessionEnd: sess.ExpiresAt}
	// The bot's route, read with the session: this hand-off finishes with the handler it
	// starts with, whatever route change lands meanwhile.
	if offer.RouteErr != nil {
		return activities.HandOffOutput{}, fmt.Errorf("read the route of account %s: %w", msg.AccountKey, offer.RouteErr)
	}
	handler, err := a.handlerFor(offer.Route, offer.Routed)
	if err != nil {
		return activities.HandOffOutput{}, err
	}
	if handler == nil {
		return out, nil
	}
	inst, err := a.Store.Installation(ctx)
	if err != nil {
		return activities.HandOffOutput{}, storeErr("installation", err)
	}
	// The user sees "typing" while the agent works; a typing failure never fails the
	// hand-off (keepAlive only logs).
	a.typer().keepAlive(ctx, w)
	ans, err := a.deliver(ctx, handler, handoff.Delivery{Message: msg, SessionID: sess.SessionID, SessionToken: token, Window: w,
		WindowWorkflowID: inst.WindowWorkflowID(w.ReplyWindowID), AgentWorkflowID: inst.AgentWorkflowID(msg.MessageKey)})
	if err != nil {
		var perm *handoff.PermanentError
		if errors.As(err, &perm) {
			return activities.HandOffOutput{}, a.failHandOff(ctx, in, sess, redact(perm.Reason, token))
		}
		// The cause is not wrapped: its text is redacted, and nothing upstream needs it.
		return activities.HandOffOutput{}, fmt.Errorf("deliver message %s (attempt %d): %s",
			sess.SourceMessageKey, in.Attempt, redact(err.Error(), token))
	}
	out.Delivered, out.Handled = true, ans.Handled
	for _, r := range ans.Replies {
		out.Replies = append(out.Replies, redact(r, token))
	}
	return out, nil
}

// deliver hands d to the agent handler, in a span of its own when tracing is on.
func (a *Activities) deliver(ctx context.Context, h handoff.Handler, d handoff.Delivery) (handoff.Answer, error) {
	ctx, span := tracing.Child(ctx, "handoff", "deliver", trace.SpanKindInternal)
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrAccount.String(d.Message.AccountKey), tracing.AttrMessage.String(d.Message.MessageKey))
	}
	ans, err := h.Deliver(ctx, d)
	tracing.End(span, handoff.FailureCode(err))
	return ans, err
}

// failHandOff marks the message of a permanently failed hand-off failed with the reason
// and returns the non-retryable error that tells the workflow so. A failure to record it
// is retryable (the retry delivers again, and most likely fails the same way).
func (a *Activities) failHandOff(ctx context.Context, in activities.HandOffInput, sess store.Session, reason string) error {
	reason = clean(strings.TrimSpace(reason), vocab.MaxReasonBytes)
	if reason == "" {
		reason = "the agent hand-off failed permanently"
	}
	_, err := a.Store.FinishMessage(ctx, now(), sess.SourceMessageKey, vocab.MessageFailed, reason)
	switch {
	case err == nil:
		a.log().Warn("hand-off failed permanently; message marked failed", "message", sess.SourceMessageKey,
			"reply_window_id", in.ReplyWindowID, "attempt", in.Attempt, "reason", reason)
	case store.IsRuleViolation(err):
		// Finished meanwhile (the agent's verdict won): nothing to record.
		a.log().Warn("hand-off failed permanently; message already finished", "message", sess.SourceMessageKey,
			"reply_window_id", in.ReplyWindowID, "error", err)
	default:
		return fmt.Errorf("mark message %s failed after a permanent hand-off failure: %w", sess.SourceMessageKey, err)
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("deliver message %s (attempt %d): hand-off failed permanently: %s",
		sess.SourceMessageKey, in.Attempt, reason), activities.ErrTypeHandOffFailed, nil)
}

// redact removes every occurrence of the session token from s.
func redact(s string, token sealing.Secret) string {
	if t := token.Reveal(); t != "" {
		s = strings.ReplaceAll(s, t, sealing.Redacted)
	}
	return s
}
