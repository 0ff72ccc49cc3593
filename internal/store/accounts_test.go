package store_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func registerInput(provider, owner string) store.ConfirmInput {
	return store.ConfirmInput{ProviderAccountID: provider, OwnerPeerID: owner,
		BaseURL: "https://ilinkai.weixin.qq.com", BotToken: sealing.NewSecret(provider + ":secret-token")}
}

// scannedOffer offers a login and marks it scanned: what ConfirmEnrollment confirms.
func (e *env) scannedOffer(id string) string {
	e.t.Helper()
	e.offer(id)
	if err := e.store.MarkOfferScanned(e.ctx, t0, id); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// confirm confirms the offer with in at generation.
func (e *env) confirm(offer string, generation int32, in store.ConfirmInput) (store.ConfirmResult, error) {
	in.OfferID, in.AccountGeneration, in.MaxAccounts = offer, generation, 10
	return e.store.ConfirmEnrollment(e.ctx, t0, in)
}

func TestRegistrationSealsTokenAndNormalisesBaseURL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := registerInput("aaaaaaaaaaaa@im.bot", "o9cq8-owner-a@im.wechat")
	in.BaseURL = "HTTPS://ILinkAI.weixin.qq.com"
	r, err := e.confirm(e.scannedOffer("qo_seal"), 1, in)
	if err != nil {
		t.Fatal(err)
	}
	a := r.Account
	if a.BaseURL != "https://ilinkai.weixin.qq.com/" || a.Generation != 1 || a.Status != vocab.AccountActive {
		t.Fatalf("unexpected account %+v", a)
	}
	if a.AccountKey != store.AccountKey(in.ProviderAccountID) || !strings.HasPrefix(a.AccountKey, "ilk_") {
		t.Fatalf("account key %q is not the stable hash of the bot id", a.AccountKey)
	}
	var ciphertext []byte
	if err := e.pool.QueryRow(e.ctx, "SELECT ciphertext FROM account_secrets WHERE account_key = $1", a.AccountKey).Scan(&ciphertext); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(ciphertext, []byte("secret-token")) {
		t.Fatal("bot token is stored in plaintext")
	}
	got, err := e.store.GetAccountWithSecret(e.ctx, a.AccountKey)
	if err != nil {
		t.Fatal(err)
	}
	if got.BotToken.Reveal() != in.BotToken.Reveal() {
		t.Fatal("bot token does not round-trip")
	}
}

func TestRegistrationRefusesPlainHTTPExceptLoopback(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := registerInput("bbbbbbbbbbbb@im.bot", "o9cq8-owner-b@im.wechat")
	offer := e.scannedOffer("qo_base_url")
	for _, u := range []string{"http://ilinkai.weixin.qq.com", "ftp://x", "https://user:pw@host", "not a url", ""} {
		in.BaseURL = u
		before := e.digest()
		_, err := e.confirm(offer, 1, in)
		wantCode(t, err, vocab.CodeInvalidInput)
		e.unchanged(before)
	}
	in.BaseURL = "http://127.0.0.1:8089"
	r, err := e.confirm(offer, 1, in)
	if err != nil {
		t.Fatal(err)
	}
	if r.Account.BaseURL != "http://127.0.0.1:8089/" {
		t.Fatalf("base URL %q", r.Account.BaseURL)
	}
}

func TestRotationIsCompareAndSetOnGeneration(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	rot := store.ConfirmInput{ProviderAccountID: b.provider, OwnerPeerID: b.owner,
		BaseURL: "https://ilinkai.weixin.qq.com", BotToken: sealing.NewSecret("new-token-gen2")}
	r, err := e.confirm(e.scannedOffer("qo_rotate"), 2, rot)
	if err != nil {
		t.Fatal(err)
	}
	if r.Account.Generation != 2 || r.Registered {
		t.Fatalf("generation %d (registered %v), want a rotation to 2", r.Account.Generation, r.Registered)
	}
	stale, mismatch := e.scannedOffer("qo_stale"), e.scannedOffer("qo_mismatch")
	before := e.digest()
	_, err = e.confirm(stale, 2, rot) // stale expected generation
	wantCode(t, err, vocab.CodeGenerationConflict)
	rot.OwnerPeerID = "o9cq8-someone-else@im.wechat"
	_, err = e.confirm(mismatch, 3, rot)
	wantCode(t, err, vocab.CodePairMismatch)
	e.unchanged(before)
	got, err := e.store.GetAccountWithSecret(e.ctx, b.key)
	if err != nil {
		t.Fatal(err)
	}
	if got.BotToken.Reveal() != "new-token-gen2" {
		t.Fatal("rotation did not store the new token")
	}
}

func TestRotationCancelsOpenWindowsFailsPendingClosesSessionsDeletesSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, tok := e.deliver(b, "hello")
	w := res.Deliverable.ReplyWindowID
	if _, err := e.reserve(t0, storeReply(tok, "pending one")); err != nil {
		t.Fatal(err)
	}
	r, err := e.confirm(e.scannedOffer("qo_rotate"), 2, store.ConfirmInput{
		ProviderAccountID: b.provider, OwnerPeerID: b.owner, BaseURL: "https://ilinkai.weixin.qq.com",
		BotToken: sealing.NewSecret("rotated")})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.CancelledWindowIDs) != 1 || r.CancelledWindowIDs[0] != w {
		t.Fatalf("cancelled windows %v, want [%d]", r.CancelledWindowIDs, w)
	}
	assertRetired(t, e, w, vocab.WindowCancelled)
	_, err = e.store.ReserveAndStart(e.ctx, t0, storeReply(tok, "after rotation"), store.SendPacing{})
	wantCode(t, err, vocab.CodeReplyWindowInactive)
}

// assertRetired checks everything retirement promises for a window.
func assertRetired(t *testing.T, e *env, windowID int64, state string) {
	t.Helper()
	w, err := e.store.GetWindow(e.ctx, windowID)
	if err != nil {
		t.Fatal(err)
	}
	if w.State != state || w.Reserved != 0 {
		t.Fatalf("window %d is %s with reserved %d, want %s with 0", windowID, w.State, w.Reserved, state)
	}
	if n := e.count("SELECT count(*) FROM reply_window_secrets WHERE reply_window_id = $1", windowID); n != 0 {
		t.Fatal("retired window kept its context token")
	}
	if n := e.count("SELECT count(*) FROM send_attempts WHERE reply_window_id = $1 AND status = 'pending'", windowID); n != 0 {
		t.Fatal("retired window kept pending attempts")
	}
	if n := e.count("SELECT count(*) FROM agent_sessions WHERE reply_window_id = $1 AND closed_at IS NULL", windowID); n != 0 {
		t.Fatal("retired window kept open agent sessions")
	}
}

func TestPauseStopsPollingAndResumeRestartsIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, _ := e.deliver(b, "hello")
	if _, err := e.store.PauseAccount(e.ctx, t0, b.key, 1, t0.Add(time.Hour), "stale token (-14)"); err != nil {
		t.Fatal(err)
	}
	if w, _ := e.store.GetWindow(e.ctx, res.Deliverable.ReplyWindowID); w.State != vocab.WindowOpen {
		t.Fatal("a pause must not retire the user's reply window")
	}
	// The page that was in flight when the pause landed is stored; the result tells the
	// poller to stop, and its message waits (nobody is handed it while paused).
	held, err := e.tryCommit(b, t0, b.msg("in flight at the pause", t0))
	if err != nil || held.Inserted != 1 || held.AccountStatus != vocab.AccountPaused || held.Deliverable == nil {
		t.Fatalf("page in flight at the pause: %+v %v", held, err)
	}
	_, err = e.store.OpenAgentSession(e.ctx, t0, store.OpenSessionInput{ReplyWindowID: held.Deliverable.ReplyWindowID,
		Token: sealing.NewSecret("token-while-paused-0123456789")})
	wantCode(t, err, vocab.CodeAccountNotActive)
	if _, err := e.store.PauseAccount(e.ctx, t0, b.key, 1, t0, "ends now"); store.CodeOf(err) != vocab.CodeInvalidInput {
		t.Fatalf("a pause that does not end in the future: %v", err)
	}
	if _, err := e.store.ResumeAccount(e.ctx, t0, b.key, 1); err != nil {
		t.Fatal(err)
	}
	// After the resume the held message reaches the agent with the next delivery.
	next := e.commit(b, t0.Add(time.Second), b.msg("after resume", t0.Add(time.Second)))
	m, err := e.store.GetMessage(e.ctx, next.Deliverable.MessageKey)
	if err != nil || !strings.Contains(m.Payload.Summary, "in flight at the pause") || next.AccountStatus != vocab.AccountActive {
		t.Fatalf("delivery after the resume %+v: %+v %v", next, m.Payload, err)
	}
}

func TestNeedsReloginStopsAccountAndCancelsWindows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, _ := e.deliver(b, "hello")
	ch, err := e.store.MarkNeedsRelogin(e.ctx, t0, b.key, 1, "second -14 after pause")
	if err != nil {
		t.Fatal(err)
	}
	if ch.Account.Status != vocab.AccountNeedsRelogin || len(ch.CancelledWindowIDs) != 1 {
		t.Fatalf("unexpected %+v", ch)
	}
	assertRetired(t, e, res.Deliverable.ReplyWindowID, vocab.WindowCancelled)
	_, err = e.store.ResumeAccount(e.ctx, t0, b.key, 1)
	wantCode(t, err, vocab.CodeAccountNotActive)
	_, err = e.store.MarkNeedsRelogin(e.ctx, t0, b.key, 2, "wrong generation")
	wantCode(t, err, vocab.CodeGenerationConflict)
}

func TestDisableAccountCancelsWindows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, _ := e.deliver(b, "hello")
	ch, err := e.store.DisableAccount(e.ctx, t0, b.key, 1, "operator removed it")
	if err != nil {
		t.Fatal(err)
	}
	if ch.Account.Status != vocab.AccountDisabled {
		t.Fatalf("status %s", ch.Account.Status)
	}
	assertRetired(t, e, res.Deliverable.ReplyWindowID, vocab.WindowCancelled)
	// A disabled owner may enrol a new bot: only live accounts are replaced.
	if r, err := e.confirm(e.scannedOffer("qo_new_bot"), 1, registerInput("eeeeeeeeeeee@im.bot", b.owner)); err != nil || len(r.ReplacedAccountKeys) != 0 {
		t.Fatalf("new bot of a disabled owner: %+v %v", r, err)
	}
}

func TestAccountSecretDoesNotPrint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	a, err := e.store.GetAccountWithSecret(e.ctx, b.key)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprintf("%v", a), fmt.Sprintf("%+v", a), fmt.Sprintf("%#v", a)} {
		if strings.Contains(s, a.BotToken.Reveal()) {
			t.Fatalf("bot token printed: %s", s)
		}
	}
}
