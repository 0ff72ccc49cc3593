package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// UnreadableToken is an account whose bot token the store's sealing keys cannot open (for
// example a token sealed with a dev key file, read by a worker given a key made since with
// `starter keygen`). It holds no secret: the account, its generation and the key
// generation the token was sealed with.
type UnreadableToken struct {
	AccountKey        string
	AccountGeneration int32
	// KeyGeneration is the sealing key generation the token was sealed with.
	KeyGeneration int32
	// KeyMissing: the sealing keys hold no key of KeyGeneration. Otherwise they hold
	// another key under that generation (a key made anew under a generation already in
	// use), or the stored token was altered.
	KeyMissing bool
}

// Problem says in a few words why the token does not open: "key generation 3 missing" or
// "key generation 1 is another key".
func (u UnreadableToken) Problem() string {
	if u.KeyMissing {
		return fmt.Sprintf("key generation %d missing", u.KeyGeneration)
	}
	return fmt.Sprintf("key generation %d is another key", u.KeyGeneration)
}

// Fix is the operator's remedy, naming the key generation to configure.
func (u UnreadableToken) Fix() string {
	if u.KeyMissing {
		return fmt.Sprintf("add the key of generation %d (the key that sealed it) to %s and restart the worker, or enroll the bot again",
			u.KeyGeneration, sealing.EnvKeys)
	}
	return fmt.Sprintf("%s holds another key under generation %d: put the key that sealed it back under generation %d "+
		"(a new key takes a higher generation) and restart the worker, or enroll the bot again",
		sealing.EnvKeys, u.KeyGeneration, u.KeyGeneration)
}

// TokenError is the cause of a sealed_unreadable store error (match it with errors.As,
// or use [UnreadableTokenOf]). Neither it nor its cause carries key material, plaintext
// or ciphertext.
type TokenError struct {
	UnreadableToken
	// Err is the sealing error the open failed with.
	Err error
}

// Error names the account, why its token does not open and the fix.
func (e *TokenError) Error() string {
	return fmt.Sprintf("bot token of account %s (generation %d) cannot be opened: %s: %s",
		e.AccountKey, e.AccountGeneration, e.Problem(), e.Fix())
}

// Unwrap returns the sealing error.
func (e *TokenError) Unwrap() error { return e.Err }

// UnreadableTokenOf returns the account a sealed_unreadable error is about.
func UnreadableTokenOf(err error) (UnreadableToken, bool) {
	var te *TokenError
	if errors.As(err, &te) {
		return te.UnreadableToken, true
	}
	return UnreadableToken{}, false
}

// openBotToken opens the bot token sealed for an account generation. It is the one place
// an open failure is classified: a sealed_unreadable error whose cause is a *TokenError.
func (s *Store) openBotToken(accountKey string, generation int32, sec dbq.AccountSecret) (sealing.Secret, error) {
	token, err := s.keys.Open(sealing.PurposeBotToken, botTokenBinding(accountKey, generation),
		sealing.Sealed{KeyGeneration: sec.KeyGeneration, Nonce: sec.Nonce, Ciphertext: sec.Ciphertext})
	if err == nil {
		return token, nil
	}
	if !errors.Is(err, sealing.ErrOpen) {
		return sealing.Secret{}, &Error{Code: vocab.CodeInternal, Msg: "open bot token", Err: err}
	}
	te := &TokenError{UnreadableToken: UnreadableToken{AccountKey: accountKey, AccountGeneration: generation,
		KeyGeneration: sec.KeyGeneration, KeyMissing: !s.keys.Has(sec.KeyGeneration)}, Err: err}
	return sealing.Secret{}, &Error{Code: vocab.CodeSealedUnreadable, Msg: "open bot token", Err: te}
}

// UnreadableTokens reports which of the given accounts have a bot token (of their
// current generation) that the store's sealing keys cannot open, in the order given. Each
// token is opened and dropped at once. An account without a token of its listed
// generation (being rotated meanwhile) is not reported.
func (s *Store) UnreadableTokens(ctx context.Context, accounts []Account) ([]UnreadableToken, error) {
	if len(accounts) == 0 {
		return nil, nil
	}
	keys := make([]string, len(accounts))
	for i, a := range accounts {
		keys[i] = a.AccountKey
	}
	var out []UnreadableToken
	err := s.read(ctx, "check account tokens", func(q *dbq.Queries) error {
		var failed error
		q.GetAccountSecret(ctx, keys).QueryRow(func(i int, sec dbq.AccountSecret, err error) {
			switch {
			case failed != nil, errors.Is(err, pgx.ErrNoRows):
				return
			case err != nil:
				failed = err
				return
			case sec.AccountGeneration != accounts[i].Generation:
				return
			}
			if _, err := s.openBotToken(sec.AccountKey, sec.AccountGeneration, sec); err != nil {
				if u, ok := UnreadableTokenOf(err); ok {
					out = append(out, u)
					return
				}
				failed = err
			}
		})
		return failed
	})
	return out, err
}
