package activity

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// unreadableLog is the warning that names an unreadable account (once per process).
const unreadableLog = "account skipped: its bot token cannot be opened"

// newUnreadableBot creates a bot in the simulator and registers it through a store whose
// keyring holds another key under generation 3 only: the harness's store (generation 1)
// cannot open its token.
func (h *harness) newUnreadableBot() (ilinksim.BotInfo, string) {
	h.t.Helper()
	keys, err := sealing.NewKeyring(3, map[int32][]byte{3: []byte("a-key-this-worker-does-not-hold!")})
	if err != nil {
		h.t.Fatal(err)
	}
	other, err := store.New(h.pool, keys, store.DefaultLimits())
	if err != nil {
		h.t.Fatal(err)
	}
	bot, err := h.ctl.CreateBot(h.ctx, ilinksim.CreateBotRequest{})
	if err != nil {
		h.t.Fatal(err)
	}
	acct, err := storetest.RegisterAccount(h.ctx, other, time.Now(), store.ConfirmInput{
		ProviderAccountID: bot.BotID, OwnerPeerID: bot.Owner, BaseURL: h.srv.URL, BotToken: sealing.NewSecret(bot.Token),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return bot, acct.AccountKey
}

// withMetrics gives the harness's activities product metrics on a registry of their own.
func (h *harness) withMetrics() *prometheus.Registry {
	h.t.Helper()
	reg := prometheus.NewRegistry()
	p, err := metrics.NewProduct(reg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.acts.Metrics = p
	return reg
}

// gauge reads a gauge without labels from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

func TestEnrollmentSkipsAnUnreadableAccountsTokenLogsItOnceAndCountsIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	reg := h.withMetrics()
	_, badKey := h.newUnreadableBot()

	for i := 0; i < 2; i++ {
		if _, err := run[activities.QRCodeOutput](h, h.acts.FetchQRCode, "qo_unreadable_"+string(rune('a'+i))); err != nil {
			t.Fatalf("FetchQRCode %d beside an unreadable account: %v", i, err)
		}
	}
	sessions, err := h.ctl.QRSessions(h.ctx)
	if err != nil || len(sessions) != 2 || sessions[0].LocalTokens != 1 || sessions[1].LocalTokens != 1 {
		t.Fatalf("qr sessions %+v %v, want the readable token alone in each", sessions, err)
	}
	logs := h.logs.String()
	if n := strings.Count(logs, unreadableLog); n != 1 {
		t.Fatalf("the unreadable account was logged %d times, want once:\n%s", n, logs)
	}
	if !strings.Contains(logs, "account="+badKey) || !strings.Contains(logs, "key_generation=3") ||
		!strings.Contains(logs, "add the key of generation 3") || !strings.Contains(logs, sealing.EnvKeys) {
		t.Fatalf("the warning does not name the account, the key generation and the fix:\n%s", logs)
	}
	if g := gauge(t, reg, "ilinkflow_accounts_unreadable"); g != 1 {
		t.Fatalf("ilinkflow_accounts_unreadable = %v, want 1", g)
	}

	// A new bot enrolls through the last QR code.
	qr := sessions[1].QRCode
	if _, err := h.ctl.ScanQR(h.ctx, qr, ""); err != nil {
		t.Fatal(err)
	}
	info, err := h.ctl.ConfirmQR(h.ctx, qr)
	if err != nil || info.Bot == nil {
		t.Fatalf("confirm: %+v %v", info, err)
	}
	offer := "qo_unreadable_b"
	now := time.Now()
	if err := runErr(h, h.acts.CreateOffer, activities.OfferInput{OfferID: offer, ExpiresAt: now.Add(time.Minute), Now: now}); err != nil {
		t.Fatal(err)
	}
	st, err := run[activities.QRPollOutput](h, h.acts.PollQRStatus, activities.QRPollInput{OfferID: offer, QRCode: qr, Now: now})
	if err != nil || st.Status != "confirmed" || st.Confirmed == nil || st.Confirmed.AccountKey != store.AccountKey(info.Bot.BotID) {
		t.Fatalf("enrollment beside an unreadable account: %+v %v", st, err)
	}
}

func TestPollOfAnUnreadableAccountEndsNonRetryablyWhileTheReadableOnePolls(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	reg := h.withMetrics()
	_, badKey := h.newUnreadableBot()

	for i := 0; i < 2; i++ {
		_, err := run[activities.PollResult](h, h.acts.PollAccount, activities.PollInput{AccountKey: badKey, Generation: 1})
		wantNonRetryable(t, err, string(vocab.CodeSealedUnreadable))
		if !strings.Contains(err.Error(), "key generation 3 missing") || !strings.Contains(err.Error(), sealing.EnvKeys) {
			t.Fatalf("the poll's error %q does not name the missing key generation and the fix", err)
		}
	}
	if n := strings.Count(h.logs.String(), unreadableLog); n != 1 {
		t.Fatalf("the unreadable account was logged %d times, want once", n)
	}
	if g := gauge(t, reg, "ilinkflow_accounts_unreadable"); g != 1 {
		t.Fatalf("ilinkflow_accounts_unreadable = %v, want 1", g)
	}
	if a, err := h.store.GetAccount(h.ctx, badKey); err != nil || a.Status != vocab.AccountActive {
		t.Fatalf("the unreadable account is %+v %v, want it left active for a worker with the key", a, err)
	}
	if n := h.count("SELECT count(*) FROM poll_leases WHERE account_key = $1 AND holder IS NOT NULL", badKey); n != 0 {
		t.Fatalf("the ended poll holds its lease")
	}

	// The readable account polls as ever.
	h.deliver("hello beside an unreadable account")
}
