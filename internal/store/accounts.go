package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

type accountInput struct {
	key, provider, owner, baseURL string
	token                         sealing.Secret
}

func validateAccountInput(provider, owner, baseURL string, token sealing.Secret) (accountInput, error) {
	if err := providerIdentity(provider, "provider account id"); err != nil {
		return accountInput{}, err
	}
	if err := providerIdentity(owner, "owner peer id"); err != nil {
		return accountInput{}, err
	}
	if token.IsZero() || len(token.Reveal()) > 4096 {
		return accountInput{}, fail(vocab.CodeInvalidInput, "bot token is missing or too long")
	}
	u, err := NormalizeBaseURL(baseURL)
	if err != nil {
		return accountInput{}, err
	}
	return accountInput{key: AccountKey(provider), provider: provider, owner: owner, baseURL: u, token: token}, nil
}

func botTokenBinding(accountKey string, generation int32) string {
	return accountKey + "/" + strconv.Itoa(int(generation))
}

func (s *Store) register(ctx context.Context, q *dbq.Queries, now time.Time, a accountInput) (Account, error) {
	if _, err := q.GetAccount(ctx, a.key); err == nil {
		return Account{}, fail(vocab.CodeAccountExists, "account is already registered")
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return Account{}, err
	}
	if err := q.InsertAccount(ctx, dbq.InsertAccountParams{
		AccountKey: a.key, ProviderAccountID: a.provider, OwnerPeerID: a.owner, BaseUrl: a.baseURL, CreatedAt: now,
	}); err != nil {
		return Account{}, err
	}
	if err := s.sealBotToken(ctx, q, now, a.key, 1, a.token); err != nil {
		return Account{}, err
	}
	row, err := q.GetAccount(ctx, a.key)
	return accountFrom(row), err
}

func (s *Store) sealBotToken(ctx context.Context, q *dbq.Queries, now time.Time, key string, generation int32, token sealing.Secret) error {
	sealed, err := s.keys.Seal(sealing.PurposeBotToken, botTokenBinding(key, generation), token)
	if err != nil {
		return &Error{Code: vocab.CodeInternal, Msg: "seal bot token", Err: err}
	}
	return q.UpsertAccountSecret(ctx, dbq.UpsertAccountSecretParams{
		AccountKey: key, AccountGeneration: generation, KeyGeneration: sealed.KeyGeneration,
		Nonce: sealed.Nonce, Ciphertext: sealed.Ciphertext, UpdatedAt: now,
	})
}

// RotateResult is the outcome of a rotation.
type RotateResult struct {
	Account Account
	// CancelledWindowIDs are the windows the rotation retired as cancelled.
	CancelledWindowIDs []int64
}

func (s *Store) rotate(ctx context.Context, q *dbq.Queries, now time.Time, a accountInput, expected int32) (RotateResult, error) {
	cur, err := lockAccount(ctx, q, a.key)
	if err != nil {
		return RotateResult{}, notFound(err, vocab.CodeAccountNotFound, "unknown account")
	}
	if cur.Generation != expected {
		return RotateResult{}, fail(vocab.CodeGenerationConflict, "account generation changed")
	}
	if cur.ProviderAccountID != a.provider || cur.OwnerPeerID != a.owner {
		return RotateResult{}, fail(vocab.CodePairMismatch, "account binding cannot change during rotation")
	}
	cancelled, err := s.cancelOpenWindows(ctx, q, now, a.key, "account_generation_changed")
	if err != nil {
		return RotateResult{}, err
	}
	n, err := q.BumpAccountGeneration(ctx, dbq.BumpAccountGenerationParams{
		AccountKey: a.key, Generation: expected, BaseUrl: a.baseURL, Now: now,
	})
	if err != nil {
		return RotateResult{}, err
	}
	if n != 1 {
		return RotateResult{}, fail(vocab.CodeGenerationConflict, "account generation changed")
	}
	if err := s.sealBotToken(ctx, q, now, a.key, expected+1, a.token); err != nil {
		return RotateResult{}, err
	}
	row, err := q.GetAccount(ctx, a.key)
	return RotateResult{Account: accountFrom(row), CancelledWindowIDs: cancelled}, err
}

// cancelOpenWindows retires every open window of an account as cancelled, settling the
// messages they leave without a verdict.
func (s *Store) cancelOpenWindows(ctx context.Context, q *dbq.Queries, now time.Time, accountKey, reason string) ([]int64, error) {
	ids, err := q.OpenWindowIDsOfAccount(ctx, accountKey)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return ids, nil
	}
	if _, err = retireWindows(ctx, q, now, ids, vocab.WindowCancelled, reason); err != nil {
		return nil, err
	}
	_, err = q.SettleUnansweredMessages(ctx, fmt.Sprintf(reasonCancelledUnanswered, reason), now, ids)
	return ids, err
}

// StatusChange is the outcome of a status change of an account.
type StatusChange struct {
	Account Account
	// CancelledWindowIDs are the windows the change retired.
	CancelledWindowIDs []int64
}

// PauseAccount pauses an active account until the given instant (the stale-token pause,
// or an operator's pause). Its windows stay open: a pause stops polling and sending, not
// the user's reply windows.
func (s *Store) PauseAccount(ctx context.Context, now time.Time, accountKey string, generation int32, until time.Time, reason string) (Account, error) {
	if !until.After(now) {
		return Account{}, fail(vocab.CodeInvalidInput, "pause must end in the future")
	}
	r, err := s.setStatus(ctx, now, accountKey, generation, vocab.AccountPaused, reason, &until, []string{vocab.AccountActive, vocab.AccountPaused}, false)
	return r.Account, err
}

// ResumeAccount makes a paused account active again.
func (s *Store) ResumeAccount(ctx context.Context, now time.Time, accountKey string, generation int32) (Account, error) {
	r, err := s.setStatus(ctx, now, accountKey, generation, vocab.AccountActive, "", nil, []string{vocab.AccountPaused, vocab.AccountActive}, false)
	return r.Account, err
}

// MarkNeedsRelogin records that the bot token is dead (a second -14 after the pause).
// The account stops; its open windows are cancelled because no send can use them.
func (s *Store) MarkNeedsRelogin(ctx context.Context, now time.Time, accountKey string, generation int32, reason string) (StatusChange, error) {
	return s.setStatus(ctx, now, accountKey, generation, vocab.AccountNeedsRelogin, reason, nil, []string{vocab.AccountActive, vocab.AccountPaused, vocab.AccountNeedsRelogin}, true)
}

// DisableAccount disables an account (operator removal); its open windows are cancelled.
func (s *Store) DisableAccount(ctx context.Context, now time.Time, accountKey string, generation int32, reason string) (StatusChange, error) {
	return s.setStatus(ctx, now, accountKey, generation, vocab.AccountDisabled, reason,
		nil, []string{vocab.AccountActive, vocab.AccountPaused, vocab.AccountNeedsRelogin, vocab.AccountReplaced, vocab.AccountDisabled}, true)
}

func (s *Store) setStatus(ctx context.Context, now time.Time, accountKey string, generation int32, status, reason string,
	pauseUntil *time.Time, from []string, cancelWindows bool) (StatusChange, error) {
	if err := validNow(now); err != nil {
		return StatusChange{}, err
	}
	if err := validAccountKey(accountKey); err != nil {
		return StatusChange{}, err
	}
	if len(reason) > 512 {
		return StatusChange{}, fail(vocab.CodeInvalidInput, "reason is too long")
	}
	// The change locks the account, then its windows, messages and sessions; a message's
	// finish running at the same instant (a send that answered it) locks them from the
	// message's side, and PostgreSQL ends one of the two as a deadlock. The whole change
	// rolled back, so it is run again (the operator's command does not fail on it).
	var out StatusChange
	var err error
	for try := 1; ; try++ {
		out, err = s.setStatusOnce(ctx, now, accountKey, generation, status, reason, pauseUntil, from, cancelWindows)
		if !isConflict(err) || try == maxConflictTries {
			return out, err
		}
	}
}

// maxConflictTries bounds the runs of a change a deadlock or serialization failure ended.
const maxConflictTries = 3

// setStatusOnce is one run of setStatus's transaction.
func (s *Store) setStatusOnce(ctx context.Context, now time.Time, accountKey string, generation int32, status, reason string,
	pauseUntil *time.Time, from []string, cancelWindows bool) (StatusChange, error) {
	var out StatusChange
	err := s.inTx(ctx, "set account status", func(q *dbq.Queries) error {
		cur, err := lockAccount(ctx, q, accountKey)
		if err != nil {
			return notFound(err, vocab.CodeAccountNotFound, "unknown account")
		}
		if cur.Generation != generation {
			return fail(vocab.CodeGenerationConflict, "account generation changed")
		}
		if !contains(from, cur.Status) {
			return fail(vocab.CodeAccountNotActive, "account is %s", cur.Status)
		}
		if cancelWindows {
			if out.CancelledWindowIDs, err = s.cancelOpenWindows(ctx, q, now, accountKey, "account_"+status); err != nil {
				return err
			}
		}
		if _, err := q.SetAccountStatus(ctx, dbq.SetAccountStatusParams{
			AccountKey: accountKey, Generation: generation, Status: status, Reason: reason,
			PauseUntil: pauseUntil, ReplacedBy: cur.ReplacedBy, Now: now,
		}); err != nil {
			return err
		}
		row, err := q.GetAccount(ctx, accountKey)
		out.Account = accountFrom(row)
		return err
	})
	return out, err
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// GetAccount returns an account.
func (s *Store) GetAccount(ctx context.Context, accountKey string) (Account, error) {
	if err := validAccountKey(accountKey); err != nil {
		return Account{}, err
	}
	var out Account
	err := s.read(ctx, "get account", func(q *dbq.Queries) error {
		row, err := q.GetAccount(ctx, accountKey)
		if err != nil {
			return notFound(err, vocab.CodeAccountNotFound, "unknown account")
		}
		out = accountFrom(row)
		return nil
	})
	return out, err
}

// ListAccounts lists accounts, all of them when status is empty.
func (s *Store) ListAccounts(ctx context.Context, status string) ([]Account, error) {
	var out []Account
	err := s.read(ctx, "list accounts", func(q *dbq.Queries) error {
		var rows []dbq.Account
		var err error
		if status == "" {
			rows, err = q.ListAccounts(ctx)
		} else {
			rows, err = q.ListAccountsByStatus(ctx, status)
		}
		for _, r := range rows {
			out = append(out, accountFrom(r))
		}
		return err
	})
	return out, err
}

// PollAge is an active account's poll health: how long ago its last successful getupdates
// round trip was recorded, or its last change of state (enrollment, rotation, resume) when
// later.
type PollAge struct {
	AccountKey string
	LastPollAt *time.Time
	// Since is never negative: it is read on the database's clock, the clock polls are
	// recorded on.
	Since time.Duration
}

// PollAges returns the poll health of every active account, by account key. Both ends of
// each age are read on the database's clock (a state change written on a caller's clock
// ahead of it counts as now), so that every worker reads the same ages whatever its own
// clock, and none is negative.
func (s *Store) PollAges(ctx context.Context) ([]PollAge, error) {
	var out []PollAge
	err := s.read(ctx, "poll ages", func(q *dbq.Queries) error {
		rows, err := q.ListPollAges(ctx)
		for _, r := range rows {
			out = append(out, PollAge{AccountKey: r.AccountKey, LastPollAt: r.LastPollAt,
				Since: time.Duration(r.SecondsSince * float64(time.Second))})
		}
		return err
	})
	return out, err
}

// GetAccountWithSecret returns an account with its opened bot token. The secret must be
// of the account's current generation (generation_conflict otherwise) and open with the
// store's sealing keys (sealed_unreadable otherwise: [UnreadableTokenOf] tells which key
// generation is needed).
func (s *Store) GetAccountWithSecret(ctx context.Context, accountKey string) (AccountWithSecret, error) {
	if err := validAccountKey(accountKey); err != nil {
		return AccountWithSecret{}, err
	}
	var out AccountWithSecret
	err := s.inTx(ctx, "get account secret", func(q *dbq.Queries) error {
		row, err := q.GetAccount(ctx, accountKey)
		if err != nil {
			return notFound(err, vocab.CodeAccountNotFound, "unknown account")
		}
		out, err = s.openAccount(ctx, q, row)
		return err
	})
	return out, err
}

// ListActiveAccountsWithSecrets lists the active accounts with their opened bot tokens,
// and apart from them the active accounts whose bot token the store's sealing keys cannot
// open (unreadable): one unreadable account never hides the others.
func (s *Store) ListActiveAccountsWithSecrets(ctx context.Context) (readable []AccountWithSecret, unreadable []UnreadableToken, err error) {
	err = s.inTx(ctx, "list account secrets", func(q *dbq.Queries) error {
		rows, err := q.ListAccountsByStatus(ctx, vocab.AccountActive)
		if err != nil {
			return err
		}
		for _, r := range rows {
			a, err := s.openAccount(ctx, q, r)
			if u, ok := UnreadableTokenOf(err); ok {
				unreadable = append(unreadable, u)
				continue
			}
			if err != nil {
				return err
			}
			readable = append(readable, a)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return readable, unreadable, nil
}

func (s *Store) openAccount(ctx context.Context, q *dbq.Queries, row dbq.Account) (AccountWithSecret, error) {
	sec, err := batchRow[dbq.AccountSecret](q.GetAccountSecret(ctx, []string{row.AccountKey}))
	if err != nil {
		return AccountWithSecret{}, notFound(err, vocab.CodeAccountNotFound, "account has no secret")
	}
	return s.openAccountSecret(row, sec)
}

// openAccountSecret opens the bot token of an account's current generation; a token the
// sealing keys cannot open is sealed_unreadable (openBotToken).
func (s *Store) openAccountSecret(row dbq.Account, sec dbq.AccountSecret) (AccountWithSecret, error) {
	if sec.AccountGeneration != row.Generation {
		return AccountWithSecret{}, fail(vocab.CodeGenerationConflict, "account secret generation is stale")
	}
	token, err := s.openBotToken(row.AccountKey, row.Generation, sec)
	if err != nil {
		return AccountWithSecret{}, err
	}
	return AccountWithSecret{Account: accountFrom(row), BotToken: token}, nil
}

// Cursor is the getupdates cursor of an account.
type Cursor struct {
	AccountKey        string
	AccountGeneration int32
	Cursor            string
	UpdatedAt         *time.Time
}

// cursorFailure explains why a cursor compare-and-set found nothing to update.
func cursorFailure(ctx context.Context, q *dbq.Queries, accountKey string, generation int32, expected string) error {
	a, err := q.GetAccount(ctx, accountKey)
	if err != nil {
		return notFound(err, vocab.CodeAccountNotFound, "unknown account")
	}
	return checkPollable(a, generation, expected)
}

// checkPollable is the one rule for who may move a cursor: a poller of the account's
// generation or an older one (its page was in flight when a rotation landed), from the
// cursor the page was fetched with. The account's status does not matter: a page iLink
// handed out is stored even when the account was paused, removed or rotated while it was
// in flight (the poller stops after storing it). A superseded poller whose successor
// already committed finds the cursor moved and is refused.
func checkPollable(a dbq.Account, generation int32, expected string) error {
	switch {
	case a.Generation < generation:
		return fail(vocab.CodeGenerationConflict, "account generation is older than the poller's")
	case a.Cursor != expected && a.Generation != generation:
		return fail(vocab.CodeGenerationConflict, "account generation changed and its poller moved the cursor")
	case a.Cursor != expected:
		return fail(vocab.CodeCursorConflict, "cursor changed")
	}
	return nil
}

// RecordPoll records a successful getupdates round trip (account health) without a page;
// an account that is no longer active (paused, removed) is refused with account_not_active.
// The round trip is recorded on the database's clock, the one its age is read on
// ([Store.PollAges]); now is checked like every call's.
func (s *Store) RecordPoll(ctx context.Context, now time.Time, accountKey string, generation int32) (tracedErr error) {
	ctx, span := startSpan(ctx, "RecordPoll", accountKey)
	defer func() { endSpan(span, tracedErr, "", "") }()
	if err := validNow(now); err != nil {
		return err
	}
	if err := validAccountKey(accountKey); err != nil {
		return err
	}
	return s.inTx(ctx, "record poll", func(q *dbq.Queries) error {
		n, err := q.RecordPoll(ctx, accountKey, generation)
		if err != nil {
			return err
		}
		if n != 1 {
			a, err := q.GetAccount(ctx, accountKey)
			if err != nil {
				return notFound(err, vocab.CodeAccountNotFound, "unknown account")
			}
			if a.Generation != generation {
				return fail(vocab.CodeGenerationConflict, "account generation changed")
			}
			// Paused or removed: the poll must end, not go on polling an account that
			// may not be polled (a pause ends on the poller's timer, not on a poll).
			return fail(vocab.CodeAccountNotActive, "account is %s", a.Status)
		}
		return nil
	})
}
