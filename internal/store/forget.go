package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/internal/store/rules"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// ForgetInput selects a WeChat user's data: PeerID on every account, or on AccountKey only.
type ForgetInput struct {
	PeerID, AccountKey string
	// RequestedBy names the operator who asked (1..200 bytes), recorded in the audit line
	// and on the held replies the erasure drops; never the user.
	RequestedBy string
	// DryRun counts what a run would erase and writes nothing.
	DryRun bool
}

// ForgetReport counts what was erased (or, in a dry run, would be).
type ForgetReport struct {
	Accounts []string // accounts that held the peer's data
	// Messages whose content was erased, attachments' locators (Images) and sealed context
	// tokens deleted, send attempts and held replies whose content was erased, staged media
	// replies deleted, agent sessions closed, quarantined pages deleted.
	Messages, Images, ContextTokens, Attempts, HeldReplies, StagedMedia, Sessions, QuarantinedPages int
	// UnreadableQuarantinedPages counts the quarantined pages of the selected accounts that
	// the store's keys no longer open (their key generation is gone): whether they hold the
	// user's messages cannot be told, and they are unreadable already. They are kept.
	UnreadableQuarantinedPages int
	OpenWindows                []int64 // windows ended by the erasure (their workflows must be ended)
	Windows                    []int64 // every window of the peer (their workflow histories are deleted)
	// MessageKeys are the keys of every message of the peer (the agent workflow of one, if
	// its bot's route started any, is deleted too). A key is a hash of the bot and iLink's
	// message id: it identifies the row, it holds nothing of the message.
	MessageKeys []string
}

// Erased reports whether the report counts anything erased (or, in a dry run, to erase).
func (r ForgetReport) Erased() bool {
	return r.Messages+r.Images+r.ContextTokens+r.Attempts+r.HeldReplies+r.StagedMedia+r.Sessions+
		r.QuarantinedPages+len(r.OpenWindows) > 0
}

// forgetBatchMessages is how many of the peer's messages one erasing transaction takes,
// with what hangs off them (their windows, attempts, held replies, attachments, sessions,
// staged media): short transactions, whatever the conversation's length.
const forgetBatchMessages = 500

// reasonForgotten is the retired reason of a window the erasure ended, the drop reason of
// a held reply it dropped, and the error code of an attempt it failed before transmission.
const reasonForgotten = "forgotten"

// ForgetPeer erases a WeChat user's content (the right to be forgotten): on the selected
// accounts, the payloads of the peer's inbound messages, the sealed locators of their
// attachments, the sealed context tokens of their windows, the content of the replies
// sent or held for them (send attempts, held replies: fingerprints zeroed too), the media
// replies staged in their windows, their MCP offers, and the quarantined pages that hold a
// message from or to them. The peer's open window is cancelled, held replies still
// waiting are dropped, open agent sessions closed, and messages not yet settled settled
// as failed. What stays: each row's keys, statuses, times and counters, which the inbox's
// deduplication (a message iLink hands out again is recognised and stored once) and the
// counters need, and one audit line (who asked, when, the account, the counts: nothing
// about the person).
//
// It works in short transactions of at most forgetBatchMessages messages each, the audit
// line in the last, so a run that fails half-way (the database went away) is run again:
// every step finds only what is left, and a run after a complete one erases nothing and
// reports zero counts (its Windows still lists the peer's windows, whose histories the
// caller deletes idempotently). A dry run reads the same selection and writes nothing.
//
// Refusals, with nothing written: a malformed peer id, account key or operator name
// (invalid_input), an account key that does not exist (account_not_found), and a peer of
// whom nothing is stored on the selected accounts (peer_not_found). A peer whose rows are
// all erased already is found.
func (s *Store) ForgetPeer(ctx context.Context, now time.Time, in ForgetInput) (traced ForgetReport, tracedErr error) {
	ctx, span := startSpan(ctx, "ForgetPeer", in.AccountKey)
	defer func() { endSpan(span, tracedErr, "", "") }()
	now = now.Truncate(time.Microsecond)
	if err := validNow(now); err != nil {
		return ForgetReport{}, err
	}
	if err := ValidPeerID(in.PeerID); err != nil {
		return ForgetReport{}, err
	}
	if err := validAccountFilter(in.AccountKey); err != nil {
		return ForgetReport{}, err
	}
	if in.RequestedBy == "" || len(in.RequestedBy) > 200 || !utf8.ValidString(in.RequestedBy) {
		return ForgetReport{}, fail(vocab.CodeInvalidInput, "the operator's name must be 1..200 bytes of UTF-8")
	}
	var rep ForgetReport
	var accounts []string
	err := s.read(ctx, "forget: find the peer", func(q *dbq.Queries) error {
		if in.AccountKey != "" {
			if _, err := q.GetAccount(ctx, in.AccountKey); err != nil {
				return notFound(err, vocab.CodeAccountNotFound, "unknown account")
			}
		}
		var err error
		accounts, err = q.ForgetAccounts(ctx, in.AccountKey, in.PeerID)
		return err
	})
	if err != nil {
		return ForgetReport{}, err
	}
	quarantined, err := s.quarantinedOfPeer(ctx, in, &rep)
	if err != nil {
		return ForgetReport{}, err
	}
	if err := rules.CheckPeerFound(len(accounts), len(quarantined)); err != nil {
		return ForgetReport{}, ruled(err)
	}
	rep.Accounts = slices.Clone(accounts)
	for _, q := range quarantined {
		if !slices.Contains(rep.Accounts, q.account) {
			rep.Accounts = append(rep.Accounts, q.account)
		}
	}
	slices.Sort(rep.Accounts)
	for _, account := range accounts {
		if err := s.forgetOnAccount(ctx, now, in, account, &rep); err != nil {
			return ForgetReport{}, err
		}
	}
	rep.QuarantinedPages = len(quarantined)
	if in.DryRun {
		return rep, nil
	}
	counts, err := json.Marshal(map[string]int{
		"accounts": len(rep.Accounts), "messages": rep.Messages, "images": rep.Images,
		"context_tokens": rep.ContextTokens, "attempts": rep.Attempts, "held_replies": rep.HeldReplies,
		"staged_media": rep.StagedMedia, "sessions": rep.Sessions, "quarantined_pages": rep.QuarantinedPages,
		"open_windows": len(rep.OpenWindows), "windows": len(rep.Windows),
	})
	if err != nil {
		return ForgetReport{}, &Error{Code: vocab.CodeInternal, Msg: "encode the erasure's counts", Err: err}
	}
	var account *string
	if in.AccountKey != "" {
		account = &in.AccountKey
	}
	ids := make([]string, len(quarantined))
	for i, q := range quarantined {
		ids[i] = q.id
	}
	// The last transaction: the quarantined pages, and the audit line.
	err = s.inTx(ctx, "forget: quarantine and audit", func(q *dbq.Queries) error {
		for chunk := range slices.Chunk(ids, forgetBatchMessages) {
			if _, err := q.DeleteQuarantinedPages(ctx, chunk); err != nil {
				return err
			}
		}
		return q.InsertForgetAudit(ctx, dbq.InsertForgetAuditParams{RequestedAt: now, RequestedBy: in.RequestedBy,
			AccountKey: account, Counts: counts})
	})
	if err != nil {
		return ForgetReport{}, err
	}
	return rep, nil
}

// quarantinedPage is a quarantined page that holds a message from or to the peer.
type quarantinedPage struct{ id, account string }

// quarantinedOfPeer opens every quarantined page of the selected accounts and returns
// those that hold a message from or to the peer (rules.QuarantineHoldsPeer), counting in
// rep the pages the store's keys no longer open. The content is read here and never leaves.
func (s *Store) quarantinedOfPeer(ctx context.Context, in ForgetInput, rep *ForgetReport) ([]quarantinedPage, error) {
	var out []quarantinedPage
	err := s.read(ctx, "forget: quarantined pages", func(q *dbq.Queries) error {
		pages, err := q.ListQuarantinedPages(ctx, in.AccountKey)
		if err != nil {
			return err
		}
		for _, p := range pages {
			row, err := q.GetQuarantinedPage(ctx, p.QuarantineID)
			if errors.Is(err, pgx.ErrNoRows) {
				continue // deleted meanwhile
			}
			if err != nil {
				return err
			}
			content, err := s.keys.Open(sealing.PurposeQuarantinedPage, quarantineBinding(row.QuarantineID, row.AccountKey),
				sealing.Sealed{KeyGeneration: row.KeyGeneration, Nonce: row.Nonce, Ciphertext: row.Ciphertext})
			if err != nil {
				rep.UnreadableQuarantinedPages++
				continue
			}
			if rules.QuarantineHoldsPeer([]byte(content.Reveal()), in.PeerID) {
				out = append(out, quarantinedPage{id: row.QuarantineID, account: row.AccountKey})
			}
		}
		return nil
	})
	return out, err
}

// forgetCounts is what one transaction of the erasure erased (or would).
type forgetCounts struct {
	messages, images, contextTokens, attempts, heldReplies, stagedMedia, sessions int32
	windows                                                                       []int64
}

func (r *ForgetReport) add(c forgetCounts) {
	r.Messages += int(c.messages)
	r.Images += int(c.images)
	r.ContextTokens += int(c.contextTokens)
	r.Attempts += int(c.attempts)
	r.HeldReplies += int(c.heldReplies)
	r.StagedMedia += int(c.stagedMedia)
	r.Sessions += int(c.sessions)
	r.Windows = append(r.Windows, c.windows...)
}

// forgetOnAccount erases the peer's conversation on one account: first its open window
// is ended (cancelled, its sessions closed and its context token deleted, the message it
// leaves settled), then the peer's messages, a batch per transaction.
func (s *Store) forgetOnAccount(ctx context.Context, now time.Time, in ForgetInput, account string, rep *ForgetReport) error {
	var open []int64
	var c forgetCounts
	err := s.forgetTx(ctx, "forget: end the open window", func(q *dbq.Queries) error {
		open, c = nil, forgetCounts{}
		if !in.DryRun {
			// The store's lock order: the account, then its windows. Under the account's
			// lock no page opens another window of the peer.
			if _, err := lockAccount(ctx, q, account); err != nil {
				return err
			}
		}
		var err error
		if open, err = q.ForgetOpenWindow(ctx, account, in.PeerID); err != nil || len(open) == 0 || in.DryRun {
			return err
		}
		// Counted here: RetireWindows would close the sessions and delete the token
		// unseen, and the batches below would find them gone.
		if c.sessions, err = q.ForgetSessions(ctx, open, now, false); err != nil {
			return err
		}
		if c.contextTokens, err = q.ForgetContextTokens(ctx, open, false); err != nil {
			return err
		}
		if _, err = retireWindows(ctx, q, now, open, vocab.WindowCancelled, reasonForgotten); err != nil {
			return err
		}
		_, err = q.SettleUnansweredMessages(ctx, fmt.Sprintf(reasonCancelledUnanswered, reasonForgotten), now, open)
		return err
	})
	if err != nil {
		return err
	}
	rep.OpenWindows = append(rep.OpenWindows, open...)
	rep.add(forgetCounts{sessions: c.sessions, contextTokens: c.contextTokens})

	var keys []string
	err = s.read(ctx, "forget: the peer's messages", func(q *dbq.Queries) error {
		var err error
		keys, err = q.ForgetMessageKeys(ctx, account, in.PeerID)
		return err
	})
	if err != nil {
		return err
	}
	rep.MessageKeys = append(rep.MessageKeys, keys...)
	for batch := range slices.Chunk(keys, forgetBatchMessages) {
		err := s.forgetTx(ctx, "forget: erase messages", func(q *dbq.Queries) error {
			c = forgetCounts{}
			if !in.DryRun {
				if _, err := lockAccount(ctx, q, account); err != nil {
					return err
				}
			}
			return eraseContent(ctx, q, now, erasure{by: in.RequestedBy, reason: reasonForgotten, dryRun: in.DryRun}, batch, &c)
		})
		if err != nil {
			return err
		}
		rep.add(c)
	}
	return nil
}

// erasure says who erases content and why: the drop reason and dropper of the held
// replies it drops, and whether it only counts (a dry run).
type erasure struct {
	by, reason string
	dryRun     bool
}

// eraseContent erases the content of a batch of messages and of what hangs off them, the
// one rule of content erasure that starter forget and retention share, in the order the
// triggers need: the held replies first (dropping one settles its message), the messages
// last (settling them for good). It leaves every row with its keys, statuses, times and
// counters: payloads NULL, erased_at set, fingerprints zeroed, locators, context tokens
// and staged media deleted, sessions closed.
func eraseContent(ctx context.Context, q *dbq.Queries, now time.Time, e erasure, keys []string, c *forgetCounts) error {
	var err error
	if c.heldReplies, err = q.ForgetHeldReplies(ctx, dbq.ForgetHeldRepliesParams{MessageKeys: keys,
		ErasedFingerprint: rules.ErasedFingerprint, DroppedStatuses: rules.ForgetDropsHeld, DropReason: e.reason,
		DroppedBy: e.by, Now: now, DryRun: e.dryRun}); err != nil {
		return err
	}
	if c.attempts, err = q.ForgetAttempts(ctx, dbq.ForgetAttemptsParams{MessageKeys: keys,
		ErasedFingerprint: rules.ErasedFingerprint, Now: now, DryRun: e.dryRun}); err != nil {
		return err
	}
	if c.images, err = q.ForgetImages(ctx, keys, e.dryRun); err != nil {
		return err
	}
	if _, err = q.ForgetMCPOffers(ctx, keys, e.dryRun); err != nil {
		return err
	}
	if _, err = q.ForgetILinkClientOffers(ctx, keys, e.dryRun); err != nil {
		return err
	}
	if c.windows, err = q.ForgetWindows(ctx, keys); err != nil {
		return err
	}
	if c.contextTokens, err = q.ForgetContextTokens(ctx, c.windows, e.dryRun); err != nil {
		return err
	}
	if c.stagedMedia, err = q.ForgetStagedMedia(ctx, c.windows, e.dryRun); err != nil {
		return err
	}
	if c.sessions, err = q.ForgetSessions(ctx, c.windows, now, e.dryRun); err != nil {
		return err
	}
	c.messages, err = q.ForgetMessages(ctx, dbq.ForgetMessagesParams{MessageKeys: keys, Now: now,
		SettledStatuses: rules.ForgetSettlesMessage, DryRun: e.dryRun})
	return err
}

// forgetTx runs one transaction of the erasure, again when PostgreSQL ended it as a
// deadlock or serialization failure (a send or a page of the conversation at the same
// instant locks some of the same rows from the other side).
func (s *Store) forgetTx(ctx context.Context, op string, fn func(q *dbq.Queries) error) error {
	for try := 1; ; try++ {
		err := s.inTx(ctx, op, fn)
		if !isConflict(err) || try == maxConflictTries {
			return err
		}
	}
}
