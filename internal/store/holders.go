package store

import (
	"context"
	"encoding/base64"
	"time"

	"github.com/google/uuid"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// tokenHolder is a kind of named holder of a bearer token (an MCP agent, an iLink client):
// the one rule of how such a token is issued, replaced and revoked. The token is the
// prefix and 256 random bits, shown once; only its SHA-256 is stored.
type tokenHolder struct {
	what     string // "MCP agent"
	prefix   string
	check    func(name string) error
	notFound vocab.Code
	insert   func(ctx context.Context, q *dbq.Queries, name string, hash []byte, now time.Time, by string) error
	reissue  func(ctx context.Context, q *dbq.Queries, name string, hash []byte, now time.Time) (int64, error)
	revoke   func(ctx context.Context, q *dbq.Queries, name string, now time.Time, by string) (int64, error)
	exists   func(ctx context.Context, q *dbq.Queries, name string) error
}

func (h tokenHolder) newToken() (sealing.Secret, error) {
	b, err := randomBytes(32, "an "+h.what+" token")
	if err != nil {
		return sealing.Secret{}, err
	}
	return sealing.NewSecret(h.prefix + base64.RawURLEncoding.EncodeToString(b)), nil
}

// createHolder adds a holder and returns its token. A taken name is the holder's exists
// code (the primary key's, errors.go).
func (s *Store) createHolder(ctx context.Context, h tokenHolder, now time.Time, name, by string) (sealing.Secret, error) {
	now = now.Truncate(time.Microsecond)
	if err := validNow(now); err != nil {
		return sealing.Secret{}, err
	}
	if err := h.check(name); err != nil {
		return sealing.Secret{}, err
	}
	if err := checkChangedBy(by); err != nil {
		return sealing.Secret{}, err
	}
	token, err := h.newToken()
	if err != nil {
		return sealing.Secret{}, err
	}
	if err := s.read(ctx, "create "+h.what, func(q *dbq.Queries) error {
		return h.insert(ctx, q, name, secretHash(token), now, by)
	}); err != nil {
		return sealing.Secret{}, err
	}
	return token, nil
}

// reissueHolder gives a holder a new token, which replaces the old one at once and lifts
// a revocation.
func (s *Store) reissueHolder(ctx context.Context, h tokenHolder, now time.Time, name string) (sealing.Secret, error) {
	now = now.Truncate(time.Microsecond)
	if err := validNow(now); err != nil {
		return sealing.Secret{}, err
	}
	if err := h.check(name); err != nil {
		return sealing.Secret{}, err
	}
	token, err := h.newToken()
	if err != nil {
		return sealing.Secret{}, err
	}
	var n int64
	if err := s.read(ctx, "reissue "+h.what+" token", func(q *dbq.Queries) (err error) {
		n, err = h.reissue(ctx, q, name, secretHash(token), now)
		return err
	}); err != nil {
		return sealing.Secret{}, err
	}
	if n == 0 {
		return sealing.Secret{}, fail(h.notFound, "no %s is named %s", h.what, name)
	}
	return token, nil
}

// revokeHolder revokes a holder's token and reports whether it was live.
func (s *Store) revokeHolder(ctx context.Context, h tokenHolder, now time.Time, name, by string) (bool, error) {
	now = now.Truncate(time.Microsecond)
	if err := validNow(now); err != nil {
		return false, err
	}
	if err := h.check(name); err != nil {
		return false, err
	}
	if err := checkChangedBy(by); err != nil {
		return false, err
	}
	var n int64
	err := s.read(ctx, "revoke "+h.what, func(q *dbq.Queries) error {
		var err error
		if n, err = h.revoke(ctx, q, name, now, by); err != nil || n > 0 {
			return err
		}
		return notFound(h.exists(ctx, q, name), h.notFound, "no "+h.what+" is named "+name)
	})
	return n > 0, err
}

var mcpAgents = tokenHolder{what: "MCP agent", prefix: MCPTokenPrefix, check: CheckMCPAgentName, notFound: vocab.CodeMCPAgentNotFound,
	insert: func(ctx context.Context, q *dbq.Queries, name string, hash []byte, now time.Time, by string) error {
		return q.InsertMCPAgent(ctx, dbq.InsertMCPAgentParams{AgentName: name, TokenHash: hash, Now: now, CreatedBy: by})
	},
	reissue: func(ctx context.Context, q *dbq.Queries, name string, hash []byte, now time.Time) (int64, error) {
		return q.ReissueMCPAgentToken(ctx, hash, now, name)
	},
	revoke: func(ctx context.Context, q *dbq.Queries, name string, now time.Time, by string) (int64, error) {
		return q.RevokeMCPAgent(ctx, &now, &by, name)
	},
	exists: func(ctx context.Context, q *dbq.Queries, name string) error {
		_, err := q.GetMCPAgent(ctx, name)
		return err
	},
}

var iLinkClients = tokenHolder{what: "iLink client", prefix: ILinkClientTokenPrefix, check: CheckILinkClientName,
	notFound: vocab.CodeILinkClientNotFound,
	insert: func(ctx context.Context, q *dbq.Queries, name string, hash []byte, now time.Time, by string) error {
		return q.InsertILinkClient(ctx, dbq.InsertILinkClientParams{ClientName: name, TokenHash: hash, Now: now, CreatedBy: by})
	},
	reissue: func(ctx context.Context, q *dbq.Queries, name string, hash []byte, now time.Time) (int64, error) {
		return q.ReissueILinkClientToken(ctx, hash, now, name)
	},
	revoke: func(ctx context.Context, q *dbq.Queries, name string, now time.Time, by string) (int64, error) {
		return q.RevokeILinkClient(ctx, &now, &by, name)
	},
	exists: func(ctx context.Context, q *dbq.Queries, name string) error {
		_, err := q.GetILinkClient(ctx, name)
		return err
	},
}

// offeredSession is the checked and sealed part of an offer of a message with a hand-off's
// session (to an MCP agent, to an iLink client): the one rule of what such an offer must
// carry, its session token sealed for the purpose and bound to the message key.
type offeredSession struct {
	now     time.Time
	session uuid.UUID
	sealed  sealing.Sealed
}

func (s *Store) offerSession(now time.Time, messageKey, accountKey, sessionID string, token sealing.Secret, purpose sealing.Purpose) (offeredSession, error) {
	now = now.Truncate(time.Microsecond)
	if err := validNow(now); err != nil {
		return offeredSession{}, err
	}
	if err := validMessageKey(messageKey); err != nil {
		return offeredSession{}, err
	}
	if err := validAccountKey(accountKey); err != nil {
		return offeredSession{}, err
	}
	sid, err := uuid.Parse(sessionID)
	if err != nil {
		return offeredSession{}, fail(vocab.CodeInvalidInput, "session id is not a UUID")
	}
	if n := len(token.Reveal()); n < 16 || n > 512 {
		return offeredSession{}, fail(vocab.CodeInvalidInput, "session token must be 16..512 bytes")
	}
	sealed, err := s.keys.Seal(purpose, messageKey, token)
	if err != nil {
		return offeredSession{}, &Error{Code: vocab.CodeInternal, Msg: "seal the session token of an offer", Err: err}
	}
	return offeredSession{now: now, session: sid, sealed: sealed}, nil
}
