package rules

import (
	"strings"
	"time"
)

// OrderKey is what decides which of two messages of a conversation is newer
// (docs/architecture.md#which-message-is-newer: the newest message owns the open window).
// This file is the one place that rule lives.
type OrderKey struct {
	// ProviderSeq is iLink's message sequence, when the message carried one.
	ProviderSeq *int64
	SentAt      time.Time
	// ProviderID is iLink's message id (decimal digits, compared as a number).
	ProviderID string
	// PageIndex is the message's position in its page.
	PageIndex int
}

// Supersedes reports whether a candidate message is newer than the message that owns the
// open window: higher provider sequence when both have one, else later sent-at. At equal
// sent-at: when exactly one of the two has a sequence, the candidate wins only if the open
// window came from the same page (the later page position); otherwise the higher numeric
// message id wins — across pages too, since iLink ids grow — and when an id is not
// numeric, the later position of the same page.
func Supersedes(candidate, open OrderKey, openFromSamePage bool) bool {
	if candidate.ProviderSeq != nil && open.ProviderSeq != nil && *candidate.ProviderSeq != *open.ProviderSeq {
		return *candidate.ProviderSeq > *open.ProviderSeq
	}
	if !candidate.SentAt.Equal(open.SentAt) {
		return candidate.SentAt.After(open.SentAt)
	}
	if (candidate.ProviderSeq == nil) != (open.ProviderSeq == nil) {
		return openFromSamePage
	}
	if c, ok := CompareNumericIDs(candidate.ProviderID, open.ProviderID); ok {
		return c > 0
	}
	return openFromSamePage
}

// CompareOrder orders messages of one page for their merged summary: provider sequence
// when both have one, else sent-at, else numeric id, else page position.
func CompareOrder(a, b OrderKey) int {
	if a.ProviderSeq != nil && b.ProviderSeq != nil && *a.ProviderSeq != *b.ProviderSeq {
		if *a.ProviderSeq < *b.ProviderSeq {
			return -1
		}
		return 1
	}
	if c := a.SentAt.Compare(b.SentAt); c != 0 {
		return c
	}
	if c, ok := CompareNumericIDs(a.ProviderID, b.ProviderID); ok {
		return c
	}
	return a.PageIndex - b.PageIndex
}

// SortByOrder sorts a page's messages oldest first by CompareOrder, key giving each one's
// order. It is an insertion sort: pages are small and the comparison is not a strict weak
// order across mixed sequence presence, so it stays stable and simple.
func SortByOrder[T any](es []T, key func(T) OrderKey) {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && CompareOrder(key(es[j-1]), key(es[j])) > 0; j-- {
			es[j-1], es[j] = es[j], es[j-1]
		}
	}
}

// CompareNumericIDs compares two provider message ids as unsigned decimal integers of any
// length (iLink ids are uint64; they never pass through a float or a signed integer).
// ok is false when either id is not a canonical decimal number.
func CompareNumericIDs(a, b string) (int, bool) {
	if !isCanonicalDecimal(a) || !isCanonicalDecimal(b) {
		return 0, false
	}
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1, true
		}
		return 1, true
	}
	return strings.Compare(a, b), true
}

func isCanonicalDecimal(s string) bool {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
