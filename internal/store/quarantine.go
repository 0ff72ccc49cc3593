package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// Scopes of a quarantined page.
const (
	// QuarantineWholePage: the page could not be committed; its cursor moved on without it.
	QuarantineWholePage = "page"
	// QuarantineMessages: these messages were left out of a page that was committed.
	QuarantineMessages = "messages"
)

// maxQuarantineBytes bounds the sealed content of one quarantined page (iLink's pages
// are far smaller; the poll's response cap is lower still).
const maxQuarantineBytes = 16 << 20

// QuarantineInput is a page (or some messages of a page) the store could not take as it
// is, for a reason that retrying will not fix.
type QuarantineInput struct {
	AccountKey string
	Generation int32
	// Scope is QuarantineWholePage or QuarantineMessages.
	Scope string
	// Messages counts the messages in Content.
	Messages int
	// Content is the messages as iLink handed them out (JSON); it is stored sealed.
	Content sealing.Secret
	// ErrorCode and ErrorMessage say why the store could not take them (no secret: the
	// store's errors carry none).
	ErrorCode    string
	ErrorMessage string
	// MoveCursor moves the account's cursor from ExpectedCursor to NextCursor in the same
	// transaction (a whole page); the rule is CommitPage's cursor compare-and-set. A
	// NextCursor the store cannot hold leaves the cursor where it was (CursorMoved false).
	MoveCursor     bool
	ExpectedCursor string
	NextCursor     string
}

// QuarantinedPage is a quarantined page as listed (its content stays sealed).
type QuarantinedPage struct {
	QuarantineID string
	AccountKey   string
	Generation   int32
	Messages     int32
	Scope        string
	ErrorCode    string
	ErrorMessage string
	CursorMoved  bool
	CreatedAt    time.Time
}

func quarantineBinding(id, accountKey string) string { return id + "/" + accountKey }

// QuarantinePage stores a page the store could not commit as it is (or the messages of a
// page it left out), sealed, with its error, and moves the account's cursor past it in the
// same transaction, so that the bot goes on at once and nothing iLink handed out is lost.
func (s *Store) QuarantinePage(ctx context.Context, now time.Time, in QuarantineInput) (traced QuarantinedPage, tracedErr error) {
	ctx, span := startSpan(ctx, "QuarantinePage", in.AccountKey)
	defer func() { endSpan(span, tracedErr, "", "") }()
	now = now.Truncate(time.Microsecond)
	if err := validNow(now); err != nil {
		return QuarantinedPage{}, err
	}
	if err := validAccountKey(in.AccountKey); err != nil {
		return QuarantinedPage{}, err
	}
	switch {
	case in.Generation < 1:
		return QuarantinedPage{}, fail(vocab.CodeInvalidInput, "generation is invalid")
	case in.Scope != QuarantineWholePage && in.Scope != QuarantineMessages:
		return QuarantinedPage{}, fail(vocab.CodeInvalidInput, "quarantine scope is invalid")
	case in.Messages < 0 || in.Content.IsZero() || len(in.Content.Reveal()) > maxQuarantineBytes:
		return QuarantinedPage{}, fail(vocab.CodeInvalidInput, "quarantined content is missing or too large")
	case in.MoveCursor && in.Scope != QuarantineWholePage:
		return QuarantinedPage{}, fail(vocab.CodeInvalidInput, "only a whole page moves the cursor")
	}
	move := in.MoveCursor && validCursor(in.NextCursor, "next cursor") == nil
	if move {
		if err := validCursor(in.ExpectedCursor, "expected cursor"); err != nil {
			return QuarantinedPage{}, err
		}
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return QuarantinedPage{}, &Error{Code: vocab.CodeInternal, Msg: "quarantine id", Err: err}
	}
	out := QuarantinedPage{
		QuarantineID: "qp_" + hex.EncodeToString(raw[:]), AccountKey: in.AccountKey, Generation: in.Generation,
		Messages: int32(in.Messages), Scope: in.Scope, ErrorCode: storableText(in.ErrorCode, 64, string(vocab.CodeInternal)),
		ErrorMessage: storableText(in.ErrorMessage, vocab.MaxErrorMessageBytes, ""), CursorMoved: move, CreatedAt: now,
	}
	sealed, err := s.keys.Seal(sealing.PurposeQuarantinedPage, quarantineBinding(out.QuarantineID, in.AccountKey), in.Content)
	if err != nil {
		return QuarantinedPage{}, &Error{Code: vocab.CodeInternal, Msg: "seal quarantined page", Err: err}
	}
	err = s.inTx(ctx, "quarantine page", func(q *dbq.Queries) error {
		if move {
			_, err := batchRow[dbq.Account](q.CompareAndSetCursor(ctx, []dbq.CompareAndSetCursorParams{{
				AccountKey: in.AccountKey, Generation: in.Generation, ExpectedCursor: in.ExpectedCursor,
				NextCursor: in.NextCursor, Now: now,
			}}))
			if errors.Is(err, pgx.ErrNoRows) {
				return cursorFailure(ctx, q, in.AccountKey, in.Generation, in.ExpectedCursor)
			}
			if err != nil {
				return err
			}
		}
		return q.QuarantinePage(ctx, dbq.QuarantinePageParams{
			QuarantineID: out.QuarantineID, AccountKey: in.AccountKey, Generation: in.Generation,
			Messages: out.Messages, Scope: in.Scope, ErrorCode: out.ErrorCode, ErrorMessage: out.ErrorMessage,
			CursorMoved: move, KeyGeneration: sealed.KeyGeneration, Nonce: sealed.Nonce, Ciphertext: sealed.Ciphertext,
			Now: now,
		})
	})
	if err != nil {
		return QuarantinedPage{}, err
	}
	return out, nil
}

// ListQuarantinedPages lists the quarantined pages, oldest first, of one account or
// (accountKey "") of all.
func (s *Store) ListQuarantinedPages(ctx context.Context, accountKey string) ([]QuarantinedPage, error) {
	if err := validAccountFilter(accountKey); err != nil {
		return nil, err
	}
	var out []QuarantinedPage
	err := s.read(ctx, "list quarantined pages", func(q *dbq.Queries) error {
		rows, err := q.ListQuarantinedPages(ctx, accountKey)
		for _, r := range rows {
			out = append(out, QuarantinedPage{
				QuarantineID: r.QuarantineID, AccountKey: r.AccountKey, Generation: r.Generation, Messages: r.Messages,
				Scope: r.Scope, ErrorCode: r.ErrorCode, ErrorMessage: r.ErrorMessage, CursorMoved: r.CursorMoved,
				CreatedAt: r.CreatedAt,
			})
		}
		return err
	})
	return out, err
}

// OpenQuarantinedPage returns a quarantined page's content (the messages as iLink handed
// them out), for an operator who recovers them.
func (s *Store) OpenQuarantinedPage(ctx context.Context, quarantineID string) (QuarantinedPage, sealing.Secret, error) {
	if err := ValidQuarantineID(quarantineID); err != nil {
		return QuarantinedPage{}, sealing.Secret{}, err
	}
	var row dbq.QuarantinedPage
	err := s.read(ctx, "open quarantined page", func(q *dbq.Queries) error {
		var err error
		row, err = q.GetQuarantinedPage(ctx, quarantineID)
		return notFound(err, vocab.CodeInvalidInput, "no such quarantined page")
	})
	if err != nil {
		return QuarantinedPage{}, sealing.Secret{}, err
	}
	content, err := s.keys.Open(sealing.PurposeQuarantinedPage, quarantineBinding(row.QuarantineID, row.AccountKey),
		sealing.Sealed{KeyGeneration: row.KeyGeneration, Nonce: row.Nonce, Ciphertext: row.Ciphertext})
	if err != nil {
		return QuarantinedPage{}, sealing.Secret{}, &Error{Code: vocab.CodeInternal, Msg: "open quarantined page", Err: err}
	}
	return QuarantinedPage{
		QuarantineID: row.QuarantineID, AccountKey: row.AccountKey, Generation: row.Generation, Messages: row.Messages,
		Scope: row.Scope, ErrorCode: row.ErrorCode, ErrorMessage: row.ErrorMessage, CursorMoved: row.CursorMoved,
		CreatedAt: row.CreatedAt,
	}, content, nil
}

// ValidQuarantineID checks the form of a quarantine id: qp_ and 32 lower-case hex digits.
func ValidQuarantineID(id string) error {
	if !strings.HasPrefix(id, "qp_") || len(id) != 35 || !isLowerHex(id[3:]) {
		return fail(vocab.CodeInvalidInput, "quarantine id is invalid (qp_ and 32 hex digits)")
	}
	return nil
}

// storableText makes s storable in a text column: valid UTF-8 without U+0000, at most max
// bytes (cut on a rune boundary), fallback when empty.
func storableText(s string, max int, fallback string) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	if s == "" {
		return fallback
	}
	return s
}
