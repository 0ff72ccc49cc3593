package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// ILinkClientTokenPrefix starts every iLink client token, so that a leaked one is
// recognisable. A bot token of a client's login has iLink's own form instead:
// "<bot id>:<64 hex digits>".
const ILinkClientTokenPrefix = "ilkcl_"

// ILinkNotifyChannel is the PostgreSQL channel an offer to an iLink client notifies, with
// the client's name as payload: the facade's long polls wake on it.
const ILinkNotifyChannel = "ilink_client_offers"

// MaxILinkUploadBytes bounds the bytes of one upload to the facade's CDN.
const MaxILinkUploadBytes = 20 << 20

var (
	iLinkClientName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	iLinkBotID      = regexp.MustCompile(`^[0-9a-f]{12}@im\.bot$`)
	iLinkLoginCode  = regexp.MustCompile(`^[A-Z2-9]{8}$`)
)

// loginCodeAlphabet is the alphabet of a login's code: no 0/O or 1/I to misread.
const loginCodeAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"

// CheckILinkClientName accepts 1 to 63 lower-case letters, digits, '.', '_' and '-',
// starting with a letter or a digit.
func CheckILinkClientName(name string) error {
	if !iLinkClientName.MatchString(name) {
		return fail(vocab.CodeInvalidInput, "an iLink client name is 1 to 63 of a-z, 0-9, '.', '_' and '-', starting with a letter or a digit")
	}
	return nil
}

// CheckILinkLoginCode accepts a login's code: 8 of A-Z and 2-9 (lower case is read as
// upper case by NormalizeILinkLoginCode first).
func CheckILinkLoginCode(code string) error {
	if !iLinkLoginCode.MatchString(code) {
		return fail(vocab.CodeInvalidInput, "a login code is 8 letters and digits, as the login page shows it")
	}
	return nil
}

// NormalizeILinkLoginCode is a typed code as stored (upper case, without spaces or dashes).
func NormalizeILinkLoginCode(code string) string {
	return strings.ToUpper(strings.NewReplacer(" ", "", "-", "").Replace(code))
}

// ILinkClient is an iLink client as an operator sees it: never a token or its hash.
type ILinkClient struct {
	Name          string
	CreatedAt     time.Time
	CreatedBy     string
	TokenIssuedAt time.Time
	// RevokedAt is set while the client's tokens are revoked.
	RevokedAt *time.Time
	RevokedBy string
	// Bots counts the bots routed to the client, Logins its live bot logins, Queued the
	// messages past its slowest cursor.
	Bots, Logins, Queued int64
}

func randomBytes(n int, what string) ([]byte, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return nil, &Error{Code: vocab.CodeInternal, Msg: "draw " + what, Err: err}
	}
	return b, nil
}

func secretHash(token sealing.Secret) []byte { return tokenHash(token.Reveal()) }

// CreateILinkClient adds an iLink client and returns its token, which is shown once: only
// its hash is stored. A taken name is ilink_client_exists.
func (s *Store) CreateILinkClient(ctx context.Context, now time.Time, name, by string) (sealing.Secret, error) {
	return s.createHolder(ctx, iLinkClients, now, name, by)
}

// ReissueILinkClientToken gives an iLink client a new token, which replaces the old one at
// once and lifts a revocation (its bots' tokens are accepted again). An unknown client is
// ilink_client_not_found.
func (s *Store) ReissueILinkClientToken(ctx context.Context, now time.Time, name string) (sealing.Secret, error) {
	return s.reissueHolder(ctx, iLinkClients, now, name)
}

// RevokeILinkClient revokes an iLink client: from now on its token and its bots' tokens
// are refused (the facade answers errcode -14, as iLink answers a dead token). It reports
// whether the client was live; an unknown client is ilink_client_not_found.
func (s *Store) RevokeILinkClient(ctx context.Context, now time.Time, name, by string) (bool, error) {
	return s.revokeHolder(ctx, iLinkClients, now, name, by)
}

// ListILinkClients lists the iLink clients by name.
func (s *Store) ListILinkClients(ctx context.Context) ([]ILinkClient, error) {
	var out []ILinkClient
	err := s.read(ctx, "list iLink clients", func(q *dbq.Queries) error {
		rows, err := q.ListILinkClients(ctx)
		for _, r := range rows {
			c := ILinkClient{Name: r.ClientName, CreatedAt: r.CreatedAt, CreatedBy: r.CreatedBy, TokenIssuedAt: r.TokenIssuedAt,
				RevokedAt: r.RevokedAt, Bots: r.Bots, Logins: r.Logins, Queued: r.Queued}
			if r.RevokedBy != nil {
				c.RevokedBy = *r.RevokedBy
			}
			out = append(out, c)
		}
		return err
	})
	return out, err
}

// ILinkCaller is who a token given to the iLink facade authenticates: a client (its own
// token: all its bots) or one bot of a client's login (BotID and AccountKey set).
type ILinkCaller struct {
	Client     string
	BotID      string
	AccountKey string
	// Revoked: the token is known but refused (the client, or the bot's login, revoked).
	Revoked bool
}

// ILinkCallerByToken resolves a token given to the iLink facade; found is false for a
// token nobody was given. It writes nothing and never logs the token.
func (s *Store) ILinkCallerByToken(ctx context.Context, token sealing.Secret) (c ILinkCaller, found bool, err error) {
	t := token.Reveal()
	if n := len(t); n < 16 || n > 512 {
		return ILinkCaller{}, false, nil
	}
	err = s.read(ctx, "iLink caller by token", func(q *dbq.Queries) error {
		if strings.HasPrefix(t, ILinkClientTokenPrefix) {
			r, err := q.ILinkCallerByClientToken(ctx, secretHash(token))
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			c, found = ILinkCaller{Client: r.ClientName, Revoked: r.Revoked}, err == nil
			return err
		}
		r, err := q.ILinkCallerByBotToken(ctx, secretHash(token))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		c, found = ILinkCaller{Client: r.ClientName, BotID: r.BotID, AccountKey: r.AccountKey, Revoked: r.Revoked}, err == nil
		return err
	})
	return c, found, err
}

// ILinkOfferInput is a message handed to an iLink client, with the hand-off's session.
type ILinkOfferInput struct {
	MessageKey    string
	AccountKey    string
	Client        string
	ReplyWindowID int64
	SessionID     string
	// Token is the session's bearer token, stored sealed (purpose ilink_client_session,
	// bound to the message key): the facade replies under it.
	Token sealing.Secret
}

// ILinkOffer is a message in an iLink client's queue.
type ILinkOffer struct {
	MessageKey    string
	Client        string
	Seq           int64
	AccountKey    string
	ReplyWindowID int64
	SessionID     string
	// Token is the session's bearer token, opened.
	Token     sealing.Secret
	OfferedAt time.Time
	Offers    int32
}

// OfferToILinkClient puts a message in its iLink client's queue, or (a re-offer) gives
// its offer the new session, and wakes the client's long polls (NOTIFY on
// ILinkNotifyChannel, delivered at commit). An unknown client is ilink_client_not_found.
func (s *Store) OfferToILinkClient(ctx context.Context, now time.Time, in ILinkOfferInput) error {
	if err := CheckILinkClientName(in.Client); err != nil {
		return err
	}
	o, err := s.offerSession(now, in.MessageKey, in.AccountKey, in.SessionID, in.Token, sealing.PurposeILinkClientSession)
	if err != nil {
		return err
	}
	return s.inTx(ctx, "offer to iLink client", func(q *dbq.Queries) error {
		n, err := q.UpsertILinkClientOffer(ctx, dbq.UpsertILinkClientOfferParams{MessageKey: in.MessageKey, ClientName: in.Client,
			AccountKey: in.AccountKey, ReplyWindowID: in.ReplyWindowID, SessionID: o.session, KeyGeneration: o.sealed.KeyGeneration,
			Nonce: o.sealed.Nonce, Ciphertext: o.sealed.Ciphertext, Now: o.now})
		if err != nil {
			return err
		}
		if n == 0 {
			return fail(vocab.CodeILinkClientNotFound, "no iLink client is named %s", in.Client)
		}
		return q.NotifyILinkClient(ctx, in.Client)
	})
}

// ILinkClientOffers lists a client's queue past a cursor, in order: of one bot
// (accountKey) or of all its bots (accountKey ""), at most max offers.
func (s *Store) ILinkClientOffers(ctx context.Context, client, accountKey string, after int64, max int32) ([]ILinkOffer, error) {
	if err := CheckILinkClientName(client); err != nil {
		return nil, err
	}
	if err := validAccountFilter(accountKey); err != nil {
		return nil, err
	}
	if after < 0 || max < 1 || max > 1000 {
		return nil, fail(vocab.CodeInvalidInput, "a cursor is not negative and a page holds 1 to 1000 offers")
	}
	var rows []dbq.IlinkClientOffer
	err := s.read(ctx, "list iLink client offers", func(q *dbq.Queries) (err error) {
		rows, err = q.ListILinkClientOffers(ctx, dbq.ListILinkClientOffersParams{ClientName: client, AccountKey: accountKey,
			AfterSeq: after, MaxOffers: max})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]ILinkOffer, 0, len(rows))
	for _, r := range rows {
		o, err := s.iLinkOfferFrom(r)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// GetILinkClientOffer returns a message's offer to an iLink client; found is false when
// the message was never offered to one.
func (s *Store) GetILinkClientOffer(ctx context.Context, messageKey string) (ILinkOffer, bool, error) {
	if err := validMessageKey(messageKey); err != nil {
		return ILinkOffer{}, false, err
	}
	return s.readILinkOffer(ctx, "get iLink client offer", func(q *dbq.Queries) (dbq.IlinkClientOffer, error) {
		return q.GetILinkClientOffer(ctx, messageKey)
	})
}

// LatestILinkClientOffer returns the newest offer to a client of a conversation with a
// user, of one bot (accountKey) or of any (""); found is false when there is none.
func (s *Store) LatestILinkClientOffer(ctx context.Context, client, accountKey, peerID string) (ILinkOffer, bool, error) {
	if err := CheckILinkClientName(client); err != nil {
		return ILinkOffer{}, false, err
	}
	if err := validAccountFilter(accountKey); err != nil {
		return ILinkOffer{}, false, err
	}
	if peerID == "" || len(peerID) > 256 {
		return ILinkOffer{}, false, fail(vocab.CodeInvalidInput, "a peer id is 1 to 256 bytes")
	}
	return s.readILinkOffer(ctx, "latest iLink client offer", func(q *dbq.Queries) (dbq.IlinkClientOffer, error) {
		return q.LatestILinkClientOffer(ctx, client, accountKey, peerID)
	})
}

func (s *Store) readILinkOffer(ctx context.Context, op string, stmt func(q *dbq.Queries) (dbq.IlinkClientOffer, error)) (ILinkOffer, bool, error) {
	return readOptional(ctx, s, op, stmt, s.iLinkOfferFrom)
}

func (s *Store) iLinkOfferFrom(r dbq.IlinkClientOffer) (ILinkOffer, error) {
	token, err := s.keys.Open(sealing.PurposeILinkClientSession, r.MessageKey,
		sealing.Sealed{KeyGeneration: r.KeyGeneration, Nonce: r.Nonce, Ciphertext: r.Ciphertext})
	if err != nil {
		return ILinkOffer{}, &Error{Code: vocab.CodeSealedUnreadable, Msg: "open iLink client session token", Err: err}
	}
	return ILinkOffer{MessageKey: r.MessageKey, Client: r.ClientName, Seq: r.Seq, AccountKey: r.AccountKey, ReplyWindowID: r.ReplyWindowID,
		SessionID: r.SessionID.String(), Token: token, OfferedAt: r.OfferedAt, Offers: r.Offers}, nil
}

// ILinkClientCursor is how far a client (botID "": its own token) has acknowledged its
// queue: 0 before its first acknowledgement.
func (s *Store) ILinkClientCursor(ctx context.Context, client, botID string) (int64, error) {
	var seq int64
	err := s.read(ctx, "iLink client cursor", func(q *dbq.Queries) error {
		var err error
		seq, err = q.GetILinkClientCursor(ctx, client, botID)
		if errors.Is(err, pgx.ErrNoRows) {
			seq, err = 0, nil
		}
		return err
	})
	return seq, err
}

// AckILinkClientCursor moves a client's cursor on to seq (never back).
func (s *Store) AckILinkClientCursor(ctx context.Context, now time.Time, client, botID string, seq int64) error {
	if err := CheckILinkClientName(client); err != nil {
		return err
	}
	if botID != "" && !iLinkBotID.MatchString(botID) {
		return fail(vocab.CodeInvalidInput, "a bot id is 12 hex digits and @im.bot")
	}
	if seq < 0 {
		return fail(vocab.CodeInvalidInput, "a cursor is not negative")
	}
	return s.read(ctx, "ack iLink client cursor", func(q *dbq.Queries) error {
		return q.AckILinkClientCursor(ctx, dbq.AckILinkClientCursorParams{ClientName: client, BotID: botID, AckedSeq: seq,
			Now: now.Truncate(time.Microsecond)})
	})
}

// SweepILinkClients deletes what the facade no longer needs: offers every cursor of their
// client passed whose window closed, logins expired before loginsBefore, and uploads
// made before uploadsBefore. It returns how many rows it deleted.
func (s *Store) SweepILinkClients(ctx context.Context, now, loginsBefore, uploadsBefore time.Time) (int64, error) {
	var total int64
	err := s.read(ctx, "sweep iLink clients", func(q *dbq.Queries) error {
		for _, f := range []func() (int64, error){
			func() (int64, error) { return q.DeleteAckedILinkClientOffers(ctx, now.Truncate(time.Microsecond)) },
			func() (int64, error) {
				return q.DeleteExpiredILinkClientLogins(ctx, loginsBefore.Truncate(time.Microsecond))
			},
			func() (int64, error) {
				return q.DeleteOldILinkClientUploads(ctx, uploadsBefore.Truncate(time.Microsecond))
			},
		} {
			n, err := f()
			if err != nil {
				return err
			}
			total += n
		}
		return nil
	})
	return total, err
}

// ---------------------------------------------------------------------------
// QR logins

// ILinkLogin statuses, as iLink's get_qrcode_status names them (an enrollment's QR login
// has the same).
const (
	ILinkLoginWait      = vocab.EnrollmentWaiting
	ILinkLoginScanned   = vocab.EnrollmentScanned
	ILinkLoginConfirmed = vocab.EnrollmentConfirmed
	ILinkLoginExpired   = vocab.EnrollmentExpired
)

// ILinkLoginStart is a new QR login: the poll key the client polls with (secret: whoever
// holds it collects the bot token) and the code an operator approves it by.
type ILinkLoginStart struct {
	QRCode    sealing.Secret
	Code      string
	ExpiresAt time.Time
}

// StartILinkLogin opens a QR login that lives ttl.
func (s *Store) StartILinkLogin(ctx context.Context, now time.Time, ttl time.Duration) (ILinkLoginStart, error) {
	now = now.Truncate(time.Microsecond)
	if err := validNow(now); err != nil {
		return ILinkLoginStart{}, err
	}
	if ttl <= 0 || ttl > time.Hour {
		return ILinkLoginStart{}, fail(vocab.CodeInvalidInput, "a login lives between 0 and an hour")
	}
	key, err := randomBytes(32, "a QR login key")
	if err != nil {
		return ILinkLoginStart{}, err
	}
	raw, err := randomBytes(8, "a QR login code")
	if err != nil {
		return ILinkLoginStart{}, err
	}
	code := make([]byte, len(raw))
	for i, b := range raw {
		code[i] = loginCodeAlphabet[int(b)%len(loginCodeAlphabet)]
	}
	out := ILinkLoginStart{QRCode: sealing.NewSecret(hex.EncodeToString(key)), Code: string(code), ExpiresAt: now.Add(ttl)}
	err = s.read(ctx, "start iLink login", func(q *dbq.Queries) error {
		return q.InsertILinkClientLogin(ctx, dbq.InsertILinkClientLoginParams{QrcodeHash: secretHash(out.QRCode), Code: out.Code, Now: now,
			ExpiresAt: out.ExpiresAt})
	})
	if err != nil {
		return ILinkLoginStart{}, err
	}
	return out, nil
}

// ILinkLoginState is what a login's poll learns: its status and, once confirmed (the
// first poll after the approval only), the bot it made.
type ILinkLoginState struct {
	Status string
	// BotID, BotToken, AccountKey and Client are set on confirmation.
	BotID      string
	BotToken   sealing.Secret
	AccountKey string
	Client     string
}

// PollILinkLogin answers a login's poll: wait, scaned, expired, or confirmed with a new
// bot (its id and token the facade's own, bound to the approved account) issued to the
// first poll after the approval; a later poll finds the login spent (expired). An unknown
// poll key is expired, as iLink answers a stale QR code.
func (s *Store) PollILinkLogin(ctx context.Context, now time.Time, qrcode sealing.Secret) (ILinkLoginState, error) {
	now = now.Truncate(time.Microsecond)
	if err := validNow(now); err != nil {
		return ILinkLoginState{}, err
	}
	if n := len(qrcode.Reveal()); n < 16 || n > 512 {
		return ILinkLoginState{Status: ILinkLoginExpired}, nil
	}
	hash := secretHash(qrcode)
	var out ILinkLoginState
	err := s.inTx(ctx, "poll iLink login", func(q *dbq.Queries) error {
		l, err := q.GetILinkClientLogin(ctx, hash)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			out.Status = ILinkLoginExpired
			return nil
		case err != nil:
			return err
		case l.CollectedAt != nil:
			out.Status = ILinkLoginExpired
			return nil
		case l.ApprovedAt == nil && !now.Before(l.ExpiresAt):
			out.Status = ILinkLoginExpired
			return nil
		case l.ApprovedAt == nil && l.ScannedAt != nil:
			out.Status = ILinkLoginScanned
			return nil
		case l.ApprovedAt == nil:
			out.Status = ILinkLoginWait
			return nil
		}
		n, err := q.CollectILinkClientLogin(ctx, &now, hash)
		if err != nil {
			return err
		}
		if n == 0 {
			out.Status = ILinkLoginExpired // another poll collected it meanwhile
			return nil
		}
		out, err = insertILinkBot(ctx, q, now, *l.ClientName, *l.AccountKey)
		return err
	})
	if err != nil {
		return ILinkLoginState{}, err
	}
	return out, nil
}

// insertILinkBot makes a bot of a client bound to an account: an id and a token of iLink's
// forms, the facade's own (only the token's hash is stored).
func insertILinkBot(ctx context.Context, q *dbq.Queries, now time.Time, client, accountKey string) (ILinkLoginState, error) {
	idb, err := randomBytes(6, "a bot id")
	if err != nil {
		return ILinkLoginState{}, err
	}
	secret, err := randomBytes(32, "a bot token")
	if err != nil {
		return ILinkLoginState{}, err
	}
	out := ILinkLoginState{Status: ILinkLoginConfirmed, BotID: hex.EncodeToString(idb) + "@im.bot", AccountKey: accountKey, Client: client}
	out.BotToken = sealing.NewSecret(out.BotID + ":" + hex.EncodeToString(secret))
	return out, q.InsertILinkClientBot(ctx, dbq.InsertILinkClientBotParams{BotID: out.BotID, ClientName: client, AccountKey: accountKey,
		TokenHash: secretHash(out.BotToken), Now: now})
}

// IssueILinkBot gives a client a bot bound to one of the installation's accounts without a
// QR login (for a client configured by hand), routing the account to the client first
// unless it is already. An unknown account is account_not_found, an unknown client
// ilink_client_not_found.
func (s *Store) IssueILinkBot(ctx context.Context, now time.Time, client, accountKey, by string) (ILinkLoginState, error) {
	now = now.Truncate(time.Microsecond)
	if err := validNow(now); err != nil {
		return ILinkLoginState{}, err
	}
	if err := CheckILinkClientName(client); err != nil {
		return ILinkLoginState{}, err
	}
	if err := validAccountKey(accountKey); err != nil {
		return ILinkLoginState{}, err
	}
	if err := checkChangedBy(by); err != nil {
		return ILinkLoginState{}, err
	}
	if err := s.routeToILinkClient(ctx, now, client, accountKey, by); err != nil {
		return ILinkLoginState{}, err
	}
	var out ILinkLoginState
	err := s.read(ctx, "issue iLink bot", func(q *dbq.Queries) (err error) {
		out, err = insertILinkBot(ctx, q, now, client, accountKey)
		return err
	})
	if err != nil {
		return ILinkLoginState{}, err
	}
	return out, nil
}

// routeToILinkClient routes an account to a client (audited as any route change) unless it
// is already.
func (s *Store) routeToILinkClient(ctx context.Context, now time.Time, client, accountKey, by string) error {
	r, found, err := s.GetRoute(ctx, accountKey)
	if err != nil && CodeOf(err) != vocab.CodeSealedUnreadable {
		return err
	}
	if found && r.Kind == vocab.RouteILink && r.ILinkClient == client {
		return nil
	}
	_, err = s.SetRoute(ctx, now, RouteInput{AccountKey: accountKey, Kind: vocab.RouteILink, ILinkClient: client, By: by})
	return err
}

// ScanILinkLogin records that a login's approval page was opened (the client then shows
// "scanned"); it reports whether a waiting login has that code.
func (s *Store) ScanILinkLogin(ctx context.Context, now time.Time, code string) (bool, error) {
	code = NormalizeILinkLoginCode(code)
	if err := CheckILinkLoginCode(code); err != nil {
		return false, err
	}
	var n int64
	err := s.read(ctx, "scan iLink login", func(q *dbq.Queries) (err error) {
		now := now.Truncate(time.Microsecond)
		n, err = q.ScanILinkClientLogin(ctx, &now, code)
		return err
	})
	return n > 0, err
}

// ApproveILinkLogin approves a waiting login for a client and one of the installation's
// accounts: the client's next poll of it collects a bot bound to the account. The account
// is routed to the client first (audited as any route change) unless it is already. An
// unknown, expired or approved code is ilink_login_not_found.
func (s *Store) ApproveILinkLogin(ctx context.Context, now time.Time, code, client, accountKey, by string) error {
	now = now.Truncate(time.Microsecond)
	code = NormalizeILinkLoginCode(code)
	if err := validNow(now); err != nil {
		return err
	}
	if err := CheckILinkLoginCode(code); err != nil {
		return err
	}
	if err := CheckILinkClientName(client); err != nil {
		return err
	}
	if err := validAccountKey(accountKey); err != nil {
		return err
	}
	if err := checkChangedBy(by); err != nil {
		return err
	}
	if err := s.read(ctx, "find iLink login", func(q *dbq.Queries) error {
		l, err := q.GetILinkClientLoginByCode(ctx, code)
		if err != nil {
			return notFound(err, vocab.CodeILinkLoginNotFound, "no login waits under code "+code)
		}
		if l.ApprovedAt != nil || !now.Before(l.ExpiresAt) {
			return fail(vocab.CodeILinkLoginNotFound, "the login of code %s was approved already or expired", code)
		}
		return nil
	}); err != nil {
		return err
	}
	if err := s.routeToILinkClient(ctx, now, client, accountKey, by); err != nil {
		return err
	}
	var n int64
	err := s.read(ctx, "approve iLink login", func(q *dbq.Queries) (err error) {
		n, err = q.ApproveILinkClientLogin(ctx, dbq.ApproveILinkClientLoginParams{Now: &now, ApprovedBy: &by, ClientName: &client,
			AccountKey: &accountKey, Code: code})
		return err
	})
	if err == nil && n == 0 {
		err = fail(vocab.CodeILinkLoginNotFound, "the login of code %s was approved already or expired", code)
	}
	return err
}

// ILinkLoginWaiting is a login that waits for an operator's approval.
type ILinkLoginWaiting struct {
	Code      string
	CreatedAt time.Time
	ExpiresAt time.Time
	Scanned   bool
}

// ListILinkLogins lists the logins waiting for an approval, oldest first.
func (s *Store) ListILinkLogins(ctx context.Context, now time.Time) ([]ILinkLoginWaiting, error) {
	var out []ILinkLoginWaiting
	err := s.read(ctx, "list iLink logins", func(q *dbq.Queries) error {
		rows, err := q.ListILinkClientLogins(ctx, now.Truncate(time.Microsecond))
		for _, r := range rows {
			out = append(out, ILinkLoginWaiting{Code: r.Code, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, Scanned: r.ScannedAt != nil})
		}
		return err
	})
	return out, err
}

// ---------------------------------------------------------------------------
// Uploads to the facade's CDN

// ILinkUpload is media a client uploaded for a reply.
type ILinkUpload struct {
	ID         string
	Client     string
	AccountKey string
	MediaType  int32
	Data       []byte
}

// StageILinkUpload stores (sealed) the plaintext of media a client uploaded and returns
// its id, the download reference the client sends it by.
func (s *Store) StageILinkUpload(ctx context.Context, now time.Time, client, accountKey string, mediaType int32, data []byte) (string, error) {
	now = now.Truncate(time.Microsecond)
	if err := validNow(now); err != nil {
		return "", err
	}
	if err := CheckILinkClientName(client); err != nil {
		return "", err
	}
	if err := validAccountKey(accountKey); err != nil {
		return "", err
	}
	switch {
	case mediaType < 1 || mediaType > 4:
		return "", fail(vocab.CodeInvalidInput, "media type is 1 to 4")
	case len(data) == 0 || len(data) > MaxILinkUploadBytes:
		return "", fail(vocab.CodeInvalidInput, "an upload holds 1 to %d bytes", MaxILinkUploadBytes)
	}
	id := uuid.New()
	sealed, err := s.keys.Seal(sealing.PurposeILinkClientUpload, id.String(), sealing.NewSecret(string(data)))
	if err != nil {
		return "", &Error{Code: vocab.CodeInternal, Msg: "seal an upload", Err: err}
	}
	err = s.read(ctx, "stage iLink upload", func(q *dbq.Queries) error {
		return q.InsertILinkClientUpload(ctx, dbq.InsertILinkClientUploadParams{UploadID: id, ClientName: client, AccountKey: accountKey,
			MediaType: mediaType, KeyGeneration: sealed.KeyGeneration, Nonce: sealed.Nonce, Ciphertext: sealed.Ciphertext, Now: now})
	})
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

// GetILinkUpload returns an upload with its bytes; found is false for an unknown (or
// swept) id.
func (s *Store) GetILinkUpload(ctx context.Context, id string) (ILinkUpload, bool, error) {
	uid, err := uuid.Parse(id)
	if err != nil {
		return ILinkUpload{}, false, nil
	}
	return readOptional(ctx, s, "get iLink upload", func(q *dbq.Queries) (dbq.IlinkClientUpload, error) {
		return q.GetILinkClientUpload(ctx, uid)
	}, func(row dbq.IlinkClientUpload) (ILinkUpload, error) {
		data, err := s.keys.Open(sealing.PurposeILinkClientUpload, id, sealing.Sealed{KeyGeneration: row.KeyGeneration, Nonce: row.Nonce,
			Ciphertext: row.Ciphertext})
		if err != nil {
			return ILinkUpload{}, &Error{Code: vocab.CodeSealedUnreadable, Msg: "open an upload", Err: err}
		}
		return ILinkUpload{ID: id, Client: row.ClientName, AccountKey: row.AccountKey, MediaType: row.MediaType, Data: []byte(data.Reveal())}, nil
	})
}

// ListenILinkOffers calls wake with the client's name of every offer to an iLink client
// committed from now on (NOTIFY on ILinkNotifyChannel), until ctx ends or the listening
// connection fails (returned; the caller listens again). It listens on a connection of its
// own, outside the pool, so that the pool's bound stays the bound of the store's work.
// Behind a pooler in transaction mode nothing arrives, and the facade's polls find offers
// on their own.
func (s *Store) ListenILinkOffers(ctx context.Context, wake func(client string)) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return wrapDB("listen for iLink offers", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+ILinkNotifyChannel); err != nil {
		return wrapDB("listen for iLink offers", err)
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return wrapDB("wait for iLink offers", err)
		}
		wake(n.Payload)
	}
}
