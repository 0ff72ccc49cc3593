package activity

import (
	"context"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/wfclient"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// PauseAccount pauses an account (stale-token pause).
func (a *Activities) PauseAccount(ctx context.Context, in activities.PauseInput) error {
	_, err := a.Store.PauseAccount(ctx, nowOr(in.Now), in.AccountKey, in.Generation, in.Until, in.Reason)
	return storeErr("pause account", err)
}

// ResumeAccount makes a paused account active again (the end of a pause) and tells its
// open windows' workflows, which offer what the pause refused to the agent again.
// Idempotent: a retry finds the account active and tells the windows again.
func (a *Activities) ResumeAccount(ctx context.Context, in activities.StatusInput) error {
	now := nowOr(in.Now)
	cur, err := a.Store.GetAccount(ctx, in.AccountKey)
	if err != nil {
		return storeErr("read account", err)
	}
	if cur.Status == vocab.AccountPaused && cur.PauseUntil != nil && cur.PauseUntil.After(now) {
		// Paused again, until later, since the poller's timer was set: that pause stands
		// (the poll finds the account paused and the poller follows the store).
		return nil
	}
	if _, err := a.Store.ResumeAccount(ctx, now, in.AccountKey, in.Generation); err != nil {
		return storeErr("resume account", err)
	}
	if a.Temporal == nil {
		return nil
	}
	return a.tellResumed(ctx, in.AccountKey)
}

// tellResumed signals the workflows of the account's open windows that it is active again.
func (a *Activities) tellResumed(ctx context.Context, accountKey string) error {
	ids, err := a.Store.OpenWindowIDs(ctx, accountKey)
	if err != nil {
		return storeErr("list open windows", err)
	}
	if len(ids) == 0 {
		return nil
	}
	inst, err := a.Store.Installation(ctx)
	if err != nil {
		return storeErr("installation", err)
	}
	return wfclient.SignalAccountResumed(ctx, a.Temporal, inst, ids)
}

// MarkNeedsRelogin records a dead bot token; its windows are cancelled.
func (a *Activities) MarkNeedsRelogin(ctx context.Context, in activities.StatusInput) (activities.StatusOutput, error) {
	ch, err := a.Store.MarkNeedsRelogin(ctx, nowOr(in.Now), in.AccountKey, in.Generation, in.Reason)
	if err != nil {
		return activities.StatusOutput{}, storeErr("mark needs relogin", err)
	}
	return activities.StatusOutput{Status: ch.Account.Status, CancelledWindowIDs: ch.CancelledWindowIDs}, nil
}

// ReadAccountState reads an account's status: the store is the source of truth for
// operator commands, so a poller that received pause or resume signals acts on the
// latest stored state, however fast the commands came.
func (a *Activities) ReadAccountState(ctx context.Context, in activities.AccountRef) (activities.AccountState, error) {
	acct, err := a.Store.GetAccount(ctx, in.AccountKey)
	if err != nil {
		return activities.AccountState{}, storeErr("read account", err)
	}
	return activities.AccountState{Status: acct.Status, Generation: acct.Generation, PausedUntil: acct.PauseUntil}, nil
}
