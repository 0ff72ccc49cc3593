package activities

import (
	"testing"
	"time"
)

// Cancelling "typing" on an account that needs a relogin (its bot token is dead) calls
// nothing and reports no failure: a window or a message of such an account that ends
// later (starter dev's previous demo bot, whose simulator is gone) logs no warning. On
// an active account the cancel reaches iLink.
func TestTypingCancelOnAnAccountThatNeedsAReloginCallsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	typer := h.acts.typer()
	if err := typer.Typing(h.ctx, h.key, h.bot.Owner, false); err != nil {
		t.Fatalf("cancel on an active account: %v", err)
	}
	if n := h.requests("sendtyping"); n != 1 {
		t.Fatalf("cancel on an active account made %d sendtyping calls, want 1", n)
	}
	if _, err := h.store.MarkNeedsRelogin(h.ctx, time.Now(), h.key, 1, "test: dead token"); err != nil {
		t.Fatal(err)
	}
	if err := typer.Typing(h.ctx, h.key, h.bot.Owner, false); err != nil {
		t.Fatalf("cancel on an account that needs a relogin: %v, want none", err)
	}
	if n := h.requests("sendtyping"); n != 1 {
		t.Fatalf("cancel on an account that needs a relogin reached iLink (%d sendtyping calls)", n)
	}
}
