package store

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/db/dbq"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// PageInput is one getupdates page to commit with its cursor.
type PageInput struct {
	AccountKey string
	Generation int32
	// ExpectedCursor is the cursor the page was fetched with; NextCursor the one it returned.
	ExpectedCursor string
	NextCursor     string
	Entries        []PageEntry
	// DeferredBefore, when set, defers messages sent before it: they are stored and
	// windowed but not dispatched (backlog at first start or after long downtime).
	DeferredBefore *time.Time
}

// PageEntry is one inbound message of a page.
type PageEntry struct {
	ProviderMessageID string
	PeerID            string
	SentAt            time.Time
	// ProviderSeq is iLink's message sequence, when the message carried one.
	ProviderSeq *int64
	// Cursor is the cursor of the page the message came in (must equal ExpectedCursor).
	Cursor       string
	ContextToken sealing.Secret
	Payload      Payload
	// Images are the CDN locators of the payload's image attachments, by position.
	Images []ImageLocator
}

// ImageLocator is the CDN locator of one inbound image.
type ImageLocator struct {
	Position int32
	Locator  sealing.Secret
}

// PageResult is the outcome of a page commit.
type PageResult struct {
	Cursor string
	// Inserted counts new messages; Duplicates counts entries already in the inbox.
	Inserted, Duplicates int
	// Absorbed counts messages merged into the deliverable one (or absorbed because an
	// open window is newer); Deferred counts new messages that were deferred.
	Absorbed, Deferred int
	// Deliverable is the message to hand to an agent, if any.
	Deliverable *Delivery
	// OpenedWindowID is the window this page opened that is still open (0 if none); it
	// needs a window workflow even when its message was deferred.
	OpenedWindowID int64
	// RetiredWindowIDs are windows that existed before this page and were superseded.
	RetiredWindowIDs []int64
}

// Delivery names the deliverable message of a page and its window.
type Delivery struct {
	MessageKey    string
	ReplyWindowID int64
}

func (s *Store) validatePage(now time.Time, in PageInput) error {
	if err := validNow(now); err != nil {
		return err
	}
	if err := validAccountKey(in.AccountKey); err != nil {
		return err
	}
	if in.Generation < 1 {
		return fail(CodeInvalidInput, "generation must be positive")
	}
	if err := validCursor(in.ExpectedCursor, "expected cursor"); err != nil {
		return err
	}
	if err := validCursor(in.NextCursor, "next cursor"); err != nil {
		return err
	}
	if len(in.Entries) > maxPageEntries {
		return fail(CodeInvalidInput, "page has more than %d entries", maxPageEntries)
	}
	for i := range in.Entries {
		if err := s.validateEntry(now, in, &in.Entries[i]); err != nil {
			var se *Error
			if errors.As(err, &se) {
				return &Error{Code: se.Code, Msg: "entry " + strconv.Itoa(i) + ": " + se.Msg}
			}
			return err
		}
	}
	return nil
}

func (s *Store) validateEntry(now time.Time, in PageInput, e *PageEntry) error {
	if err := providerIdentity(e.ProviderMessageID, "provider message id"); err != nil {
		return err
	}
	if err := providerIdentity(e.PeerID, "peer id"); err != nil {
		return err
	}
	if e.Cursor != in.ExpectedCursor {
		return fail(CodeCursorConflict, "message cursor does not match its page")
	}
	if e.ContextToken.IsZero() || len(e.ContextToken.Reveal()) > 8192 {
		return fail(CodeInvalidInput, "context token is missing or too long")
	}
	if e.ProviderSeq != nil && *e.ProviderSeq < 0 {
		return fail(CodeInvalidInput, "provider sequence is negative")
	}
	if e.SentAt.Year() < 2000 {
		return fail(CodeInvalidInput, "sent-at is invalid")
	}
	if e.SentAt.After(now.Add(s.limits.MaxClockSkew)) {
		return fail(CodeInvalidInput, "sent-at is too far in the future")
	}
	if len(e.Payload.Summary) > maxSummaryBytes || !utf8.ValidString(e.Payload.Summary) {
		return fail(CodeInvalidInput, "summary is too long or not UTF-8")
	}
	if len(e.Payload.Attachments) > maxAttachments {
		return fail(CodeInvalidInput, "too many attachments")
	}
	imagePositions := map[int32]bool{}
	for _, a := range e.Payload.Attachments {
		switch a.Kind {
		case "image":
			if a.Position < 0 || a.Position >= maxSendIndex || imagePositions[int32(a.Position)] {
				return fail(CodeInvalidInput, "image attachment positions are inconsistent")
			}
			imagePositions[int32(a.Position)] = true
		case "file", "voice", "video":
			if a.Size < 0 {
				return fail(CodeInvalidInput, "attachment size is negative")
			}
		default:
			return fail(CodeInvalidInput, "attachment kind is invalid")
		}
		if len(a.Name) > 1024 || len(a.Text) > maxSummaryBytes || !utf8.ValidString(a.Name) || !utf8.ValidString(a.Text) {
			return fail(CodeInvalidInput, "attachment descriptor is too long or not UTF-8")
		}
	}
	if len(e.Images) != len(imagePositions) {
		return fail(CodeInvalidInput, "image locator count is inconsistent with image attachments")
	}
	seen := map[int32]bool{}
	for _, img := range e.Images {
		if !imagePositions[img.Position] || seen[img.Position] {
			return fail(CodeInvalidInput, "image locator position is inconsistent")
		}
		seen[img.Position] = true
		if img.Locator.IsZero() || len(img.Locator.Reveal()) > 8192 {
			return fail(CodeInvalidInput, "image locator is missing or too long")
		}
	}
	e.SentAt = e.SentAt.Truncate(time.Microsecond)
	return nil
}

type insertedEntry struct {
	key      string
	seq      int64
	entry    *PageEntry
	order    orderKey
	deferred bool
	windowID int64
}

// CommitPage commits one getupdates page atomically with its cursor (design.md §3,
// "Polling and page commit"): the whole page is validated first; new messages enter the
// deduplicated inbox, each gets a reply window, the newest message of the conversation
// owns the open window and is the only deliverable one, every other new message and the
// earlier undelivered backlog are merged into it, and the cursor moves by compare-and-set.
func (s *Store) CommitPage(ctx context.Context, now time.Time, in PageInput) (PageResult, error) {
	now = now.Truncate(time.Microsecond)
	if err := s.validatePage(now, in); err != nil {
		return PageResult{}, err
	}
	var out PageResult
	err := s.inTx(ctx, "commit page", func(q *dbq.Queries) error {
		var err error
		out, err = s.commitPage(ctx, q, now, in)
		return err
	})
	if err != nil {
		return PageResult{}, err
	}
	return out, nil
}

func (s *Store) commitPage(ctx context.Context, q *dbq.Queries, now time.Time, in PageInput) (PageResult, error) {
	account, err := q.LockAccount(ctx, in.AccountKey)
	if err != nil {
		return PageResult{}, notFound(err, CodeAccountNotFound, "unknown account")
	}
	if err := checkPollable(account, in.Generation, in.ExpectedCursor); err != nil {
		return PageResult{}, err
	}
	for i := range in.Entries {
		if in.Entries[i].PeerID != account.OwnerPeerID {
			return PageResult{}, fail(CodePairMismatch, "entry %d: message does not belong to the account's owner", i)
		}
	}

	res := PageResult{Cursor: in.NextCursor}
	var inserted []*insertedEntry
	pageWindows := map[int64]bool{} // windows opened by this page
	for i := range in.Entries {
		e := &in.Entries[i]
		key := MessageKey(in.AccountKey, e.ProviderMessageID)
		deferred := in.DeferredBefore != nil && e.SentAt.Before(*in.DeferredBefore)
		payload, err := json.Marshal(e.Payload)
		if err != nil {
			return PageResult{}, fail(CodeInvalidInput, "entry %d: payload does not encode", i)
		}
		seq, err := q.InsertInboundMessage(ctx, dbq.InsertInboundMessageParams{
			MessageKey: key, AccountKey: in.AccountKey, PeerID: e.PeerID, ProviderMessageID: e.ProviderMessageID,
			SentAt: e.SentAt, Deferred: deferred, Payload: payload, Now: now,
		})
		if errors.Is(err, pgx.ErrNoRows) {
			if err := checkDuplicate(ctx, q, key, in.AccountKey, e); err != nil {
				return PageResult{}, err
			}
			res.Duplicates++
			continue
		}
		if err != nil {
			return PageResult{}, err
		}
		ie := &insertedEntry{key: key, seq: seq, entry: e, deferred: deferred,
			order: orderKey{providerSeq: e.ProviderSeq, sentAt: e.SentAt, providerID: e.ProviderMessageID, pageIndex: i}}
		for _, img := range e.Images {
			if err := s.insertImage(ctx, q, now, key, img.Position, in.AccountKey, e.PeerID, img.Locator); err != nil {
				return PageResult{}, err
			}
		}
		retired, err := s.insertWindow(ctx, q, now, account, ie, pageWindows)
		if err != nil {
			return PageResult{}, err
		}
		res.RetiredWindowIDs = append(res.RetiredWindowIDs, retired...)
		inserted = append(inserted, ie)
		if deferred {
			res.Deferred++
		}
	}
	res.Inserted = len(inserted)

	n, err := q.CompareAndSetCursor(ctx, dbq.CompareAndSetCursorParams{
		AccountKey: in.AccountKey, Generation: in.Generation, ExpectedCursor: in.ExpectedCursor,
		NextCursor: in.NextCursor, Now: now,
	})
	if err != nil {
		return PageResult{}, err
	}
	if n != 1 {
		return PageResult{}, cursorFailure(ctx, q, in.AccountKey, in.Generation, in.ExpectedCursor)
	}
	if len(inserted) == 0 {
		return res, nil
	}

	var deliverable *insertedEntry
	if open, err := q.LockOpenWindow(ctx, in.AccountKey, account.OwnerPeerID); err == nil {
		for _, ie := range inserted {
			if ie.key == open.SourceMessageKey {
				deliverable = ie
				res.OpenedWindowID = open.ReplyWindowID
			}
		}
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return PageResult{}, err
	}
	var others []string
	for _, ie := range inserted {
		if ie != deliverable {
			others = append(others, ie.key)
		}
	}
	absorbed, err := q.AbsorbMessages(ctx, now, others)
	if err != nil {
		return PageResult{}, err
	}
	res.Absorbed = int(absorbed)
	if deliverable == nil {
		if _, err := q.DeleteImagesOfMessages(ctx, others); err != nil {
			return PageResult{}, err
		}
		return res, nil
	}
	merged, err := s.mergeIntoDeliverable(ctx, q, now, in.AccountKey, account.OwnerPeerID, deliverable, inserted)
	if err != nil {
		return PageResult{}, err
	}
	res.Absorbed += merged
	if !deliverable.deferred {
		res.Deliverable = &Delivery{MessageKey: deliverable.key, ReplyWindowID: deliverable.windowID}
	}
	return res, nil
}

// checkDuplicate accepts an entry already in the inbox only when it matches the stored
// identity and already owns a reply window.
func checkDuplicate(ctx context.Context, q *dbq.Queries, key, accountKey string, e *PageEntry) error {
	stored, err := q.GetInboundMessage(ctx, key)
	if err != nil {
		return notFound(err, CodeDedupeInvariant, "duplicate message is missing from the inbox")
	}
	if stored.AccountKey != accountKey || stored.ProviderMessageID != e.ProviderMessageID || stored.PeerID != e.PeerID {
		return fail(CodeDedupeInvariant, "duplicate message conflicts with the stored identity")
	}
	if _, err := q.GetReplyWindowBySource(ctx, key); err != nil {
		return notFound(err, CodeDedupeInvariant, "duplicate message has no reply window")
	}
	return nil
}

func (s *Store) insertImage(ctx context.Context, q *dbq.Queries, now time.Time, key string, position int32, accountKey, peer string, locator sealing.Secret) error {
	sealed, err := s.keys.Seal(sealing.PurposeImageLocator, imageBinding(key, position), locator)
	if err != nil {
		return &Error{Code: CodeInternal, Msg: "seal image locator", Err: err}
	}
	return q.InsertInboundImage(ctx, dbq.InsertInboundImageParams{
		MessageKey: key, Position: position, AccountKey: accountKey, PeerID: peer,
		KeyGeneration: sealed.KeyGeneration, Nonce: sealed.Nonce, Ciphertext: sealed.Ciphertext, CreatedAt: now,
	})
}

// insertWindow gives a new message its reply window. The window opens when the
// conversation has no open window or the message is newer than the open window's; the
// window it replaces is retired as superseded. Otherwise it is born superseded, without a
// stored context token. It returns the pre-existing windows it retired.
func (s *Store) insertWindow(ctx context.Context, q *dbq.Queries, now time.Time, account dbq.Account, ie *insertedEntry, pageWindows map[int64]bool) ([]int64, error) {
	e := ie.entry
	opens := true
	var retired []int64
	cur, err := q.LockOpenWindow(ctx, account.AccountKey, e.PeerID)
	switch {
	case err == nil:
		curKey := orderKey{providerSeq: cur.ProviderSeq, sentAt: cur.IssuedAt, providerID: cur.ProviderMessageID}
		opens = supersedes(ie.order, curKey, pageWindows[cur.ReplyWindowID])
		if opens {
			if err := retireWindow(ctx, q, now, cur.ReplyWindowID, WindowSuperseded, "superseded_by_newer_message"); err != nil {
				return nil, err
			}
			if !pageWindows[cur.ReplyWindowID] {
				retired = append(retired, cur.ReplyWindowID)
			}
		}
	case errors.Is(err, pgx.ErrNoRows):
	default:
		return nil, err
	}
	issued := e.SentAt
	base := issued
	if now.Before(base) {
		base = now
	}
	state := WindowSuperseded
	if opens {
		state = WindowOpen
	}
	id, err := q.InsertReplyWindow(ctx, dbq.InsertReplyWindowParams{
		AccountKey: account.AccountKey, PeerID: e.PeerID, AccountGeneration: account.Generation,
		SourceMessageKey: ie.key, SourceInboxSeq: ie.seq, ProviderMessageID: e.ProviderMessageID,
		ProviderSeq: e.ProviderSeq, IssuedAt: issued, ExpiresAt: base.Add(s.limits.WindowLifetime),
		MaxSends: s.limits.MaxSends, State: state, Now: now,
	})
	if err != nil {
		return nil, err
	}
	ie.windowID = id
	pageWindows[id] = true
	if opens {
		sealed, err := s.keys.Seal(sealing.PurposeContextToken, contextTokenBinding(ie.key), e.ContextToken)
		if err != nil {
			return nil, &Error{Code: CodeInternal, Msg: "seal context token", Err: err}
		}
		if err := q.InsertWindowSecret(ctx, dbq.InsertWindowSecretParams{
			ReplyWindowID: id, KeyGeneration: sealed.KeyGeneration, Nonce: sealed.Nonce,
			Ciphertext: sealed.Ciphertext, UpdatedAt: now,
		}); err != nil {
			return nil, err
		}
	}
	return retired, nil
}

// mergeIntoDeliverable merges the page's other new messages and the conversation's
// earlier undelivered backlog into the deliverable message: summaries (backlog in inbox
// order, then this page in provider order, capped), and the latest images (the
// deliverable's own first) renumbered 0..3. It returns how many backlog messages it absorbed.
func (s *Store) mergeIntoDeliverable(ctx context.Context, q *dbq.Queries, now time.Time, accountKey, peer string,
	d *insertedEntry, inserted []*insertedEntry) (int, error) {
	backlog, err := q.ReceivedBacklog(ctx, accountKey, peer, d.seq)
	if err != nil {
		return 0, err
	}
	var backlogKeys []string
	var units []mergeUnit
	droppedImages := 0 // images earlier merges involved but did not keep
	backlogImages := map[string]int{}
	for _, b := range backlog {
		backlogKeys = append(backlogKeys, b.MessageKey)
		var p Payload
		if err := json.Unmarshal(b.Payload, &p); err != nil {
			return 0, &Error{Code: CodeInternal, Msg: "stored payload of " + b.MessageKey + " does not decode", Err: err}
		}
		units = append(units, unitOf(p))
		backlogImages[b.MessageKey] = p.ImagesInvolved
	}
	absorbed, err := q.AbsorbMessages(ctx, now, backlogKeys)
	if err != nil {
		return 0, err
	}
	page := append([]*insertedEntry(nil), inserted...)
	sortEntries(page)
	for _, ie := range page {
		units = append(units, unitOf(ie.entry.Payload))
	}

	mergeKeys := append([]string(nil), backlogKeys...)
	for _, ie := range inserted {
		mergeKeys = append(mergeKeys, ie.key)
	}
	images, err := q.ImagesOfMessages(ctx, mergeKeys, d.key)
	if err != nil {
		return 0, err
	}
	if len(units) <= 1 && len(images) == 0 {
		return int(absorbed), nil
	}
	held := map[string]int{}
	for _, img := range images {
		held[img.MessageKey]++
	}
	for key, involved := range backlogImages {
		if involved > held[key] {
			droppedImages += involved - held[key]
		}
	}
	kept := images
	if len(kept) > maxKeptImages {
		kept = kept[:maxKeptImages]
	}
	opened := make([]sealing.Secret, len(kept))
	for i, img := range kept {
		opened[i], err = s.keys.Open(sealing.PurposeImageLocator, imageBinding(img.MessageKey, img.Position),
			sealing.Sealed{KeyGeneration: img.KeyGeneration, Nonce: img.Nonce, Ciphertext: img.Ciphertext})
		if err != nil {
			return 0, &Error{Code: CodeInternal, Msg: "open image locator for merge", Err: err}
		}
	}
	if _, err := q.DeleteImagesOfMessages(ctx, mergeKeys); err != nil {
		return 0, err
	}
	involved := len(images) + droppedImages
	mt := mergeTexts(units, involved, s.limits.MaxMergedSummaryBytes)
	merged := Payload{Summary: mt.summary, Body: mt.body, Merged: mt.messages, Omitted: mt.omitted}
	if involved > len(kept) {
		merged.ImagesInvolved = involved
	}
	for _, a := range d.entry.Payload.Attachments {
		if a.Kind != "image" {
			merged.Attachments = append(merged.Attachments, a)
		}
	}
	for i, loc := range opened {
		if err := s.insertImage(ctx, q, now, d.key, int32(i), accountKey, peer, loc); err != nil {
			return 0, err
		}
		merged.Attachments = append(merged.Attachments, Attachment{Kind: "image", Position: i})
	}
	body, err := json.Marshal(merged)
	if err != nil {
		return 0, &Error{Code: CodeInternal, Msg: "encode merged payload", Err: err}
	}
	if _, err := q.SetMessagePayload(ctx, body, now, d.key); err != nil {
		return 0, err
	}
	return int(absorbed), nil
}

func sortEntries(es []*insertedEntry) {
	// insertion sort: pages are small and the comparison is not a strict weak order
	// across mixed sequence presence, so keep it stable and simple.
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && compareOrder(es[j-1].order, es[j].order) > 0; j-- {
			es[j-1], es[j] = es[j], es[j-1]
		}
	}
}
