package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// The end-to-end test (e2e/replyapi_test.go) scrapes a running gateway; these pin the
// pieces.

var now = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func at(d time.Duration) *time.Time { t := now.Add(d); return &t }

type fakeSource struct {
	accounts []store.Account
	ages     []store.PollAge
	windows  []store.Window
	held     []store.HeldCount
	err      error
}

func (f *fakeSource) WaitingHeldCounts(context.Context) ([]store.HeldCount, error) {
	return f.held, f.err
}

func (f *fakeSource) PollAges(context.Context) ([]store.PollAge, error) {
	return f.ages, f.err
}

func (f *fakeSource) ListAccounts(_ context.Context, status string) ([]store.Account, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []store.Account
	for _, a := range f.accounts {
		if status == "" || a.Status == status {
			out = append(out, a)
		}
	}
	return out, nil
}

func (f *fakeSource) ListWindows(_ context.Context, flt store.WindowFilter) ([]store.Window, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []store.Window
	for _, w := range f.windows {
		if flt.State == "" || w.State == flt.State {
			out = append(out, w)
		}
	}
	return out, nil
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestNilProductRecordsNothing(t *testing.T) {
	t.Parallel()
	var p *metrics.Product
	p.Poll("a", metrics.PollOK)
	p.Page()
	p.Messages(metrics.MessageInserted, 3)
	p.Send(metrics.SendSent)
	p.ReplyRequest("reply", "ok")
	var r *metrics.Registry
	if r.Product() != nil || r.Close(context.Background()) != nil {
		t.Fatal("a nil registry is not inert")
	}
}

func TestSendOutcome(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ status, code, want string }{
		{"sent", "", metrics.SendSent},
		{"unknown", "outcome_unknown", metrics.SendUnknown},
		{"failed", "rejected", metrics.SendFailed},
		{"failed", "stale_token", metrics.SendFailed},
		{"failed", "not_sent", metrics.SendFailed},
		{"failed", "throttled", metrics.SendThrottled},
		{"failed", "reply_window_inactive", metrics.SendRefused},
		{"", "reply_quota_exhausted", metrics.SendRefused},
	} {
		if got := metrics.SendOutcome(c.status, c.code); got != c.want {
			t.Errorf("SendOutcome(%q, %q) = %q, want %q", c.status, c.code, got, c.want)
		}
	}
}

func TestRegistryServesProductStoreAndRuntimeMetrics(t *testing.T) {
	t.Parallel()
	reg, err := metrics.New(quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(context.Background())
	src := &fakeSource{
		accounts: []store.Account{
			{AccountKey: "ilk_fresh", Status: vocab.AccountActive, LastPollAt: at(-10 * time.Second), UpdatedAt: now.Add(-time.Hour),
				SendsBlockedUntil: at(time.Minute)},
			{AccountKey: "ilk_never", Status: vocab.AccountActive, UpdatedAt: now.Add(-30 * time.Second)},
			{AccountKey: "ilk_paused", Status: vocab.AccountPaused, SendsBlockedUntil: at(-time.Minute)},
			{AccountKey: "ilk_gone", Status: vocab.AccountReplaced, SendsBlockedUntil: at(time.Minute)},
		},
		ages: []store.PollAge{
			{AccountKey: "ilk_fresh", LastPollAt: at(-10 * time.Second), Since: 10 * time.Second},
			{AccountKey: "ilk_never", Since: 30 * time.Second},
		},
		windows: []store.Window{{State: vocab.WindowOpen}, {State: vocab.WindowOpen}, {State: vocab.WindowExpired}},
		held: []store.HeldCount{
			{AccountKey: "ilk_fresh", PeerID: "o9-a@im.wechat", Replies: 2, Bytes: 300},
			{AccountKey: "ilk_fresh", PeerID: "o9-b@im.wechat", Replies: 1, Bytes: 45},
			{AccountKey: "ilk_gone", PeerID: "o9-c@im.wechat", Replies: 1, Bytes: 7},
		},
	}
	if err := reg.WatchStore(src, metrics.StoreOptions{Now: func() time.Time { return now }}); err != nil {
		t.Fatal(err)
	}
	if err := reg.WatchStore(src, metrics.StoreOptions{}); err != nil {
		t.Fatalf("a second WatchStore: %v", err)
	}
	p := reg.Product()
	p.Poll("ilk_fresh", metrics.PollOK)
	p.Poll("ilk_fresh", metrics.PollOK)
	p.Poll("ilk_fresh", "http_status")
	p.Page()
	p.Messages(metrics.MessageInserted, 3)
	p.Messages(metrics.MessageAbsorbed, 2)
	p.Messages(metrics.MessageDuplicate, 0)
	p.Send(metrics.SendSent)

	srv := httptest.NewServer(reg.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	lines := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		lines[l] = true
	}
	for _, want := range []string{
		`ilinkflow_polls_total{outcome="ok"} 2`,
		`ilinkflow_polls_total{outcome="http_status"} 1`,
		`ilinkflow_pages_total 1`,
		`ilinkflow_messages_total{outcome="inserted"} 3`,
		`ilinkflow_messages_total{outcome="absorbed"} 2`,
		`ilinkflow_messages_total{outcome="duplicate"} 0`,
		`ilinkflow_sends_total{outcome="sent"} 1`,
		`ilinkflow_sends_total{outcome="throttled"} 0`,
		`ilinkflow_sends_total{outcome="held"} 0`,
		`ilinkflow_reply_api_requests_total{code="ok",route="reply"} 0`,
		`ilinkflow_reply_api_requests_total{code="ok",route="done"} 0`,
		`ilinkflow_windows{state="open"} 2`,
		`ilinkflow_throttle_breakers_open 1`,
		`ilinkflow_seconds_since_last_good_poll{account="ilk_fresh"} 10`,
		`ilinkflow_seconds_since_last_good_poll{account="ilk_never"} 30`,
		`ilinkflow_accounts{status="active"} 2`,
		`ilinkflow_accounts{status="replaced"} 1`,
		`ilinkflow_store_up 1`,
		// Held replies per account, summed over its conversations; 0 for an account not
		// removed that holds none, and shown for a removed one that still holds some.
		`ilinkflow_held_replies{account="ilk_fresh"} 3`,
		`ilinkflow_held_reply_bytes{account="ilk_fresh"} 345`,
		`ilinkflow_held_replies{account="ilk_never"} 0`,
		`ilinkflow_held_replies{account="ilk_paused"} 0`,
		`ilinkflow_held_replies{account="ilk_gone"} 1`,
		`ilinkflow_held_reply_bytes{account="ilk_gone"} 7`,
	} {
		if !lines[want] {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if !strings.Contains(text, "\ngo_goroutines ") {
		t.Error("scrape lacks the Go runtime metrics")
	}
	if strings.Contains(text, `ilinkflow_seconds_since_last_good_poll{account="ilk_paused"}`) ||
		strings.Contains(text, `ilinkflow_seconds_since_last_good_poll{account="ilk_gone"}`) {
		t.Error("only active accounts have a poll-age gauge")
	}
	if strings.Contains(text, "o9-") {
		t.Error("a peer id is a label value")
	}
}

func TestStoreFailureLeavesTheRestOfTheScrape(t *testing.T) {
	t.Parallel()
	reg, err := metrics.New(quiet())
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.WatchStore(&fakeSource{err: errors.New("down")}, metrics.StoreOptions{}); err != nil {
		t.Fatal(err)
	}
	reg.Product().Page()
	if _, err := reg.Gatherer().Gather(); err == nil {
		t.Fatal("gathering with the store down reports no error")
	}
	srv := httptest.NewServer(reg.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "ilinkflow_pages_total 1") ||
		!strings.Contains(string(body), "ilinkflow_store_up 0") {
		t.Fatalf("scrape with the store down: %d\n%s", resp.StatusCode, body)
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	src := &fakeSource{ages: []store.PollAge{ // the store's ages: active accounts only
		{AccountKey: "ilk_ok", LastPollAt: at(-10 * time.Second), Since: 10 * time.Second},
		{AccountKey: "ilk_stale", LastPollAt: at(-2 * time.Minute), Since: 2 * time.Minute},
		{AccountKey: "ilk_resumed", LastPollAt: at(-2 * time.Hour), Since: 5 * time.Second},
	}}
	h := &metrics.Health{Source: src, Window: 105 * time.Second, Logger: quiet()}
	get := func() (int, metrics.HealthReport) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		var rep metrics.HealthReport
		if err := json.Unmarshal(w.Body.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		return w.Code, rep
	}
	code, rep := get()
	if code != http.StatusServiceUnavailable || rep.Status != "unhealthy" || rep.Accounts != 3 ||
		len(rep.Stale) != 1 || rep.Stale[0].Account != "ilk_stale" || rep.Stale[0].SecondsSince != 120 {
		t.Fatalf("%d %+v", code, rep)
	}
	src.ages = src.ages[:1]
	if code, rep := get(); code != http.StatusOK || rep.Status != "ok" || len(rep.Stale) != 0 {
		t.Fatalf("%d %+v", code, rep)
	}
	src.err = errors.New("connection refused")
	if code, rep := get(); code != http.StatusServiceUnavailable || rep.Error == "" || strings.Contains(rep.Error, "refused") {
		t.Fatalf("store down: %d %+v", code, rep)
	}
}
