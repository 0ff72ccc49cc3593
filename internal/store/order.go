package store

import (
	"strings"
	"time"
)

// orderKey is what decides which of two messages of a conversation is newer
// (design.md §3, "Polling and page commit"). This file is the one place that rule lives.
type orderKey struct {
	providerSeq *int64
	sentAt      time.Time
	providerID  string
	pageIndex   int
}

// supersedes reports whether a candidate message is newer than the message that owns the
// open window: higher provider sequence when both have one, else later sent-at. At equal
// sent-at: when exactly one of the two has a sequence, the candidate wins only if the open
// window came from the same page (the later page position); otherwise the higher numeric
// message id wins — across pages too, since iLink ids grow — and when an id is not
// numeric, the later position of the same page. This is the seed store's rule.
func supersedes(candidate, open orderKey, openFromSamePage bool) bool {
	if candidate.providerSeq != nil && open.providerSeq != nil && *candidate.providerSeq != *open.providerSeq {
		return *candidate.providerSeq > *open.providerSeq
	}
	if !candidate.sentAt.Equal(open.sentAt) {
		return candidate.sentAt.After(open.sentAt)
	}
	if (candidate.providerSeq == nil) != (open.providerSeq == nil) {
		return openFromSamePage
	}
	if c, ok := compareNumericIDs(candidate.providerID, open.providerID); ok {
		return c > 0
	}
	return openFromSamePage
}

// compareOrder orders messages of one page for their merged summary: provider sequence
// when both have one, else sent-at, else numeric id, else page position.
func compareOrder(a, b orderKey) int {
	if a.providerSeq != nil && b.providerSeq != nil && *a.providerSeq != *b.providerSeq {
		if *a.providerSeq < *b.providerSeq {
			return -1
		}
		return 1
	}
	if c := a.sentAt.Compare(b.sentAt); c != 0 {
		return c
	}
	if c, ok := compareNumericIDs(a.providerID, b.providerID); ok {
		return c
	}
	return a.pageIndex - b.pageIndex
}

// compareNumericIDs compares two provider message ids as unsigned decimal integers of any
// length (iLink ids are uint64; they never pass through a float or a signed integer).
// ok is false when either id is not a canonical decimal number.
func compareNumericIDs(a, b string) (int, bool) {
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
