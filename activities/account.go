package activities

import "context"

// PauseAccount pauses an account (stale-token pause).
func (a *Activities) PauseAccount(ctx context.Context, in PauseInput) error {
	_, err := a.Store.PauseAccount(ctx, nowOr(in.Now), in.AccountKey, in.Generation, in.Until, in.Reason)
	return storeErr("pause account", err)
}

// ResumeAccount makes a paused account active again.
func (a *Activities) ResumeAccount(ctx context.Context, in StatusInput) error {
	_, err := a.Store.ResumeAccount(ctx, nowOr(in.Now), in.AccountKey, in.Generation)
	return storeErr("resume account", err)
}

// MarkNeedsRelogin records a dead bot token; its windows are cancelled.
func (a *Activities) MarkNeedsRelogin(ctx context.Context, in StatusInput) (StatusOutput, error) {
	ch, err := a.Store.MarkNeedsRelogin(ctx, nowOr(in.Now), in.AccountKey, in.Generation, in.Reason)
	if err != nil {
		return StatusOutput{}, storeErr("mark needs relogin", err)
	}
	return StatusOutput{Status: ch.Account.Status, CancelledWindowIDs: ch.CancelledWindowIDs}, nil
}

// ReadAccountState reads an account's status: the store is the source of truth for
// operator commands, so a poller that received pause or resume signals acts on the
// latest stored state, however fast the commands came.
func (a *Activities) ReadAccountState(ctx context.Context, in AccountRef) (AccountState, error) {
	acct, err := a.Store.GetAccount(ctx, in.AccountKey)
	if err != nil {
		return AccountState{}, storeErr("read account", err)
	}
	return AccountState{Status: acct.Status, Generation: acct.Generation, PausedUntil: acct.PauseUntil}, nil
}
