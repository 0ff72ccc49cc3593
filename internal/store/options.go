package store

import (
	"errors"
	"fmt"
	"strings"
)

// Options are the store's settings that do not change what it commits, only how.
type Options struct {
	// Speculation is the set of speculative paths the store takes. The zero value turns
	// every path off; DefaultOptions turns them all on.
	Speculation Speculation
}

// DefaultOptions returns the options New uses: every speculative path on.
func DefaultOptions() Options { return Options{Speculation: SpeculationAll} }

// Speculation is a set of the store's speculative paths (docs/store-performance.md). Each
// commits exactly what the plain path commits, in fewer round trips or transactions when
// its guess holds; a path that is off leaves its work to the plain path:
//
//   - PredictedPage off: every page is read first (two round trips), and no page hint is
//     kept.
//   - PredictedSend off: every reservation is read first (two round trips, a session named
//     alone three), and no send hint is kept or read for.
//   - ReservationBatcher off: each predicted reservation commits in a transaction of its
//     own. It batches predicted reservations only, so it needs PredictedSend: a set with
//     ReservationBatcher but not PredictedSend is invalid (Validate).
//   - CompletionBatcher off: each completion commits in CompleteSend's own transaction.
type Speculation uint8

// The speculative paths.
const (
	// PredictedPage commits a page that follows the account's last commit in this process
	// in one round trip, decided on the state that commit left.
	PredictedPage Speculation = 1 << iota
	// PredictedSend reserves a send through the window of the last reservation in one
	// round trip, decided on the state that reservation left.
	PredictedSend
	// ReservationBatcher commits concurrent predicted reservations in one transaction.
	ReservationBatcher
	// CompletionBatcher commits concurrent completions in one transaction.
	CompletionBatcher
)

// SpeculationAll is every speculative path (the default); SpeculationNone is none.
const (
	SpeculationAll              = PredictedPage | PredictedSend | ReservationBatcher | CompletionBatcher
	SpeculationNone Speculation = 0
)

// ErrInvalidSpeculation is the error of a set of speculative paths that cannot be taken
// together, or of a name that is not a path.
var ErrInvalidSpeculation = errors.New("store: invalid speculation")

// speculationNames are the paths' names, in the order String lists them.
var speculationNames = []struct {
	path Speculation
	name string
}{
	{PredictedPage, "predicted-page"},
	{PredictedSend, "predicted-send"},
	{ReservationBatcher, "reservation-batcher"},
	{CompletionBatcher, "completion-batcher"},
}

// Has reports whether every path of p is in s.
func (s Speculation) Has(p Speculation) bool { return s&p == p }

// String is "all", "none", or the paths' names separated by commas (as ParseSpeculation
// reads them).
func (s Speculation) String() string {
	switch s {
	case SpeculationAll:
		return "all"
	case SpeculationNone:
		return "none"
	}
	var names []string
	for _, n := range speculationNames {
		if s.Has(n.path) {
			names = append(names, n.name)
		}
	}
	if rest := s &^ SpeculationAll; rest != 0 {
		names = append(names, fmt.Sprintf("0x%x", uint8(rest)))
	}
	return strings.Join(names, ",")
}

// Validate reports a set the store cannot take: unknown paths, or ReservationBatcher
// without PredictedSend.
func (s Speculation) Validate() error {
	if rest := s &^ SpeculationAll; rest != 0 {
		return fmt.Errorf("%w: unknown paths 0x%x", ErrInvalidSpeculation, uint8(rest))
	}
	if s.Has(ReservationBatcher) && !s.Has(PredictedSend) {
		return fmt.Errorf("%w: reservation-batcher needs predicted-send (it batches predicted reservations only)", ErrInvalidSpeculation)
	}
	return nil
}

// ParseSpeculation reads "all", "none" or a comma-separated list of the paths that are on
// (predicted-page, predicted-send, reservation-batcher, completion-batcher), and
// validates the set.
func ParseSpeculation(v string) (Speculation, error) {
	switch strings.TrimSpace(v) {
	case "all":
		return SpeculationAll, nil
	case "none":
		return SpeculationNone, nil
	}
	var s Speculation
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		found := false
		for _, n := range speculationNames {
			if part == n.name {
				s, found = s|n.path, true
			}
		}
		if !found {
			return 0, fmt.Errorf("%w: %q is not a path (want all, none, or a comma list of predicted-page, predicted-send, reservation-batcher, completion-batcher)",
				ErrInvalidSpeculation, part)
		}
	}
	if err := s.Validate(); err != nil {
		return 0, err
	}
	return s, nil
}
