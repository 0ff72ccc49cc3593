package activity

import (
	"context"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/store"
)

// FinishMessage records the verdict on a message (handled, or failed with a reason) and
// closes its agent sessions, in one store transaction. Finishing again with the same
// verdict is a no-op (retries); a store refusal (another verdict already recorded,
// unknown message, bad input) is a non-retryable error typed with the store code.
func (a *Activities) FinishMessage(ctx context.Context, in activities.FinishInput) (activities.FinishOutput, error) {
	m, err := a.recordVerdict(ctx, in.MessageKey, in.Status, in.Reason)
	if err != nil {
		return activities.FinishOutput{}, storeErr("finish message", err)
	}
	a.stopTyping(ctx, m.AccountKey, m.PeerID)
	return activities.FinishOutput{Status: m.Status}, nil
}

// recordVerdict records a message's verdict in the store (its FinishMessage rule) and logs
// it: the one place both FinishMessage and a Send that finishes its message go through.
func (a *Activities) recordVerdict(ctx context.Context, messageKey, status, reason string) (store.Message, error) {
	m, err := a.Store.FinishMessage(ctx, now(), messageKey, status, reason)
	if err != nil {
		return store.Message{}, err
	}
	a.log().Info("message finished", "message", m.MessageKey, "status", m.Status)
	return m, nil
}
