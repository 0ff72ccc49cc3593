package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// TestStoreCeilingAnswersEachMessageOnceThroughTheStore drives the store ceiling's system
// as the saturation loop does, with 20 exchanges over 3 bots at once (several of one bot
// among them): every exchange ends answered, every message is stored handled with exactly
// one attempt, sent, and none counts as doubled. The system's poll leases are released
// when its context ends.
func TestStoreCeilingAnswersEachMessageOnceThroughTheStore(t *testing.T) {
	pool := dbtest.NewPool(t)
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		t.Fatal(err)
	}
	ring, err := sealing.ParseKeyring("1:" + base64.StdEncoding.EncodeToString(key[:]))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.New(pool, ring, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	const bots, exchanges = 3, 20
	enrolled := make([]bot, bots)
	for i := range enrolled {
		enrolled[i] = enrollForStoreCeiling(ctx, t, st, i)
	}
	sysCtx, stop := context.WithCancel(ctx)
	defer stop()
	v, err := newStoreSystem(sysCtx, st, enrolled)
	if err != nil {
		t.Fatal(err)
	}
	sys := v.(*storeSystem)

	errs := make([]error, exchanges)
	lat := make([]time.Duration, exchanges)
	var wg sync.WaitGroup
	for n := range exchanges {
		wg.Go(func() { lat[n], errs[n] = sys.exchangeTimed(ctx, n%bots, n) })
	}
	wg.Wait()
	for n, err := range errs {
		if err != nil {
			t.Errorf("exchange %d: %v", n, err)
		} else if lat[n] <= 0 {
			t.Errorf("exchange %d: latency %v, want positive", n, lat[n])
		}
	}

	var total, handled int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = $1) FROM inbound_messages`,
		vocab.MessageHandled).Scan(&total, &handled); err != nil {
		t.Fatal(err)
	}
	if total != exchanges || handled != exchanges {
		t.Errorf("inbound_messages: %d rows, %d handled; want %d, all handled", total, handled, exchanges)
	}
	rows, err := pool.Query(ctx, `SELECT m.message_key, count(a.attempt_id), count(a.attempt_id) FILTER (WHERE a.status = $1)
		FROM inbound_messages m LEFT JOIN send_attempts a ON a.source_message_key = m.message_key
		GROUP BY m.message_key`, vocab.AttemptSent)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var key string
		var attempts, sent int
		if err := rows.Scan(&key, &attempts, &sent); err != nil {
			t.Fatal(err)
		}
		if attempts != 1 || sent != 1 {
			t.Errorf("message %s: %d attempts, %d sent; want exactly one, sent", key, attempts, sent)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if d := sys.doubled(); d != 0 {
		t.Errorf("doubled() = %d, want 0", d)
	}
	if n, d := sys.waits(); n != 0 {
		t.Logf("the store made %d sends wait, %v in all", n, d)
	}

	stop()
	select {
	case <-sys.closed():
	case <-ctx.Done():
		t.Fatal("the system's leases were not released")
	}
	var held int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM poll_leases WHERE holder = $1`, sys.holder).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held != 0 {
		t.Errorf("%d poll leases still held after the system's context ended", held)
	}
}

// enrollForStoreCeiling enrolls bot i in st as run.enrollOne does (a login offer, its
// scan, then ConfirmEnrollment), with identities of the simulator's shape.
func enrollForStoreCeiling(ctx context.Context, t *testing.T, st *store.Store, i int) bot {
	t.Helper()
	now := time.Now()
	offer := fmt.Sprintf("qo_storeceiling_%d", i+1)
	if _, err := st.CreateLoginOffer(ctx, now, offer, "loadtest", now.Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkOfferScanned(ctx, now, offer); err != nil {
		t.Fatal(err)
	}
	botID, owner := fmt.Sprintf("storeceiling%d@im.bot", i+1), fmt.Sprintf("owner%d@im.wechat", i+1)
	res, err := st.ConfirmEnrollment(ctx, now, store.ConfirmInput{
		OfferID: offer, AccountGeneration: 1, MaxAccounts: 100,
		ProviderAccountID: botID, OwnerPeerID: owner, BaseURL: "http://127.0.0.1:9", BotToken: sealing.NewSecret("bot-token-" + botID),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Registered || res.Account.Status != vocab.AccountActive {
		t.Fatalf("enrollment of %s ended %+v", botID, res)
	}
	return bot{id: botID, owner: owner, accountKey: res.Account.AccountKey}
}
