package e2e_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// TestAnUnreadableAccountNeverBlocksEnrollmentNorTheOtherPollers: a worker whose sealing
// keys cannot open one account's bot token (sealed under a key generation it lacks) starts,
// polls the readable account, enrolls a new bot, and stops the unreadable account's poller
// after one non-retryable poll failure naming the fix; the account stays active, logged
// once and counted in ilinkflow_accounts_unreadable.
func TestAnUnreadableAccountNeverBlocksEnrollmentNorTheOtherPollers(t *testing.T) {
	t.Parallel()
	logs := &testkit.SyncBuffer{}
	reg, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	var good, bad ilinksim.BotInfo
	var goodKey, badKey string
	s := start(t, store.DefaultLimits(), func(cfg *gateway.Config, o *gateway.Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		o.Metrics = reg
		// Before the worker starts: one account sealed with the worker's keys, one with a
		// key generation the worker does not hold.
		other, err := sealing.NewKeyring(3, map[int32][]byte{3: []byte("a-key-this-worker-does-not-hold!")})
		if err != nil {
			t.Fatal(err)
		}
		ctl := ilinksim.NewControl(cfg.ILinkBaseURL, http.DefaultClient)
		register := func(keys *sealing.Keyring) (ilinksim.BotInfo, string) {
			ctx := context.Background()
			bot, err := ctl.CreateBot(ctx, ilinksim.CreateBotRequest{})
			if err != nil {
				t.Fatal(err)
			}
			st, err := store.New(o.Pool, keys, store.DefaultLimits())
			if err != nil {
				t.Fatal(err)
			}
			a, err := storetest.RegisterAccount(ctx, st, time.Now(), store.ConfirmInput{ProviderAccountID: bot.BotID,
				OwnerPeerID: bot.Owner, BaseURL: cfg.ILinkBaseURL, BotToken: sealing.NewSecret(bot.Token)})
			if err != nil {
				t.Fatal(err)
			}
			return bot, a.AccountKey
		}
		good, goodKey = register(keyring)
		bad, badKey = register(other)
	})

	// The unreadable account's poller (started by the start-up reconcile) stops after one
	// non-retryable poll failure; its account stays active.
	s.waitClosed(s.pollerWF(badKey), time.Minute)
	if a, err := s.store.GetAccount(s.ctx, badKey); err != nil || a.Status != vocab.AccountActive {
		t.Fatalf("unreadable account %+v %v, want it left active", a, err)
	}
	failures := 0
	it := s.tc.GetWorkflowHistory(s.ctx, s.pollerWF(badKey), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetEventType() != enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED {
			continue
		}
		f := ev.GetActivityTaskFailedEventAttributes().GetFailure()
		info := f.GetApplicationFailureInfo()
		if info.GetType() != string(vocab.CodeSealedUnreadable) || !info.GetNonRetryable() ||
			!strings.Contains(f.GetMessage(), "key generation 3 missing") || !strings.Contains(f.GetMessage(), sealing.EnvKeys) {
			t.Fatalf("the poll failed with %v, want a non-retryable sealed_unreadable naming the fix", f)
		}
		failures++
	}
	if failures != 1 {
		t.Fatalf("%d failed poll activities, want 1", failures)
	}

	// The readable account polls: a message reaches the agent.
	if _, err := s.ctl.InjectText(s.ctx, good.BotID, "", "hello beside an unreadable account"); err != nil {
		t.Fatal(err)
	}
	s.openWindow(goodKey, 0)

	// A new bot enrolls; the QR request listed the readable token alone.
	enrolled := s.enroll("qo_beside_unreadable", "")
	s.eventually("the new bot's poller running", 30*time.Second, func() (bool, error) {
		return s.running(s.pollerWF(enrolled.AccountKey)), nil
	})
	sessions, err := s.ctl.QRSessions(s.ctx)
	if err != nil || len(sessions) != 1 || sessions[0].LocalTokens != 1 {
		t.Fatalf("qr sessions %+v %v, want one listing the readable token alone", sessions, err)
	}

	text := logs.String()
	if n := strings.Count(text, "account skipped: its bot token cannot be opened"); n != 1 {
		t.Fatalf("the unreadable account was logged %d times, want once:\n%s", n, text)
	}
	if !strings.Contains(text, "account="+badKey) || !strings.Contains(text, "key_generation=3") {
		t.Fatalf("the warning does not name the account and its key generation:\n%s", text)
	}
	for _, tok := range []string{good.Token, bad.Token} {
		if strings.Contains(text, tok) {
			t.Fatal("a bot token reached the log")
		}
	}
	fams, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	gauge := -1.0
	for _, f := range fams {
		if f.GetName() == "ilinkflow_accounts_unreadable" {
			gauge = f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	if gauge != 1 {
		t.Fatalf("ilinkflow_accounts_unreadable = %v, want 1", gauge)
	}
}
