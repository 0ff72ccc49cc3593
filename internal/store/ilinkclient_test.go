package store_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// iLinkOffered commits a deliverable message of b, opens a session on its window and
// queues it for the client.
func (e *env) iLinkOffered(b *bot, client, text string) store.ILinkOfferInput {
	e.t.Helper()
	res := e.commit(b, t0, b.msg(text, t0))
	if res.Deliverable == nil {
		e.t.Fatalf("message was not deliverable: %+v", res)
	}
	return e.reofferILink(b, client, res.Deliverable.ReplyWindowID, res.Deliverable.MessageKey)
}

func (e *env) reofferILink(b *bot, client string, windowID int64, messageKey string) store.ILinkOfferInput {
	e.t.Helper()
	b.nextID++
	tok := sealing.NewSecret(fmt.Sprintf("ilink-session-token-%s-%d", b.key, b.nextID))
	opened, err := e.store.OpenAgentSession(e.ctx, t0, store.OpenSessionInput{ReplyWindowID: windowID, Token: tok})
	if err != nil {
		e.t.Fatalf("open session: %v", err)
	}
	in := store.ILinkOfferInput{MessageKey: messageKey, AccountKey: b.key, Client: client, ReplyWindowID: windowID,
		SessionID: opened.Session.SessionID, Token: tok}
	if err := e.store.OfferToILinkClient(e.ctx, t0, in); err != nil {
		e.t.Fatalf("offer: %v", err)
	}
	return in
}

func TestAnILinkClientTokenIsStoredAsItsHashAndRevokingItRefusesItsBotsToo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	token, err := e.store.CreateILinkClient(e.ctx, t0, "openclaw", "alice")
	if err != nil {
		t.Fatal(err)
	}
	var dump []byte
	if err := e.pool.QueryRow(e.ctx, `SELECT convert_to(ilink_clients::text, 'UTF8') FROM ilink_clients`).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(token.Reveal(), store.ILinkClientTokenPrefix) || bytes.Contains(dump, []byte(token.Reveal())) {
		t.Fatal("the client token is not prefixed, or stored in plaintext")
	}
	_, err = e.store.CreateILinkClient(e.ctx, t0, "openclaw", "bob")
	wantCode(t, err, vocab.CodeILinkClientExists)

	// A login approved for one of the installation's bots gives a bot token that resolves
	// to the client and the bot.
	b := e.register()
	l, err := e.store.StartILinkLogin(e.ctx, t0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.ApproveILinkLogin(e.ctx, t0, strings.ToLower(l.Code), "openclaw", b.key, "alice"); err != nil {
		t.Fatal(err)
	}
	st, err := e.store.PollILinkLogin(e.ctx, t0, l.QRCode)
	if err != nil || st.Status != store.ILinkLoginConfirmed {
		t.Fatalf("poll: %+v %v", st, err)
	}
	c, found, err := e.store.ILinkCallerByToken(e.ctx, st.BotToken)
	if err != nil || !found || c.Client != "openclaw" || c.BotID != st.BotID || c.AccountKey != b.key || c.Revoked {
		t.Fatalf("the bot token resolves to %+v %v %v", c, found, err)
	}
	if changed, err := e.store.RevokeILinkClient(e.ctx, t0, "openclaw", "alice"); err != nil || !changed {
		t.Fatalf("revoke: %v %v", changed, err)
	}
	for _, tok := range []sealing.Secret{token, st.BotToken} {
		if c, found, err := e.store.ILinkCallerByToken(e.ctx, tok); err != nil || !found || !c.Revoked {
			t.Fatalf("a token of a revoked client resolves to %+v %v %v, want revoked", c, found, err)
		}
	}
	// A new token lifts the revocation, for the client's bots too.
	if _, err := e.store.ReissueILinkClientToken(e.ctx, t0, "openclaw"); err != nil {
		t.Fatal(err)
	}
	if c, _, _ := e.store.ILinkCallerByToken(e.ctx, st.BotToken); c.Revoked {
		t.Fatal("the bot token stays refused after a new client token")
	}
	_, err = e.store.RevokeILinkClient(e.ctx, t0, "nobody", "alice")
	wantCode(t, err, vocab.CodeILinkClientNotFound)
}

func TestAnILinkLoginIsWaitScannedConfirmedOnceThenExpired(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.store.CreateILinkClient(e.ctx, t0, "openclaw", "alice"); err != nil {
		t.Fatal(err)
	}
	b := e.register()
	l, err := e.store.StartILinkLogin(e.ctx, t0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	status := func(at time.Time, qr sealing.Secret) string {
		t.Helper()
		st, err := e.store.PollILinkLogin(e.ctx, at, qr)
		if err != nil {
			t.Fatal(err)
		}
		return st.Status
	}
	if s := status(t0, l.QRCode); s != store.ILinkLoginWait {
		t.Fatalf("a new login is %s", s)
	}
	if ok, err := e.store.ScanILinkLogin(e.ctx, t0, l.Code); err != nil || !ok {
		t.Fatalf("scan: %v %v", ok, err)
	}
	if s := status(t0, l.QRCode); s != store.ILinkLoginScanned {
		t.Fatalf("an opened login is %s", s)
	}
	if err := e.store.ApproveILinkLogin(e.ctx, t0, l.Code, "openclaw", b.key, "alice"); err != nil {
		t.Fatal(err)
	}
	// Approving routed the bot to the client.
	if r, found, err := e.store.GetRoute(e.ctx, b.key); err != nil || !found || r.Kind != vocab.RouteILink || r.ILinkClient != "openclaw" {
		t.Fatalf("route after approval: %+v %v %v", r, found, err)
	}
	wantCode(t, e.store.ApproveILinkLogin(e.ctx, t0, l.Code, "openclaw", b.key, "alice"), vocab.CodeILinkLoginNotFound)
	if s := status(t0, l.QRCode); s != store.ILinkLoginConfirmed {
		t.Fatalf("an approved login is %s", s)
	}
	if s := status(t0, l.QRCode); s != store.ILinkLoginExpired {
		t.Fatalf("a collected login is %s again, want expired (its token is handed out once)", s)
	}
	// A login nobody approves expires; an unknown poll key is expired too.
	late, err := e.store.StartILinkLogin(e.ctx, t0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if s := status(t0.Add(time.Minute), late.QRCode); s != store.ILinkLoginExpired {
		t.Fatalf("a login past its time is %s", s)
	}
	wantCode(t, e.store.ApproveILinkLogin(e.ctx, t0.Add(time.Minute), late.Code, "openclaw", b.key, "alice"), vocab.CodeILinkLoginNotFound)
	if s := status(t0, sealing.NewSecret(strings.Repeat("0", 64))); s != store.ILinkLoginExpired {
		t.Fatalf("an unknown poll key is %s", s)
	}
}

func TestAnILinkClientsQueueIsNumberedInCommitOrderAndAReofferKeepsItsPlace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.store.CreateILinkClient(e.ctx, t0, "openclaw", "alice"); err != nil {
		t.Fatal(err)
	}
	// Offers from many bots at once: the numbers are 1..n with no gap, so a cursor that
	// passed a number never skips an offer committed after it.
	const n = 12
	bots := make([]*bot, n)
	for i := range bots {
		bots[i] = e.register()
	}
	var wg sync.WaitGroup
	offers := make([]store.ILinkOfferInput, n)
	for i, b := range bots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			offers[i] = e.iLinkOffered(b, "openclaw", fmt.Sprintf("hello %d", i))
		}()
	}
	wg.Wait()
	got, err := e.store.ILinkClientOffers(e.ctx, "openclaw", "", 0, 100)
	if err != nil || len(got) != n {
		t.Fatalf("%d offers (%v), want %d", len(got), err, n)
	}
	for i, o := range got {
		if o.Seq != int64(i+1) {
			t.Fatalf("offer %d has number %d", i, o.Seq)
		}
	}
	// A re-offer (a new session) keeps the message's number; the cursor only moves on.
	first := got[0]
	var b *bot
	for i := range offers {
		if offers[i].MessageKey == first.MessageKey {
			b = bots[i]
		}
	}
	again := e.reofferILink(b, "openclaw", first.ReplyWindowID, first.MessageKey)
	o, found, err := e.store.GetILinkClientOffer(e.ctx, first.MessageKey)
	if err != nil || !found || o.Seq != first.Seq || o.SessionID != again.SessionID || o.Offers != 2 || o.Token.Reveal() != again.Token.Reveal() {
		t.Fatalf("the re-offer is %+v (%v)", o, err)
	}
	if err := e.store.AckILinkClientCursor(e.ctx, t0, "openclaw", "", 5); err != nil {
		t.Fatal(err)
	}
	if err := e.store.AckILinkClientCursor(e.ctx, t0, "openclaw", "", 3); err != nil {
		t.Fatal(err)
	}
	if seq, err := e.store.ILinkClientCursor(e.ctx, "openclaw", ""); err != nil || seq != 5 {
		t.Fatalf("the cursor is %d (%v), want 5: it never moves back", seq, err)
	}
	// One bot's view holds its own offers only.
	mine, err := e.store.ILinkClientOffers(e.ctx, "openclaw", b.key, 0, 100)
	if err != nil || len(mine) != 1 || mine[0].MessageKey != first.MessageKey {
		t.Fatalf("one bot's queue: %+v %v", mine, err)
	}
	// An offer to a client nobody added is refused and queues nothing.
	wantCode(t, e.store.OfferToILinkClient(e.ctx, t0, store.ILinkOfferInput{MessageKey: first.MessageKey, AccountKey: b.key,
		Client: "ghost", ReplyWindowID: first.ReplyWindowID, SessionID: again.SessionID, Token: again.Token}), vocab.CodeILinkClientNotFound)
}
