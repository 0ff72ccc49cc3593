package store

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/ilinkflow/ilinkflow/internal/store/internal/dbq"
	"github.com/ilinkflow/ilinkflow/internal/store/rules"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
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
	// Media are the CDN locators of the payload's file, voice and video attachments that
	// have one, by position (vocab.MediaPositionBase and up, the attachment's Position). Only
	// the deliverable message keeps them: a merge carries images only.
	Media []ImageLocator
}

// ImageLocator is the CDN locator of one inbound image.
type ImageLocator struct {
	Position int32
	Locator  sealing.Secret
}

// PageResult is the outcome of a page commit.
type PageResult struct {
	Cursor string
	// AccountStatus is the account's status when the page was stored: a page in flight is
	// stored even when its account was paused or removed meanwhile, and its poller stops
	// unless this is active.
	AccountStatus string
	// Generation is the account's generation when the page was stored: newer than the
	// page's when a rotation landed while it was in flight (its poller stops).
	Generation int32
	// Inserted counts new messages; Duplicates counts entries already in the inbox.
	Inserted, Duplicates int
	// Absorbed counts messages merged into the deliverable one (or absorbed because an
	// open window is newer); Deferred counts new messages that were deferred.
	Absorbed, Deferred int
	// Deliverable is the message to hand to an agent, if any.
	Deliverable *Delivery
	// OpenedWindowID is the window this page opened that is still open (0 if none); it
	// needs a window workflow even when its message was deferred. Opened describes it.
	OpenedWindowID int64
	Opened         *OpenedWindow
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
		return fail(vocab.CodeInvalidInput, "generation must be positive")
	}
	if err := validCursor(in.ExpectedCursor, "expected cursor"); err != nil {
		return err
	}
	if err := validCursor(in.NextCursor, "next cursor"); err != nil {
		return err
	}
	if len(in.Entries) > maxPageEntries {
		return fail(vocab.CodeInvalidInput, "page has more than %d entries", maxPageEntries)
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
		return fail(vocab.CodeCursorConflict, "message cursor does not match its page")
	}
	if e.ContextToken.IsZero() || len(e.ContextToken.Reveal()) > 8192 {
		return fail(vocab.CodeInvalidInput, "context token is missing or too long")
	}
	if e.ProviderSeq != nil && *e.ProviderSeq < 0 {
		return fail(vocab.CodeInvalidInput, "provider sequence is negative")
	}
	if e.SentAt.Year() < 2000 {
		return fail(vocab.CodeInvalidInput, "sent-at is invalid")
	}
	if e.SentAt.After(now.Add(s.limits.MaxClockSkew)) {
		return fail(vocab.CodeInvalidInput, "sent-at is too far in the future")
	}
	if len(e.Payload.Summary) > maxSummaryBytes || !utf8.ValidString(e.Payload.Summary) {
		return fail(vocab.CodeInvalidInput, "summary is too long or not UTF-8")
	}
	if len(e.Payload.Attachments) > maxAttachments {
		return fail(vocab.CodeInvalidInput, "too many attachments")
	}
	imagePositions := map[int32]bool{}
	mediaPositions := map[int32]bool{}
	for _, a := range e.Payload.Attachments {
		switch a.Kind {
		case "image":
			if a.Position < 0 || a.Position >= vocab.MediaPositionBase || imagePositions[int32(a.Position)] {
				return fail(vocab.CodeInvalidInput, "image attachment positions are inconsistent")
			}
			imagePositions[int32(a.Position)] = true
		case "file", "voice", "video":
			if a.Size < 0 {
				return fail(vocab.CodeInvalidInput, "attachment size is negative")
			}
			if a.Position != 0 {
				if a.Position < vocab.MediaPositionBase || a.Position >= maxSendIndex || mediaPositions[int32(a.Position)] {
					return fail(vocab.CodeInvalidInput, "media attachment positions are inconsistent")
				}
				mediaPositions[int32(a.Position)] = true
			}
		default:
			return fail(vocab.CodeInvalidInput, "attachment kind is invalid")
		}
		if len(a.Name) > 1024 || len(a.Text) > maxSummaryBytes || !utf8.ValidString(a.Name) || !utf8.ValidString(a.Text) {
			return fail(vocab.CodeInvalidInput, "attachment descriptor is too long or not UTF-8")
		}
	}
	if err := checkLocators("image", e.Images, imagePositions); err != nil {
		return err
	}
	if err := checkLocators("media", e.Media, mediaPositions); err != nil {
		return err
	}
	e.SentAt = e.SentAt.Truncate(time.Microsecond)
	return nil
}

// checkLocators checks that locators (of kind "image" or "media") name each of the
// attachment positions once, and that each is present and at most 8 KiB.
func checkLocators(kind string, locators []ImageLocator, positions map[int32]bool) error {
	if len(locators) != len(positions) {
		return fail(vocab.CodeInvalidInput, "%s locator count is inconsistent with %s attachments", kind, kind)
	}
	seen := make(map[int32]bool, len(locators))
	for _, l := range locators {
		if !positions[l.Position] || seen[l.Position] {
			return fail(vocab.CodeInvalidInput, "%s locator position is inconsistent", kind)
		}
		seen[l.Position] = true
		if l.Locator.IsZero() || len(l.Locator.Reveal()) > 8192 {
			return fail(vocab.CodeInvalidInput, "%s locator is missing or too long", kind)
		}
	}
	return nil
}

// newEntry is a page entry that is new to the inbox, with what the commit decided for it.
type newEntry struct {
	key      string
	entry    *PageEntry
	order    rules.OrderKey
	deferred bool
	// windowState and retiredReason are the state its reply window ends the page in.
	windowState, retiredReason string
	windowID                   int64
}

// pageRead is what a page commit is decided on, read under the account's lock.
type pageRead struct {
	account dbq.Account
	open    *dbq.ReplyWindow // the conversation's open window before the page
	known   map[string]dbq.PageKnownMessagesRow
	backlog []dbq.ReceivedBacklogRow
	images  []dbq.ReceivedBacklogImagesRow // of the backlog, newest message first
	// held counts the conversation's held replies still to send (the window the page
	// opens sends them first).
	held int32
}

// CommitPage commits one getupdates page atomically with its cursor
// (docs/architecture.md#a-page-commit): the whole page is validated first; new
// messages enter the deduplicated inbox, each gets a reply window, the newest message
// of the conversation owns the open window and is the only deliverable one, every other
// new message and the earlier undelivered backlog are merged into it, and the cursor
// moves by compare-and-set.
//
// Whatever the page's size it costs two round trips: the cursor's compare-and-set
// (which locks the account) with everything the page is decided on, then the writes
// (set-based) with COMMIT.
func (s *Store) CommitPage(ctx context.Context, now time.Time, in PageInput) (traced PageResult, tracedErr error) {
	ctx, span := startSpan(ctx, "CommitPage", in.AccountKey)
	defer func() { endSpan(span, tracedErr, "", "") }()
	now = now.Truncate(time.Microsecond)
	if err := s.validatePage(now, in); err != nil {
		return PageResult{}, err
	}
	var out PageResult
	err := s.inPipeline(ctx, "commit page", func(p *pipeline, q *dbq.Queries) error {
		rd, err := readPage(ctx, q, now, in)
		if err != nil {
			return err
		}
		out, err = s.decideAndWrite(ctx, p, q, now, in, rd)
		return err
	})
	if errors.Is(err, errCursorMoveFailed) {
		err = s.read(ctx, "commit page", func(q *dbq.Queries) error {
			return cursorFailure(ctx, q, in.AccountKey, in.Generation, in.ExpectedCursor)
		})
		if err == nil { // the account changed back meanwhile: still a conflict
			err = fail(vocab.CodeCursorConflict, "cursor changed")
		}
	}
	if err != nil {
		return PageResult{}, err
	}
	return out, nil
}

// decideAndWrite decides the page on rd (deduplication, windows, merge), queues the writes
// with COMMIT and reads their results.
func (s *Store) decideAndWrite(ctx context.Context, p *pipeline, q *dbq.Queries, now time.Time, in PageInput, rd pageRead) (PageResult, error) {
	res := PageResult{Cursor: in.NextCursor, AccountStatus: rd.account.Status, Generation: rd.account.Generation}
	news, err := newEntries(in, rd, &res)
	if err != nil {
		return PageResult{}, err
	}
	res.Inserted = len(news)
	if len(news) == 0 {
		return res, nil
	}
	retireOpen, deliverable := placeWindows(rd.open, news)
	if !retireOpen {
		rd.keepAnswerable()
	}
	plan, err := s.planMerge(rd, news, deliverable)
	if err != nil {
		return PageResult{}, err
	}

	// The writes, in one round trip.
	var retire *dbq.RetireWindowsBatchResults
	if retireOpen {
		retire = q.RetireWindows(ctx, []dbq.RetireWindowsParams{{ReplyWindowIds: []int64{rd.open.ReplyWindowID},
			State: vocab.WindowSuperseded, Reason: reasonSuperseded, Now: now}})
		res.RetiredWindowIDs = []int64{rd.open.ReplyWindowID}
	}
	insert, err := s.insertParams(now, in.AccountKey, rd.account, news, deliverable, plan)
	if err != nil {
		return PageResult{}, err
	}
	inserted := q.InsertPageMessages(ctx, []dbq.InsertPageMessagesParams{insert})
	var images *dbq.InsertInboundImagesBatchResults
	if len(plan.images.Positions) > 0 {
		plan.images.MessageKey, plan.images.AccountKey, plan.images.PeerID, plan.images.Now =
			deliverable.key, in.AccountKey, rd.account.OwnerPeerID, now
		images = q.InsertInboundImages(ctx, []dbq.InsertInboundImagesParams{plan.images})
	}
	var absorb *dbq.AbsorbMessagesBatchResults
	if len(plan.absorbKeys) > 0 {
		absorb = q.AbsorbMessages(ctx, []dbq.AbsorbMessagesParams{{MessageKeys: plan.absorbKeys, Now: now}})
	}
	var dropImages *dbq.DeleteImagesOfMessagesBatchResults
	if len(plan.dropImagesOf) > 0 {
		dropImages = q.DeleteImagesOfMessages(ctx, [][]string{plan.dropImagesOf})
	}
	// Every decision is made: COMMIT travels with the writes (only their own failure can
	// stop it).
	p.commitQueued()

	if retire != nil {
		if _, err := batchRows[int64](retire); err != nil {
			return PageResult{}, err
		}
	}
	rows, err := batchRows[dbq.InsertPageMessagesRow](inserted)
	if err != nil {
		return PageResult{}, err
	}
	windowOf := make(map[string]int64, len(rows))
	for _, r := range rows {
		windowOf[r.SourceMessageKey] = r.ReplyWindowID
	}
	for _, n := range news {
		n.windowID = windowOf[n.key]
	}
	if images != nil {
		if err := batchExec(images); err != nil {
			return PageResult{}, err
		}
	}
	absorbed := int64(0)
	if absorb != nil {
		if absorbed, err = batchRow[int64](absorb); err != nil {
			return PageResult{}, err
		}
	}
	if dropImages != nil {
		if err := batchExec(dropImages); err != nil {
			return PageResult{}, err
		}
	}
	res.Absorbed = len(news) + int(absorbed)
	if d := deliverable; d != nil {
		res.Absorbed--
		res.OpenedWindowID = d.windowID
		res.Opened = &OpenedWindow{ReplyWindowID: d.windowID, AccountKey: in.AccountKey, MessageKey: d.key, PeerID: rd.account.OwnerPeerID,
			ExpiresAt: insert.ExpiresAts[slices.Index(insert.MessageKeys, d.key)], MaxSends: s.limits.MaxSends,
			FinalSlots: s.limits.FinalSlots, HeldWaiting: rd.held, Deliverable: messageDeliverable(d.deferred, vocab.MessageReceived)}
		res.Opened.RemindBefore, _ = reminderOf(rd.account)
		if res.Opened.Deliverable {
			res.Deliverable = &Delivery{MessageKey: d.key, ReplyWindowID: d.windowID}
		}
	}
	return res, nil
}

const reasonSuperseded = rules.ReasonSuperseded

// readPage moves the cursor by compare-and-set, which also locks the account row (page
// commits of one account are serialized by it) and returns it, and reads in the same
// round trip the conversation's open window (locked), which of the page's messages the
// inbox already holds, and the conversation's undelivered backlog with its images.
func readPage(ctx context.Context, q *dbq.Queries, now time.Time, in PageInput) (pageRead, error) {
	var rd pageRead
	moved := queueCursorMove(ctx, q, now, in)
	if len(in.Entries) == 0 {
		var err error
		if rd.account, err = batchRow[dbq.Account](moved); errors.Is(err, pgx.ErrNoRows) {
			return rd, cursorFailure(ctx, q, in.AccountKey, in.Generation, in.ExpectedCursor)
		}
		return rd, err
	}
	peer := in.Entries[0].PeerID // every entry must be from the owner: checked below
	keys := make([]string, len(in.Entries))
	for i := range in.Entries {
		keys[i] = MessageKey(in.AccountKey, in.Entries[i].ProviderMessageID)
	}
	conv := struct{ key, peer string }{in.AccountKey, peer}
	open := q.LockOpenWindow(ctx, []dbq.LockOpenWindowParams{{AccountKey: conv.key, PeerID: conv.peer}})
	known := q.PageKnownMessages(ctx, [][]string{keys})
	backlog := q.ReceivedBacklog(ctx, []dbq.ReceivedBacklogParams{{AccountKey: conv.key, PeerID: conv.peer}})
	images := q.ReceivedBacklogImages(ctx, []dbq.ReceivedBacklogImagesParams{{AccountKey: conv.key, PeerID: conv.peer}})
	held := q.CountWaitingHeld(ctx, []dbq.CountWaitingHeldParams{{AccountKey: conv.key, PeerID: conv.peer}})

	var err error
	rd.account, err = batchRow[dbq.Account](moved)
	if errors.Is(err, pgx.ErrNoRows) {
		return rd, errCursorMoveFailed
	}
	if err != nil {
		return rd, err
	}
	for i := range in.Entries {
		if in.Entries[i].PeerID != rd.account.OwnerPeerID {
			return rd, fail(vocab.CodePairMismatch, "entry %d: message does not belong to the account's owner", i)
		}
	}
	w, err := batchRow[dbq.ReplyWindow](open)
	switch {
	case err == nil:
		rd.open = &w
	case !errors.Is(err, pgx.ErrNoRows):
		return rd, err
	}
	rows, err := batchRows[dbq.PageKnownMessagesRow](known)
	if err != nil {
		return rd, err
	}
	rd.known = make(map[string]dbq.PageKnownMessagesRow, len(rows))
	for _, r := range rows {
		rd.known[r.MessageKey] = r
	}
	if rd.backlog, err = batchRows[dbq.ReceivedBacklogRow](backlog); err != nil {
		return rd, err
	}
	if rd.images, err = batchRows[dbq.ReceivedBacklogImagesRow](images); err != nil {
		return rd, err
	}
	rd.held, err = batchRow[int32](held)
	return rd, err
}

// queueCursorMove queues the compare-and-set of the page's cursor.
func queueCursorMove(ctx context.Context, q *dbq.Queries, now time.Time, in PageInput) *dbq.CompareAndSetCursorBatchResults {
	return q.CompareAndSetCursor(ctx, []dbq.CompareAndSetCursorParams{{
		AccountKey: in.AccountKey, Generation: in.Generation, ExpectedCursor: in.ExpectedCursor,
		NextCursor: in.NextCursor, Now: now,
	}})
}

// errCursorMoveFailed stands for a refused compare-and-set whose reason CommitPage reads
// in a transaction of its own (the refusing one has unread reads queued behind it).
var errCursorMoveFailed = errors.New("store: cursor compare-and-set refused")

// keepAnswerable leaves the open window's unanswered message out of the backlog when the
// page does not supersede its window: its agent can still answer it.
func (rd *pageRead) keepAnswerable() {
	handedOut := map[string]bool{}
	backlog := rd.backlog[:0]
	for _, b := range rd.backlog {
		if b.Status == vocab.MessageReceived {
			backlog = append(backlog, b)
		} else {
			handedOut[b.MessageKey] = true
		}
	}
	rd.backlog = backlog
	images := rd.images[:0]
	for _, img := range rd.images {
		if !handedOut[img.MessageKey] {
			images = append(images, img)
		}
	}
	rd.images = images
}

// newEntries deduplicates the page against the inbox and itself: an entry already stored
// must match the stored identity and own a reply window (dedupe_invariant otherwise).
func newEntries(in PageInput, rd pageRead, res *PageResult) ([]*newEntry, error) {
	var news []*newEntry
	seen := make(map[string]bool, len(in.Entries))
	for i := range in.Entries {
		e := &in.Entries[i]
		key := MessageKey(in.AccountKey, e.ProviderMessageID)
		if seen[key] { // earlier in this page: same identity, and it gets its window
			res.Duplicates++
			continue
		}
		seen[key] = true
		if stored, ok := rd.known[key]; ok {
			if stored.AccountKey != in.AccountKey || stored.ProviderMessageID != e.ProviderMessageID || stored.PeerID != e.PeerID {
				return nil, fail(vocab.CodeDedupeInvariant, "duplicate message conflicts with the stored identity")
			}
			if !stored.Windowed {
				return nil, fail(vocab.CodeDedupeInvariant, "duplicate message has no reply window")
			}
			res.Duplicates++
			continue
		}
		deferred := in.DeferredBefore != nil && e.SentAt.Before(*in.DeferredBefore)
		if deferred {
			res.Deferred++
		}
		news = append(news, &newEntry{key: key, entry: e, deferred: deferred,
			order: rules.OrderKey{ProviderSeq: e.ProviderSeq, SentAt: e.SentAt, ProviderID: e.ProviderMessageID, PageIndex: i}})
	}
	return news, nil
}

// placeWindows gives each new message's window its state (rules.PlaceWindows decides):
// it reports whether the window open before the page is retired, and the message that
// owns the open window after the page when that is a new one (the deliverable).
func placeWindows(open *dbq.ReplyWindow, news []*newEntry) (retireOpen bool, owner *newEntry) {
	var cur *rules.OrderKey
	if open != nil {
		cur = &rules.OrderKey{ProviderSeq: open.ProviderSeq, SentAt: open.IssuedAt, ProviderID: open.ProviderMessageID}
	}
	keys := make([]rules.OrderKey, len(news))
	for i, n := range news {
		keys[i] = n.order
	}
	p := rules.PlaceWindows(cur, keys)
	for i, n := range news {
		n.windowState, n.retiredReason = p.Windows[i].State, p.Windows[i].RetiredReason
	}
	if p.Owner >= 0 {
		owner = news[p.Owner]
	}
	return p.RetireOpen, owner
}

// mergePlan is what merging into the deliverable writes besides the messages.
type mergePlan struct {
	payload      []byte // the deliverable's payload
	images       dbq.InsertInboundImagesParams
	absorbKeys   []string // backlog messages absorbed into the deliverable
	dropImagesOf []string // backlog messages whose image rows go
}

// planMerge merges the page's other new messages and the conversation's earlier
// undelivered backlog into the deliverable message as rules.PlanMerge decides: texts
// capped, and the latest images renumbered 0..3. Only a backlog image that moves is
// opened and sealed again; a page image is sealed once, where it ends.
func (s *Store) planMerge(rd pageRead, news []*newEntry, d *newEntry) (mergePlan, error) {
	var plan mergePlan
	if d == nil {
		return plan, nil // every new message is absorbed, with its images
	}
	in := rules.MergeInput{MaxSummaryBytes: s.limits.MaxMergedSummaryBytes}
	for _, b := range rd.backlog {
		var p Payload
		if err := json.Unmarshal(b.Payload, &p); err != nil {
			return plan, &Error{Code: vocab.CodeInternal, Msg: "stored payload of " + b.MessageKey + " does not decode", Err: err}
		}
		in.Backlog = append(in.Backlog, rules.BacklogMessage{Key: b.MessageKey, Text: mergeText(p),
			ImagesInvolved: p.ImagesInvolved, HoldsMedia: holdsMedia(p)})
	}
	for i := range rd.images {
		in.BacklogImages = append(in.BacklogImages, rd.images[i].MessageKey)
	}
	for i, n := range news {
		m := rules.PageMessage{Order: n.order, Text: mergeText(n.entry.Payload)}
		for _, img := range n.entry.Images {
			m.ImagePositions = append(m.ImagePositions, img.Position)
		}
		in.Page = append(in.Page, m)
		if n == d {
			in.Deliverable = i
		}
	}
	mp := rules.PlanMerge(in)
	plan.absorbKeys, plan.dropImagesOf = mp.AbsorbKeys, mp.DropImagesOf
	if err := s.planMedia(&plan, d); err != nil {
		return plan, err
	}
	if !mp.Merged {
		var err error
		plan.payload, err = json.Marshal(d.entry.Payload)
		if err != nil {
			return plan, fail(vocab.CodeInvalidInput, "payload does not encode")
		}
		return plan, nil
	}
	merged := Payload{Summary: mp.Summary, Body: mp.Body, Merged: mp.Messages, Omitted: mp.Omitted,
		ImagesInvolved: mp.ImagesInvolved}
	for _, a := range d.entry.Payload.Attachments {
		if a.Kind != "image" {
			merged.Attachments = append(merged.Attachments, a)
		}
	}
	for i, img := range mp.Kept {
		var loc sealing.Secret
		if img.FromPage {
			for _, l := range news[img.Index].entry.Images {
				if l.Position == img.Position {
					loc = l.Locator
				}
			}
		} else {
			stored := rd.images[img.Index]
			var err error
			loc, err = s.keys.Open(sealing.PurposeImageLocator, imageBinding(stored.MessageKey, stored.Position),
				sealing.Sealed{KeyGeneration: stored.KeyGeneration, Nonce: stored.Nonce, Ciphertext: stored.Ciphertext})
			if err != nil {
				return plan, &Error{Code: vocab.CodeInternal, Msg: "open image locator for merge", Err: err}
			}
		}
		sealed, err := s.keys.Seal(sealing.PurposeImageLocator, imageBinding(d.key, int32(i)), loc)
		if err != nil {
			return plan, &Error{Code: vocab.CodeInternal, Msg: "seal image locator", Err: err}
		}
		plan.images.Positions = append(plan.images.Positions, int32(i))
		plan.images.KeyGenerations = append(plan.images.KeyGenerations, sealed.KeyGeneration)
		plan.images.Nonces = append(plan.images.Nonces, sealed.Nonce)
		plan.images.Ciphertexts = append(plan.images.Ciphertexts, sealed.Ciphertext)
		merged.Attachments = append(merged.Attachments, Attachment{Kind: "image", Position: i})
	}
	var err error
	if plan.payload, err = json.Marshal(merged); err != nil {
		return plan, &Error{Code: vocab.CodeInternal, Msg: "encode merged payload", Err: err}
	}
	return plan, nil
}

// holdsMedia reports whether a stored payload has a file, voice or video locator (whose
// row goes with the images when the message is absorbed: the merge drops its descriptor).
func holdsMedia(p Payload) bool {
	for _, a := range p.Attachments {
		if a.Kind != "image" && a.Position >= vocab.MediaPositionBase {
			return true
		}
	}
	return false
}

// planMedia seals the deliverable's own file, voice and video locators under their
// positions (vocab.MediaPositionBase and up): they are inserted by the statement that inserts
// the images, and never move.
func (s *Store) planMedia(plan *mergePlan, d *newEntry) error {
	for _, m := range d.entry.Media {
		sealed, err := s.keys.Seal(sealing.PurposeImageLocator, imageBinding(d.key, m.Position), m.Locator)
		if err != nil {
			return &Error{Code: vocab.CodeInternal, Msg: "seal media locator", Err: err}
		}
		plan.images.Positions = append(plan.images.Positions, m.Position)
		plan.images.KeyGenerations = append(plan.images.KeyGenerations, sealed.KeyGeneration)
		plan.images.Nonces = append(plan.images.Nonces, sealed.Nonce)
		plan.images.Ciphertexts = append(plan.images.Ciphertexts, sealed.Ciphertext)
	}
	return nil
}

// insertParams is the one statement that inserts the page's new messages, their windows
// and the sealed context token of the window left open.
func (s *Store) insertParams(now time.Time, accountKey string, account dbq.Account, news []*newEntry, d *newEntry, plan mergePlan) (dbq.InsertPageMessagesParams, error) {
	p := dbq.InsertPageMessagesParams{
		AccountKey: accountKey, PeerID: account.OwnerPeerID, AccountGeneration: account.Generation,
		MaxSends: s.limits.MaxSends, Now: now,
	}
	for _, n := range news {
		e := n.entry
		status, deferred, payload := vocab.MessageAbsorbed, false, ""
		if n == d {
			status, deferred, payload = vocab.MessageReceived, n.deferred, string(plan.payload)
		}
		seq := int64(-1)
		if e.ProviderSeq != nil {
			seq = *e.ProviderSeq
		}
		base := e.SentAt
		if now.Before(base) {
			base = now
		}
		p.MessageKeys = append(p.MessageKeys, n.key)
		p.ProviderMessageIds = append(p.ProviderMessageIds, e.ProviderMessageID)
		p.SentAts = append(p.SentAts, e.SentAt)
		p.Statuses = append(p.Statuses, status)
		p.Deferreds = append(p.Deferreds, deferred)
		p.Payloads = append(p.Payloads, payload)
		p.ProviderSeqs = append(p.ProviderSeqs, seq)
		p.ExpiresAts = append(p.ExpiresAts, base.Add(s.limits.WindowLifetime))
		p.WindowStates = append(p.WindowStates, n.windowState)
		p.RetiredReasons = append(p.RetiredReasons, n.retiredReason)
	}
	if d != nil {
		sealed, err := s.keys.Seal(sealing.PurposeContextToken, contextTokenBinding(d.key), d.entry.ContextToken)
		if err != nil {
			return p, &Error{Code: vocab.CodeInternal, Msg: "seal context token", Err: err}
		}
		p.OpenMessageKey = d.key
		p.SecretKeyGeneration, p.SecretNonce, p.SecretCiphertext = sealed.KeyGeneration, sealed.Nonce, sealed.Ciphertext
	}
	return p, nil
}
