package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// The web front end's state (migration 00016): operators' sessions and the links an
// operator hands a bot's owner. Both live in the database, so that they survive a worker
// restart and work on every worker; only the SHA-256 of a session id or a link's token is
// stored (each is 256 random bits).

// Flash kinds: the one-shot message of a session's next page is a success or an error.
const (
	FlashOK    = "ok"
	FlashError = "error"
)

// WebUISession is a new operator session: Token goes in the session cookie (the store
// keeps its hash only), CSRF in every form.
type WebUISession struct {
	Token     sealing.Secret
	CSRF      string
	ExpiresAt time.Time
}

// webToken is the form of a session id or an owner link token: 256 random bits, base64url.
var webToken = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

func newWebToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", &Error{Code: vocab.CodeInternal, Msg: "draw a web token", Err: err}
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func webTokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// NewWebUISession opens an operator session that lasts ttl.
func (s *Store) NewWebUISession(ctx context.Context, now time.Time, ttl time.Duration) (WebUISession, error) {
	now = now.Truncate(time.Microsecond)
	if err := validNow(now); err != nil {
		return WebUISession{}, err
	}
	if ttl <= 0 {
		return WebUISession{}, fail(vocab.CodeInvalidInput, "a session's lifetime must be positive")
	}
	token, err := newWebToken()
	if err != nil {
		return WebUISession{}, err
	}
	csrf, err := newWebToken()
	if err != nil {
		return WebUISession{}, err
	}
	expires := now.Add(ttl)
	err = s.read(ctx, "open web UI session", func(q *dbq.Queries) error {
		return q.InsertWebUISession(ctx, dbq.InsertWebUISessionParams{IDHash: webTokenHash(token), Csrf: csrf, Now: now, ExpiresAt: expires})
	})
	if err != nil {
		return WebUISession{}, err
	}
	return WebUISession{Token: sealing.NewSecret(token), CSRF: csrf, ExpiresAt: expires}, nil
}

// LiveWebUISession is what a request learns of its live session.
type LiveWebUISession struct {
	CSRF string
	// HasFlash reports a one-shot message waiting for the session's next page.
	HasFlash bool
}

// WebUISession returns the live session token names; found is false for an unknown,
// malformed or expired one.
func (s *Store) WebUISession(ctx context.Context, now time.Time, token string) (sess LiveWebUISession, found bool, err error) {
	if !webToken.MatchString(token) {
		return sess, false, nil
	}
	err = s.read(ctx, "read web UI session", func(q *dbq.Queries) error {
		row, err := q.GetWebUISession(ctx, webTokenHash(token), now)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		sess, found = LiveWebUISession{CSRF: row.Csrf, HasFlash: row.HasFlash}, err == nil
		return err
	})
	return sess, found, err
}

// EndWebUISession ends a session (logout); ending an unknown one changes nothing.
func (s *Store) EndWebUISession(ctx context.Context, token string) error {
	if !webToken.MatchString(token) {
		return nil
	}
	return s.read(ctx, "end web UI session", func(q *dbq.Queries) error {
		_, err := q.DeleteWebUISession(ctx, webTokenHash(token))
		return err
	})
}

// SetWebUIFlash sets the one-shot message the session's next page shows (kind FlashOK or
// FlashError).
func (s *Store) SetWebUIFlash(ctx context.Context, token, kind, msg string) error {
	if kind != FlashOK && kind != FlashError {
		return fail(vocab.CodeInvalidInput, "a flash is ok or error")
	}
	if len(msg) > 2000 {
		msg = msg[:2000]
	}
	if !webToken.MatchString(token) {
		return nil
	}
	return s.read(ctx, "set web UI flash", func(q *dbq.Queries) error {
		_, err := q.SetWebUIFlash(ctx, msg, kind, webTokenHash(token))
		return err
	})
}

// TakeWebUIFlash returns the session's one-shot message and clears it (empty when none).
func (s *Store) TakeWebUIFlash(ctx context.Context, token string) (kind, msg string, err error) {
	if !webToken.MatchString(token) {
		return "", "", nil
	}
	err = s.read(ctx, "take web UI flash", func(q *dbq.Queries) error {
		row, err := q.TakeWebUIFlash(ctx, webTokenHash(token))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		kind, msg = row.FlashKind, row.Flash
		return err
	})
	return kind, msg, err
}

// offerID is the form of a login offer's id (the CHECK of login_offers).
var offerID = regexp.MustCompile(`^qo_[A-Za-z0-9_-]{1,128}$`)

// NewOwnerLink makes the token of a link that opens one enrollment (its offer) for the
// bot's owner until expires, the enrollment's own expiry. Only its hash is stored.
func (s *Store) NewOwnerLink(ctx context.Context, now time.Time, offer string, expires time.Time) (sealing.Secret, error) {
	now = now.Truncate(time.Microsecond)
	if err := validNow(now); err != nil {
		return sealing.Secret{}, err
	}
	if !offerID.MatchString(offer) {
		return sealing.Secret{}, fail(vocab.CodeInvalidInput, "an offer id is qo_ and 1 to 128 of A-Z, a-z, 0-9, '_' and '-'")
	}
	if !expires.After(now) {
		return sealing.Secret{}, fail(vocab.CodeInvalidInput, "an owner link must expire after it is made")
	}
	token, err := newWebToken()
	if err != nil {
		return sealing.Secret{}, err
	}
	err = s.read(ctx, "make owner link", func(q *dbq.Queries) error {
		return q.InsertWebUIOwnerLink(ctx, dbq.InsertWebUIOwnerLinkParams{IDHash: webTokenHash(token), OfferID: offer,
			Now: now, ExpiresAt: expires.Truncate(time.Microsecond)})
	})
	if err != nil {
		return sealing.Secret{}, err
	}
	return sealing.NewSecret(token), nil
}

// OwnerLink returns the offer a live owner link opens and when the link expires; found is
// false for an unknown, malformed or expired token.
func (s *Store) OwnerLink(ctx context.Context, now time.Time, token string) (offer string, expires time.Time, found bool, err error) {
	if !webToken.MatchString(token) {
		return "", time.Time{}, false, nil
	}
	err = s.read(ctx, "read owner link", func(q *dbq.Queries) error {
		row, err := q.GetWebUIOwnerLink(ctx, webTokenHash(token), now)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		offer, expires, found = row.OfferID, row.ExpiresAt, err == nil
		return err
	})
	return offer, expires, found, err
}

// ForgetExpiredWebUIState deletes the sessions and owner links that expired before now and
// returns how many.
func (s *Store) ForgetExpiredWebUIState(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	err := s.read(ctx, "forget expired web UI state", func(q *dbq.Queries) (err error) {
		n, err = q.DeleteExpiredWebUIState(ctx, now)
		return err
	})
	return n, err
}
