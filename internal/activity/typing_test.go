package activity

import (
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/testkit"
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

// An agent that answers before "typing" is due costs iLink no typing call: the keep-alive
// of its hand-off never showed "typing", so the first reply's cancel has nothing to end
// and calls nothing either (neither getconfig nor sendtyping).
func TestAnAgentThatAnswersBeforeTypingIsDueCostsNoTypingCall(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ref, _ := h.deliver("quick question")
	w, err := h.store.GetWindow(h.ctx, ref.ReplyWindowID)
	if err != nil {
		t.Fatal(err)
	}
	typer := h.acts.typer()
	typer.After = time.Hour
	typer.keepAlive(h.ctx, w)
	if err := typer.Typing(h.ctx, h.key, h.bot.Owner, false); err != nil {
		t.Fatal(err)
	}
	if n, c := h.requests("sendtyping"), h.requests("getconfig"); n+c != 0 {
		t.Fatalf("a reply before typing was due made %d sendtyping and %d getconfig calls, want none", n, c)
	}
	// With no keep-alive of this worker's for the conversation (another worker's
	// hand-off, a restart), the cancel is sent: "typing" may be showing.
	if err := typer.Typing(h.ctx, h.key, h.bot.Owner, false); err != nil {
		t.Fatal(err)
	}
	if n := h.requests("sendtyping"); n != 1 {
		t.Fatalf("a cancel with no keep-alive here made %d sendtyping calls, want 1", n)
	}
}

// An agent that works past After has "typing" shown, and the reply's cancel ends it.
func TestAnAgentSlowerThanTypingAfterSeesTypingShownThenCancelled(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ref, _ := h.deliver("slow question")
	w, err := h.store.GetWindow(h.ctx, ref.ReplyWindowID)
	if err != nil {
		t.Fatal(err)
	}
	typer := h.acts.typer()
	typer.After = time.Millisecond
	typer.keepAlive(h.ctx, w)
	testkit.Eventually(t, "typing shown", 30*time.Second, func() (bool, error) {
		return h.requests("sendtyping") == 1, nil
	})
	if err := typer.Typing(h.ctx, h.key, h.bot.Owner, false); err != nil {
		t.Fatal(err)
	}
	if n := h.requests("sendtyping"); n != 2 {
		t.Fatalf("the cancel after a show made %d sendtyping calls in all, want 2 (the show and the cancel)", n)
	}
}
