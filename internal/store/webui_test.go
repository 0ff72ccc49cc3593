package store_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

func TestAWebUISessionIsStoredAsItsHashAndEndsAtItsExpiryOrLogout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sess, err := e.store.NewWebUISession(e.ctx, t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var dump []byte
	if err := e.pool.QueryRow(e.ctx, `SELECT convert_to(webui_sessions::text, 'UTF8') FROM webui_sessions`).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(dump, []byte(sess.Token.Reveal())) {
		t.Fatal("the session token is stored in plaintext")
	}
	// A second store over the same database (another worker, or this one restarted)
	// knows the session.
	other, err := store.New(e.pool, testKeys, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if live, found, err := other.WebUISession(e.ctx, t0.Add(59*time.Minute), sess.Token.Reveal()); err != nil || !found || live.CSRF != sess.CSRF || live.HasFlash {
		t.Fatalf("the session on another store: %+v %v %v", live, found, err)
	}
	if _, found, _ := e.store.WebUISession(e.ctx, t0.Add(time.Hour), sess.Token.Reveal()); found {
		t.Fatal("the session outlived its expiry")
	}
	if _, found, _ := e.store.WebUISession(e.ctx, t0, "not a token"); found {
		t.Fatal("a malformed token found a session")
	}
	if err := e.store.EndWebUISession(e.ctx, sess.Token.Reveal()); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := e.store.WebUISession(e.ctx, t0, sess.Token.Reveal()); found {
		t.Fatal("the session outlived its logout")
	}
}

func TestAFlashIsShownOnceWithItsKind(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sess, err := e.store.NewWebUISession(e.ctx, t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tok := sess.Token.Reveal()
	if err := e.store.SetWebUIFlash(e.ctx, tok, "warning", "x"); store.CodeOf(err) != vocab.CodeInvalidInput {
		t.Fatalf("an unknown kind: %v", err)
	}
	if err := e.store.SetWebUIFlash(e.ctx, tok, store.FlashError, "pause failed"); err != nil {
		t.Fatal(err)
	}
	if live, _, _ := e.store.WebUISession(e.ctx, t0, tok); !live.HasFlash {
		t.Fatal("the session does not say it holds a message")
	}
	kind, msg, err := e.store.TakeWebUIFlash(e.ctx, tok)
	if err != nil || kind != store.FlashError || msg != "pause failed" {
		t.Fatalf("took %q %q %v", kind, msg, err)
	}
	if kind, msg, _ := e.store.TakeWebUIFlash(e.ctx, tok); kind != "" || msg != "" {
		t.Fatalf("the flash was shown twice: %q %q", kind, msg)
	}
	if live, _, _ := e.store.WebUISession(e.ctx, t0, tok); live.HasFlash {
		t.Fatal("the session still says it holds a message")
	}
}

func TestAnOwnerLinkOpensItsOneOfferUntilItsExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	exp := t0.Add(5 * time.Minute)
	tok, err := e.store.NewOwnerLink(e.ctx, t0, "qo_0123456789abcdef", exp)
	if err != nil {
		t.Fatal(err)
	}
	offer, until, found, err := e.store.OwnerLink(e.ctx, t0.Add(time.Minute), tok.Reveal())
	if err != nil || !found || offer != "qo_0123456789abcdef" || !until.Equal(exp) {
		t.Fatalf("the link opens %q until %v (%v %v)", offer, until, found, err)
	}
	if _, _, found, _ := e.store.OwnerLink(e.ctx, exp, tok.Reveal()); found {
		t.Fatal("the link outlived the enrollment")
	}
	if _, err := e.store.NewOwnerLink(e.ctx, t0, "qo_x", t0); store.CodeOf(err) != vocab.CodeInvalidInput {
		t.Fatalf("a link that expires at once: %v", err)
	}
	if _, err := e.store.NewOwnerLink(e.ctx, t0, "not an offer", exp); store.CodeOf(err) != vocab.CodeInvalidInput {
		t.Fatalf("a bad offer id: %v", err)
	}
	n, err := e.store.ForgetExpiredWebUIState(e.ctx, exp.Add(time.Second))
	if err != nil || n != 1 {
		t.Fatalf("forgot %d (%v)", n, err)
	}
}
