package e2e_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// scrape reads /metrics over HTTP.
func (a *apiSystem) scrape() map[string]*dto.MetricFamily {
	a.t.Helper()
	got := a.do(http.MethodGet, "/metrics", nil)
	if got.status != http.StatusOK {
		a.t.Fatalf("/metrics: %d %s", got.status, got.body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(got.body))
	if err != nil {
		a.t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// value returns the value of the series of family name with the given labels (-1 when
// absent).
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f, ok := fams[name]
	if !ok {
		return -1
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			return m.GetUntyped().GetValue()
		}
	}
	return -1
}

func TestMetricsAfterARunAndHealthWhenILinkStopsAnswering(t *testing.T) {
	t.Parallel()
	const window = 3 * time.Second
	a := startAPI(t, store.DefaultLimits(), func(_ *ilinksim.Config, cfg *gateway.Config) {
		cfg.HealthWindow = window
	})
	const owner = "o9cq8metricsowner00000001@im.wechat"
	acct := a.enroll("qo_metrics", owner)
	bot := a.botOf(owner)

	// The seconds since the last good poll are never negative (one clock: the database's),
	// and are within the health window while the bot is polled; a busy machine may be
	// between two poll sessions of the bot at a given instant, so freshness is waited for.
	sinceLastPoll := func(fams map[string]*dto.MetricFamily) float64 {
		t.Helper()
		since := value(fams, "ilinkflow_seconds_since_last_good_poll", "account", acct.AccountKey)
		if since < 0 {
			t.Fatalf("seconds since the last good poll = %v, want a figure of at least 0 (-1: not reported)", since)
		}
		return since
	}

	// The first round trip of a new account moves its cursor: a page without messages.
	// Waiting for it keeps the page count exact.
	a.eventually("first round trip", 30*time.Second, func() (bool, error) {
		got, err := a.store.GetAccount(a.ctx, acct.AccountKey)
		return got.Cursor != "" && got.LastPollAt != nil, err
	})
	var healthz answer
	a.eventually("/healthz answers 200 while the bot is polled", 30*time.Second, func() (bool, error) {
		healthz = a.do(http.MethodGet, "/healthz", nil)
		return healthz.status == http.StatusOK, nil
	})
	var rep metrics.HealthReport
	healthz.json(t, &rep)
	if rep.Status != "ok" || rep.Accounts != 1 {
		t.Fatalf("/healthz after a round trip: %s", healthz.body)
	}

	// An end-to-end run: two user messages (each its own page), a duplicate delivery of
	// the first, two replies sent and one whose outcome is unknown.
	in1, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "first")
	if err != nil {
		t.Fatal(err)
	}
	w1, _ := a.openWindow(acct.AccountKey, 0)
	tok1 := a.tokenOf(w1.ReplyWindowID)
	for i := 1; i <= 2; i++ {
		if got := a.reply(tok1, fmt.Sprintf("answer %d", i), ""); got.status != http.StatusOK {
			t.Fatalf("reply %d: %d %s", i, got.status, got.body)
		}
	}
	if err := a.ctl.AddFault(a.ctx, ilinksim.Fault{Endpoint: "sendmessage", Kind: ilinksim.FaultDrop}); err != nil {
		t.Fatal(err)
	}
	if got := a.reply(tok1, "lost", ""); got.status != http.StatusAccepted {
		t.Fatalf("dropped reply: %d %s", got.status, got.body)
	}
	if _, err := a.ctl.Duplicate(a.ctx, bot.BotID, ilinksim.DuplicateRequest{MessageID: in1.MessageID,
		DuplicateSpec: ilinksim.DuplicateSpec{Mode: ilinksim.DupSame}}); err != nil {
		t.Fatal(err)
	}
	a.eventually("duplicate counted", 30*time.Second, func() (bool, error) {
		return value(a.scrape(), "ilinkflow_messages_total", "outcome", "duplicate") == 1, nil
	})
	if _, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "second"); err != nil {
		t.Fatal(err)
	}
	a.openWindow(acct.AccountKey, w1.ReplyWindowID)
	a.eventually("first window superseded", 30*time.Second, func() (bool, error) {
		w, err := a.store.GetWindow(a.ctx, w1.ReplyWindowID)
		return w.State == vocab.WindowSuperseded, err
	})

	fams := a.scrape()
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"ilinkflow_messages_total", []string{"outcome", "inserted"}, 2},
		{"ilinkflow_messages_total", []string{"outcome", "deliverable"}, 2},
		{"ilinkflow_messages_total", []string{"outcome", "duplicate"}, 1},
		{"ilinkflow_messages_total", []string{"outcome", "absorbed"}, 0},
		{"ilinkflow_messages_total", []string{"outcome", "deferred"}, 0},
		{"ilinkflow_messages_total", []string{"outcome", "quarantined"}, 0},
		// The first round trip's page, then one page per delivery.
		{"ilinkflow_pages_total", nil, 4},
		{"ilinkflow_sends_total", []string{"outcome", "sent"}, 2},
		{"ilinkflow_sends_total", []string{"outcome", "unknown"}, 1},
		{"ilinkflow_sends_total", []string{"outcome", "failed"}, 0},
		{"ilinkflow_sends_total", []string{"outcome", "refused"}, 0},
		{"ilinkflow_sends_total", []string{"outcome", "throttled"}, 0},
		{"ilinkflow_reply_api_requests_total", []string{"route", "reply", "code", "ok"}, 2},
		{"ilinkflow_reply_api_requests_total", []string{"route", "reply", "code", "unknown"}, 1},
		{"ilinkflow_windows", []string{"state", "open"}, 1},
		{"ilinkflow_throttle_breakers_open", nil, 0},
		{"ilinkflow_accounts", []string{"status", "active"}, 1},
		{"ilinkflow_store_up", nil, 1},
	} {
		if got := value(fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if polls := value(fams, "ilinkflow_polls_total", "outcome", "ok"); polls < 4 {
		t.Errorf("ilinkflow_polls_total{outcome=ok} = %v, want at least one per page", polls)
	}
	sinceLastPoll(fams)
	a.eventually("a fresh last good poll after the run", 30*time.Second, func() (bool, error) {
		return sinceLastPoll(a.scrape()) <= window.Seconds(), nil
	})
	// The Temporal SDK's own metrics are served beside the product's.
	var sdk []string
	for name := range fams {
		if strings.HasPrefix(name, "temporal_") {
			sdk = append(sdk, name)
		}
	}
	if value(fams, "temporal_request_total") <= 0 || len(sdk) < 5 {
		t.Errorf("Temporal SDK metrics missing: %v", sdk)
	}

	// iLink stops answering (every getupdates gets a 500): once no round trip succeeded
	// for the health window, /healthz is 503 and names the account.
	if err := a.ctl.AddFault(a.ctx, ilinksim.Fault{Endpoint: "getupdates", Kind: ilinksim.FaultStatus, Status: 500, Count: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	a.eventually("unhealthy", time.Minute, func() (bool, error) {
		got := a.do(http.MethodGet, "/healthz", nil)
		if got.status != http.StatusServiceUnavailable {
			return false, nil
		}
		got.json(t, &rep)
		return true, nil
	})
	if rep.Status != "unhealthy" || len(rep.Stale) != 1 || rep.Stale[0].Account != acct.AccountKey || rep.Stale[0].SecondsSince <= window.Seconds() {
		t.Fatalf("health report %+v", rep)
	}
	fams = a.scrape()
	if polls := value(fams, "ilinkflow_polls_total", "outcome", "http_status"); polls < 1 {
		t.Errorf("failed polls not counted: %v", polls)
	}
	if since := sinceLastPoll(fams); since <= window.Seconds() {
		t.Errorf("seconds since the last good poll = %v after the outage", since)
	}
}
