package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func TestCiphertextCopiedToAnotherRowDoesNotOpen(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.register(), e.register()
	// Bot token of a copied onto b's row.
	if _, err := e.pool.Exec(e.ctx, `UPDATE account_secrets SET nonce = src.nonce, ciphertext = src.ciphertext, key_generation = src.key_generation
		FROM account_secrets src WHERE src.account_key = $1 AND account_secrets.account_key = $2`, a.key, b.key); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.GetAccountWithSecret(e.ctx, b.key); store.CodeOf(err) != vocab.CodeSealedUnreadable {
		t.Fatalf("a bot token moved to another account opened: %v", err)
	}
	// Context token of one window copied onto another window.
	w1 := e.commit(a, t0, a.msg("one", t0)).Deliverable.ReplyWindowID
	c := e.register()
	w3 := e.commit(c, t0, c.msg("three", t0)).Deliverable.ReplyWindowID
	if _, err := e.pool.Exec(e.ctx, `UPDATE reply_window_secrets SET nonce = src.nonce, ciphertext = src.ciphertext
		FROM reply_window_secrets src WHERE src.reply_window_id = $1 AND reply_window_secrets.reply_window_id = $2`, w1, w3); err != nil {
		t.Fatal(err)
	}
	tok3 := sealing.NewSecret("session-of-window-3")
	if _, err := e.store.OpenAgentSession(e.ctx, t0, store.OpenSessionInput{ReplyWindowID: w3, Token: tok3}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.ReserveAndStart(e.ctx, t0, storeReply(tok3, "x"), store.SendPacing{}); store.CodeOf(err) != vocab.CodeInternal {
		t.Fatalf("a context token moved to another window opened: %v", err)
	}
	// An image locator copied to another position, and a ciphertext of another purpose.
	m := withImages(c.msg("two images", t0.Add(time.Second)), 2)
	d := e.commit(c, t0.Add(time.Second), m).Deliverable
	key := d.MessageKey
	tok := sealing.NewSecret("session-of-the-images")
	if _, err := e.store.OpenAgentSession(e.ctx, t0.Add(time.Second), store.OpenSessionInput{ReplyWindowID: d.ReplyWindowID, Token: tok}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `UPDATE inbound_images SET nonce = src.nonce, ciphertext = src.ciphertext
		FROM inbound_images src WHERE src.message_key = $1 AND src.position = 0 AND inbound_images.position = 1`, key); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.GetAttachment(e.ctx, t0.Add(time.Second), store.ByToken(tok), key, 1); store.CodeOf(err) != vocab.CodeInternal {
		t.Fatalf("an image locator moved to another position opened: %v", err)
	}
	if _, err := e.pool.Exec(e.ctx, `UPDATE inbound_images SET nonce = s.nonce, ciphertext = s.ciphertext
		FROM account_secrets s WHERE s.account_key = $1 AND inbound_images.position = 0`, c.key); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.GetAttachment(e.ctx, t0.Add(time.Second), store.ByToken(tok), key, 0); store.CodeOf(err) != vocab.CodeInternal {
		t.Fatalf("a bot token opened as an image locator: %v", err)
	}
}

func TestKeyRotationKeepsOldRowsReadableAndSealsNewOnesWithNewGeneration(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.register()
	k2, err := sealing.NewKeyring(2, map[int32][]byte{
		1: []byte(testkit.SealingKey),
		2: []byte("fedcba9876543210fedcba9876543210"),
	})
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := store.New(e.pool, k2, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rotated.GetAccountWithSecret(e.ctx, old.key); err != nil {
		t.Fatalf("old row unreadable after key rotation: %v", err)
	}
	a, err := storetest.RegisterAccount(e.ctx, rotated, t0, registerInput("a0000000000f@im.bot", "o9-new-owner@im.wechat"))
	if err != nil {
		t.Fatal(err)
	}
	if n := e.count("SELECT key_generation FROM account_secrets WHERE account_key = $1", a.AccountKey); n != 2 {
		t.Fatalf("new row sealed with key generation %d, want 2", n)
	}
	if _, err := e.store.GetAccountWithSecret(e.ctx, a.AccountKey); store.CodeOf(err) != vocab.CodeSealedUnreadable {
		t.Fatalf("a key ring without generation 2 opened a generation-2 row: %v", err)
	}
}

func TestNoSecretInStoreErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.register()
	res, tok := e.deliver(b, "hello")
	secrets := []string{tok.Reveal(), "CKctx-"}
	var errs []error
	_, err := e.reserve(t0, store.ReplyInput{Session: store.ByToken(sealing.NewSecret("wrong-" + tok.Reveal())), Content: text("x")})
	errs = append(errs, err)
	bad := b.msg("x", t0)
	bad.PeerID = "o9-other@im.wechat"
	_, err = e.tryCommit(b, t0, bad)
	errs = append(errs, err)
	_, err = storetest.RegisterAccount(e.ctx, e.store, t0, store.ConfirmInput{ProviderAccountID: b.provider, OwnerPeerID: b.owner,
		BaseURL: "https://x", BotToken: sealing.NewSecret("bot-token-in-error?")})
	errs = append(errs, err)
	secrets = append(secrets, "bot-token-in-error?")
	_ = res
	for _, err := range errs {
		if err == nil {
			t.Fatal("expected an error")
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Fatalf("error %q contains a secret", err)
			}
		}
	}
}
