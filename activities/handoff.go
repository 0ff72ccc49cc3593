package activities

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/store"
)

// sessionTokenBytes is the entropy of an agent session token.
const sessionTokenBytes = 32

// newSessionToken returns a fresh bearer token: 32 random bytes, base64url.
func newSessionToken() sealing.Secret {
	var b [sessionTokenBytes]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return sealing.NewSecret(base64.RawURLEncoding.EncodeToString(b[:]))
}

// HandOff opens an agent session for the window's deliverable message and delivers it.
//
// A retry opens another session (a re-offer, which the store allows); the token of each
// goes to the agent only, never to the result. A store refusal (window expired or
// retired, message already handled) is a non-retryable error typed with the store code;
// a handler failure is retryable.
func (a *Activities) HandOff(ctx context.Context, in HandOffInput) (HandOffOutput, error) {
	token := newSessionToken()
	sess, msg, err := a.Store.OpenAgentSession(ctx, now(), store.OpenSessionInput{
		ReplyWindowID: in.ReplyWindowID, Token: token, TTL: a.cfg().SessionTTL,
	})
	if err != nil {
		return HandOffOutput{}, storeErr("open agent session", err)
	}
	out := HandOffOutput{SessionID: sess.SessionID, MessageKey: sess.SourceMessageKey, SessionEnd: sess.ExpiresAt}
	if a.Handler == nil {
		return out, nil
	}
	w, err := a.Store.GetWindow(ctx, in.ReplyWindowID)
	if err != nil {
		return HandOffOutput{}, storeErr("read window", err)
	}
	ans, err := a.Handler.Deliver(ctx, Delivery{Message: msg, SessionID: sess.SessionID, SessionToken: token, Window: w})
	if err != nil {
		return HandOffOutput{}, fmt.Errorf("deliver message %s (attempt %d): %w", sess.SourceMessageKey, in.Attempt, err)
	}
	out.Delivered, out.Replies, out.Handled = true, ans.Replies, ans.Handled
	return out, nil
}
