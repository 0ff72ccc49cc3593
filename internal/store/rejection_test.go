package store_test

import (
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func TestRetMinus2IsTheWindowsOwnRejectionOnlyWhenOurBookkeepingExplainsIt(t *testing.T) {
	t.Parallel()
	w := store.Window{MaxSends: 10, Transmitted: 3, ExpiresAt: t0.Add(time.Hour), State: vocab.WindowOpen}
	if got := store.ClassifyRejection(w, t0); got != store.RejectionThrottle {
		t.Fatalf("quota left and window live: %s, want throttle", got)
	}
	full := w
	full.Transmitted = 10
	if got := store.ClassifyRejection(full, t0); got != store.RejectionWindow {
		t.Fatalf("quota used up: %s, want window", got)
	}
	if got := store.ClassifyRejection(w, t0.Add(time.Hour)); got != store.RejectionWindow {
		t.Fatalf("window past: %s, want window", got)
	}
}
