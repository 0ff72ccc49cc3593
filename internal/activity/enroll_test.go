package activity

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func TestPollQRStatusConfirmedRegistersTheAccountAndReturnsNoToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	now := time.Now()
	if _, err := h.store.PauseAccount(h.ctx, now, h.key, 1, now.Add(time.Hour), "operator"); err != nil {
		t.Fatal(err)
	}
	offer := activities.OfferInput{OfferID: "qo_test1", RequestedBy: "operator", ExpiresAt: now.Add(5 * time.Minute), Now: now}
	if err := runErr(h, h.acts.CreateOffer, offer); err != nil {
		t.Fatal(err)
	}
	if err := runErr(h, h.acts.CreateOffer, offer); err != nil {
		t.Fatalf("creating the offer again (a retry): %v", err)
	}
	qr, err := run[activities.QRCodeOutput](h, h.acts.FetchQRCode, offer.OfferID)
	if err != nil || qr.QRCode == "" || !strings.HasPrefix(qr.QRContent, "https://") {
		t.Fatalf("qr %+v %v", qr, err)
	}

	poll := activities.QRPollInput{OfferID: offer.OfferID, QRCode: qr.QRCode, Now: time.Now()}
	st, err := run[activities.QRPollOutput](h, h.acts.PollQRStatus, poll)
	if err != nil || st.Status != "wait" || st.Confirmed != nil {
		t.Fatalf("before the scan: %+v %v", st, err)
	}
	// The owner of the existing bot scans. Its bot is paused, so its token was not in the
	// list: iLink binds a new bot, which replaces the paused one.
	if _, err := h.ctl.ScanQR(h.ctx, qr.QRCode, h.bot.Owner); err != nil {
		t.Fatal(err)
	}
	st, err = run[activities.QRPollOutput](h, h.acts.PollQRStatus, poll)
	if err != nil || st.Status != "scaned" {
		t.Fatalf("after the scan: %+v %v", st, err)
	}
	if n := h.count("SELECT count(*) FROM login_offers WHERE offer_id = $1 AND status = 'scanned'", offer.OfferID); n != 1 {
		t.Fatal("the offer was not marked scanned")
	}
	info, err := h.ctl.ConfirmQR(h.ctx, qr.QRCode)
	if err != nil || info.Bot == nil {
		t.Fatalf("confirm: %+v %v", info, err)
	}
	poll.Now = time.Now()
	st, err = run[activities.QRPollOutput](h, h.acts.PollQRStatus, poll)
	if err != nil || st.Status != "confirmed" || st.Confirmed == nil {
		t.Fatalf("confirmed: %+v %v", st, err)
	}
	c := st.Confirmed
	wantKey := store.AccountKey(info.Bot.BotID)
	if c.AccountKey != wantKey || c.Generation != 1 || !c.Registered || len(c.ReplacedAccountKeys) != 1 || c.ReplacedAccountKeys[0] != h.key {
		t.Fatalf("confirmed %+v", c)
	}
	blob, _ := json.Marshal(st)
	if strings.Contains(string(blob), info.Bot.Token) {
		t.Fatal("the activity result carries the bot token")
	}
	acct, err := h.store.GetAccountWithSecret(h.ctx, wantKey)
	if err != nil || acct.BotToken.Reveal() != info.Bot.Token || acct.Status != vocab.AccountActive ||
		acct.BaseURL != h.srv.URL+"/" || acct.OwnerPeerID != h.bot.Owner {
		t.Fatalf("registered account %+v %v", acct.Account, err)
	}
	if old := h.account(); old.Status != vocab.AccountReplaced {
		t.Fatalf("the owner's previous bot is %s, want replaced", old.Status)
	}

	// iLink repeats "confirmed": a retried poll finds the stored outcome.
	again, err := run[activities.QRPollOutput](h, h.acts.PollQRStatus, poll)
	if err != nil || again.Confirmed == nil || again.Confirmed.AccountKey != wantKey || again.Confirmed.Generation != 1 {
		t.Fatalf("retried confirmation: %+v %v", again, err)
	}
	if n := h.count("SELECT count(*) FROM enrollment_audit WHERE account_key = $1", wantKey); n != 1 {
		t.Fatalf("%d audit rows of the confirmed bot, want 1", n)
	}
}

func TestFetchQRCodeListsOurLiveTokensSoARescanIsBindedRedirect(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.newBot("")
	qr, err := run[activities.QRCodeOutput](h, h.acts.FetchQRCode, "qo_rescan")
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := h.ctl.QRSessions(h.ctx)
	if err != nil || len(sessions) != 1 || sessions[0].LocalTokens != 2 {
		t.Fatalf("qr sessions %+v %v", sessions, err)
	}
	if _, err := h.ctl.ScanQR(h.ctx, qr.QRCode, h.bot.Owner); err != nil {
		t.Fatal(err)
	}
	st, err := run[activities.QRPollOutput](h, h.acts.PollQRStatus, activities.QRPollInput{OfferID: "qo_rescan", QRCode: qr.QRCode, Now: time.Now()})
	if err != nil || st.Status != "binded_redirect" || st.Confirmed != nil {
		t.Fatalf("rescan by the owner: %+v %v", st, err)
	}
}

func TestConfirmingAnEnrollmentOfAKnownBotRotatesItsGeneration(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	now := time.Now()
	st := ilinkConfirmed(h.bot.BotID, h.bot.Owner, "new-token-of-the-same-bot")
	if _, err := h.store.CreateLoginOffer(h.ctx, now, "qo_rotate", "op", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	c, err := h.acts.confirm(h.ctx, now, "qo_rotate", st)
	if err != nil || c.Generation != 2 || c.Registered {
		t.Fatalf("rotation %+v %v", c, err)
	}
	acct, _ := h.store.GetAccountWithSecret(h.ctx, h.key)
	if acct.BotToken.Reveal() != "new-token-of-the-same-bot" || acct.Generation != 2 || acct.BaseURL != h.srv.URL+"/" {
		t.Fatalf("account %+v", acct.Account)
	}
}

func TestPollQRStatusFollowsARedirectHost(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	now := time.Now()
	if err := runErr(h, h.acts.CreateOffer, activities.OfferInput{OfferID: "qo_redirect", ExpiresAt: now.Add(time.Minute), Now: now}); err != nil {
		t.Fatal(err)
	}
	qr, err := run[activities.QRCodeOutput](h, h.acts.FetchQRCode, "qo_redirect")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.ctl.RedirectQR(h.ctx, qr.QRCode, strings.TrimPrefix(h.srv.URL, "http://")); err != nil {
		t.Fatal(err)
	}
	st, err := run[activities.QRPollOutput](h, h.acts.PollQRStatus, activities.QRPollInput{OfferID: "qo_redirect", QRCode: qr.QRCode, Now: time.Now()})
	if err != nil || st.Status != "scaned_but_redirect" || st.RedirectHost == "" {
		t.Fatalf("redirect %+v %v", st, err)
	}
	st, err = run[activities.QRPollOutput](h, h.acts.PollQRStatus, activities.QRPollInput{OfferID: "qo_redirect", QRCode: qr.QRCode, Host: st.RedirectHost, Now: time.Now()})
	if err != nil || st.Status == "" {
		t.Fatalf("poll at the redirect host %+v %v", st, err)
	}
}

func TestAConfirmationForAnOfferThatIsGoneIsNotRetried(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, err := h.acts.confirm(h.ctx, time.Now(), "qo_gone", ilinkConfirmed("abcdef012345@im.bot", "someone@im.wechat", "tok"))
	if err == nil || !strings.Contains(err.Error(), "invalid_input") {
		t.Fatalf("confirm without an offer: %v", err)
	}
	wantNonRetryable(t, err, string(vocab.CodeInvalidInput))
}

func TestCloseOfferIsIdempotent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	now := time.Now()
	if err := runErr(h, h.acts.CreateOffer, activities.OfferInput{OfferID: "qo_close", ExpiresAt: now.Add(time.Minute), Now: now}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := runErr(h, h.acts.CloseOffer, activities.CloseOfferInput{OfferID: "qo_close", Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	if n := h.count("SELECT count(*) FROM login_offers"); n != 0 {
		t.Fatalf("%d offers left", n)
	}
	err := runErr(h, h.acts.CreateOffer, activities.OfferInput{OfferID: "bad id", ExpiresAt: now.Add(time.Minute), Now: now})
	wantNonRetryable(t, err, string(vocab.CodeInvalidInput))
}

// ilinkConfirmed is a confirmed QR status without a base URL (the configured one applies).
func ilinkConfirmed(botID, owner, token string) *ilink.QRCodeStatus {
	return &ilink.QRCodeStatus{Status: ilink.QRConfirmed, ILinkBotID: botID, ILinkUserID: owner, BotToken: ilink.Secret(token)}
}
