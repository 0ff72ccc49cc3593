package store_test

import (
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func confirmInput(offer, provider, owner string, generation int32) store.ConfirmInput {
	return store.ConfirmInput{OfferID: offer, AccountGeneration: generation, MaxAccounts: 10,
		ProviderAccountID: provider, OwnerPeerID: owner, BaseURL: "https://ilinkai.weixin.qq.com",
		BotToken: sealing.NewSecret(provider + ":token")}
}

func (e *env) offer(id string) {
	e.t.Helper()
	if _, err := e.store.CreateLoginOffer(e.ctx, t0, id, "operator", t0.Add(5*time.Minute)); err != nil {
		e.t.Fatal(err)
	}
}

func TestConfirmEnrollmentNeedsLiveOffer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	before := e.digest()
	_, err := e.store.ConfirmEnrollment(e.ctx, t0, confirmInput("qo_missing", "a00000000001@im.bot", "o9-owner@im.wechat", 1))
	wantCode(t, err, vocab.CodeInvalidInput)
	e.unchanged(before)

	e.offer("qo_expiring")
	if err := e.store.MarkOfferScanned(e.ctx, t0.Add(time.Minute), "qo_expiring"); err != nil {
		t.Fatal(err)
	}
	before = e.digest()
	_, err = e.store.ConfirmEnrollment(e.ctx, t0.Add(5*time.Minute), confirmInput("qo_expiring", "a00000000001@im.bot", "o9-owner@im.wechat", 1))
	wantCode(t, err, vocab.CodeInvalidInput)
	e.unchanged(before)
	// A scanned, live offer confirms.
	if _, err := e.store.ConfirmEnrollment(e.ctx, t0.Add(4*time.Minute), confirmInput("qo_expiring", "a00000000001@im.bot", "o9-owner@im.wechat", 1)); err != nil {
		t.Fatal(err)
	}
}

func TestConfirmEnrollmentWritesAuditDeletesOfferAndIsIdempotent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.offer("qo_one")
	in := confirmInput("qo_one", "a00000000002@im.bot", "o9-owner2@im.wechat", 1)
	r, err := e.store.ConfirmEnrollment(e.ctx, t0, in)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Registered || r.Account.Generation != 1 || r.AlreadyConfirmed {
		t.Fatalf("unexpected %+v", r)
	}
	if n := e.count("SELECT count(*) FROM login_offers"); n != 0 {
		t.Fatal("offer not deleted")
	}
	if n := e.count("SELECT count(*) FROM enrollment_audit WHERE offer_id = 'qo_one' AND result = 'registered'"); n != 1 {
		t.Fatal("audit row missing")
	}
	// A retried activity finds its effect applied and writes nothing.
	before := e.digest()
	again, err := e.store.ConfirmEnrollment(e.ctx, t0, in)
	if err != nil {
		t.Fatal(err)
	}
	if !again.AlreadyConfirmed || again.Account.AccountKey != r.Account.AccountKey {
		t.Fatalf("retry: %+v", again)
	}
	e.unchanged(before)
}

func TestConfirmEnrollmentExpectsNextGeneration(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.offer("qo_gen")
	before := e.digest()
	_, err := e.store.ConfirmEnrollment(e.ctx, t0, confirmInput("qo_gen", "a00000000003@im.bot", "o9-owner3@im.wechat", 2))
	wantCode(t, err, vocab.CodeGenerationConflict)
	e.unchanged(before)
	if _, err := e.store.ConfirmEnrollment(e.ctx, t0, confirmInput("qo_gen", "a00000000003@im.bot", "o9-owner3@im.wechat", 1)); err != nil {
		t.Fatal(err)
	}
	// Re-enrolling the same bot rotates it to generation 2.
	e.offer("qo_gen2")
	r, err := e.store.ConfirmEnrollment(e.ctx, t0, confirmInput("qo_gen2", "a00000000003@im.bot", "o9-owner3@im.wechat", 2))
	if err != nil {
		t.Fatal(err)
	}
	if r.Registered || r.Account.Generation != 2 {
		t.Fatalf("unexpected %+v", r)
	}
}

func TestConfirmEnrollmentRespectsMaxAccounts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.register()
	e.register()
	e.offer("qo_limit")
	in := confirmInput("qo_limit", "a00000000004@im.bot", "o9-owner4@im.wechat", 1)
	in.MaxAccounts = 2
	before := e.digest()
	_, err := e.store.ConfirmEnrollment(e.ctx, t0, in)
	wantCode(t, err, vocab.CodeAccountLimitReached)
	e.unchanged(before)
	in.MaxAccounts = 3
	if _, err := e.store.ConfirmEnrollment(e.ctx, t0, in); err != nil {
		t.Fatal(err)
	}
}

func TestConfirmingSecondBotForSameOwnerReplacesFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.register()
	res, tok := e.deliver(first, "hello old bot")
	e.offer("qo_rebind")
	r, err := e.store.ConfirmEnrollment(e.ctx, t0, confirmInput("qo_rebind", "a00000000005@im.bot", first.owner, 1))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.ReplacedAccountKeys) != 1 || r.ReplacedAccountKeys[0] != first.key {
		t.Fatalf("replaced %v, want [%s]", r.ReplacedAccountKeys, first.key)
	}
	old, err := e.store.GetAccount(e.ctx, first.key)
	if err != nil {
		t.Fatal(err)
	}
	if old.Status != vocab.AccountReplaced || old.ReplacedBy != r.Account.AccountKey {
		t.Fatalf("old account %+v", old)
	}
	assertRetired(t, e, res.Deliverable.ReplyWindowID, vocab.WindowCancelled)
	_, err = e.store.ReserveAndStart(e.ctx, t0, storeReply(tok, "to the dead bot"), store.SendPacing{})
	wantCode(t, err, vocab.CodeReplyWindowInactive)
	if n := e.count("SELECT count(*) FROM enrollment_audit WHERE $1 = ANY(replaced_account_keys)", first.key); n != 1 {
		t.Fatal("audit row does not record the replaced account")
	}
	// A page the old bot's poller had in flight is stored; the result stops the poller.
	late, err := e.tryCommit(first, t0, first.msg("late", t0))
	if err != nil || late.Inserted != 1 || late.AccountStatus != vocab.AccountReplaced {
		t.Fatalf("late page of the replaced bot: %+v %v", late, err)
	}
}

func TestLoginOfferLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.store.CreateLoginOffer(e.ctx, t0, "bad id", "op", t0.Add(time.Minute))
	wantCode(t, err, vocab.CodeInvalidInput)
	_, err = e.store.CreateLoginOffer(e.ctx, t0, "qo_past", "op", t0)
	wantCode(t, err, vocab.CodeInvalidInput)
	e.offer("qo_life")
	e.offer("qo_life") // idempotent
	if err := e.store.MarkOfferScanned(e.ctx, t0.Add(4*time.Minute), "qo_life"); err != nil {
		t.Fatalf("scan before the expiry: %v", err)
	}
	err = e.store.MarkOfferScanned(e.ctx, t0.Add(5*time.Minute), "qo_life")
	wantCode(t, err, vocab.CodeInvalidInput)
	// The enrollment workflow closes the offer its timer saw expire.
	if ok, err := e.store.CloseLoginOffer(e.ctx, t0.Add(5*time.Minute), "qo_life"); !ok || err != nil {
		t.Fatalf("close expired: %v %v", ok, err)
	}
	err = e.store.MarkOfferScanned(e.ctx, t0, "qo_life")
	wantCode(t, err, vocab.CodeInvalidInput)
	e.offer("qo_cancel")
	if ok, err := e.store.CloseLoginOffer(e.ctx, t0, "qo_cancel"); !ok || err != nil {
		t.Fatalf("close: %v %v", ok, err)
	}
}
