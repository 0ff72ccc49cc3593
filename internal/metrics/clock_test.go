package metrics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// The seconds since an account's last good poll are read on one clock, the database's,
// whichever process recorded the poll or the activation and whatever its clock says: never
// negative (a clock ahead), not an hour stale for a bot polled just now (a clock behind),
// and the same figure in the gauge and in /healthz.
func TestTheSecondsSinceTheLastGoodPollAreOnTheDatabaseClockWhateverTheWorkersClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.New(dbtest.NewPool(t), testkit.Keyring, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Now()
	register := func(n int, at time.Time) string {
		t.Helper()
		provider := fmt.Sprintf("%012x@im.bot", n)
		a, err := storetest.RegisterAccount(ctx, st, at, store.ConfirmInput{
			ProviderAccountID: provider, OwnerPeerID: fmt.Sprintf("o9cq8clockowner%013d@im.wechat", n),
			BaseURL: "https://ilinkai.weixin.qq.com", BotToken: sealing.NewSecret(provider + ":tok"),
		})
		if err != nil {
			t.Fatal(err)
		}
		return a.AccountKey
	}
	ahead := register(1, wall.Add(-time.Hour))  // polled by a worker whose clock is an hour ahead
	behind := register(2, wall.Add(-time.Hour)) // polled by a worker whose clock is an hour behind
	activatedAhead := register(3, wall.Add(time.Hour))
	silent := register(4, wall.Add(-time.Hour)) // activated an hour ago, never polled: stale
	if err := st.RecordPoll(ctx, wall.Add(time.Hour), ahead, 1); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordPoll(ctx, wall.Add(-time.Hour), behind, 1); err != nil {
		t.Fatal(err)
	}

	reg, err := metrics.New(quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(ctx)
	if err := reg.WatchStore(st, metrics.StoreOptions{}); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	gauge := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "ilinkflow_seconds_since_last_good_poll" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "account" {
					gauge[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	// A minute bounds what the test itself took, however busy the machine.
	for _, c := range []struct {
		name     string
		key      string
		min, max float64
	}{
		{"polled by a clock an hour ahead", ahead, 0, 60},
		{"polled by a clock an hour behind", behind, 0, 60},
		{"activated by a clock an hour ahead", activatedAhead, 0, 0},
		{"activated an hour ago, never polled", silent, 3600, 3660},
	} {
		if got, ok := gauge[c.key]; !ok || got < c.min || got > c.max {
			t.Errorf("%s: seconds since the last good poll = %v (reported %v), want %v..%v", c.name, got, ok, c.min, c.max)
		}
	}

	h := &metrics.Health{Source: st, Window: 105 * time.Second, Logger: quiet()}
	rep := h.Check(ctx)
	if rep.Status != "unhealthy" || rep.Accounts != 4 || len(rep.Stale) != 1 || rep.Stale[0].Account != silent ||
		rep.Stale[0].SecondsSince < 3600 || rep.Stale[0].SecondsSince > 3660 {
		t.Fatalf("health %+v, want only the account never polled stale, for an hour", rep)
	}
}
