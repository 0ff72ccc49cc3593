package activities

import (
	"context"

	"github.com/ilinkflow/ilinkflow/internal/actapi"
)

// PauseAccount pauses an account (stale-token pause).
func (a *Activities) PauseAccount(ctx context.Context, in actapi.PauseInput) error {
	_, err := a.Store.PauseAccount(ctx, nowOr(in.Now), in.AccountKey, in.Generation, in.Until, in.Reason)
	return storeErr("pause account", err)
}

// ResumeAccount makes a paused account active again.
func (a *Activities) ResumeAccount(ctx context.Context, in actapi.StatusInput) error {
	_, err := a.Store.ResumeAccount(ctx, nowOr(in.Now), in.AccountKey, in.Generation)
	return storeErr("resume account", err)
}

// MarkNeedsRelogin records a dead bot token; its windows are cancelled.
func (a *Activities) MarkNeedsRelogin(ctx context.Context, in actapi.StatusInput) (actapi.StatusOutput, error) {
	ch, err := a.Store.MarkNeedsRelogin(ctx, nowOr(in.Now), in.AccountKey, in.Generation, in.Reason)
	if err != nil {
		return actapi.StatusOutput{}, storeErr("mark needs relogin", err)
	}
	return actapi.StatusOutput{Status: ch.Account.Status, CancelledWindowIDs: ch.CancelledWindowIDs}, nil
}

// ReadAccountState reads an account's status: the store is the source of truth for
// operator commands, so a poller that received pause or resume signals acts on the
// latest stored state, however fast the commands came.
func (a *Activities) ReadAccountState(ctx context.Context, in actapi.AccountRef) (actapi.AccountState, error) {
	acct, err := a.Store.GetAccount(ctx, in.AccountKey)
	if err != nil {
		return actapi.AccountState{}, storeErr("read account", err)
	}
	return actapi.AccountState{Status: acct.Status, Generation: acct.Generation, PausedUntil: acct.PauseUntil}, nil
}
