package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// Source is what the store gauges and the health check read (a *store.Store).
type Source interface {
	ListAccounts(ctx context.Context, status string) ([]store.Account, error)
	ListWindows(ctx context.Context, f store.WindowFilter) ([]store.Window, error)
	// PollAges is the poll health of the active accounts: the seconds since the last good
	// poll, on one clock (the database's) and never negative (see [store.Store.PollAges]).
	PollAges(ctx context.Context) ([]store.PollAge, error)
	// WaitingHeldCounts is, per conversation, the held replies still to send (see
	// [store.Store.WaitingHeldCounts]).
	WaitingHeldCounts(ctx context.Context) ([]store.HeldCount, error)
}

// StoreOptions tune the store gauges.
type StoreOptions struct {
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Timeout bounds the store reads of one scrape (default 5s).
	Timeout time.Duration
}

// maxOpenWindows caps the windows one scrape counts (ListWindows' own cap).
const maxOpenWindows = 10000

// accountStatuses are the statuses the accounts gauge always reports.
var accountStatuses = []string{vocab.AccountActive, vocab.AccountPaused, vocab.AccountNeedsRelogin,
	vocab.AccountReplaced, vocab.AccountDisabled}

// storeCollector reads the gauges from the store at scrape time.
type storeCollector struct {
	src     Source
	now     func() time.Time
	timeout time.Duration

	up, windows, breakers, sinceLastPoll, accounts, heldReplies, heldBytes *prometheus.Desc
}

func newStoreCollector(src Source, opts StoreOptions) *storeCollector {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	return &storeCollector{
		src: src, now: opts.Now, timeout: opts.Timeout,
		up: prometheus.NewDesc("ilinkflow_store_up",
			"1 when the store answered the scrape's reads, 0 otherwise.", nil, nil),
		windows: prometheus.NewDesc("ilinkflow_windows",
			"Reply windows by state (open only: retired windows accumulate and are not counted).", []string{"state"}, nil),
		breakers: prometheus.NewDesc("ilinkflow_throttle_breakers_open",
			"Active or paused accounts whose sends are blocked by a throttle penalty.", nil, nil),
		sinceLastPoll: prometheus.NewDesc("ilinkflow_seconds_since_last_good_poll",
			"Seconds since the account's last successful getupdates round trip (or its activation, when later), per active account.",
			[]string{"account"}, nil),
		accounts: prometheus.NewDesc("ilinkflow_accounts",
			"Accounts by status.", []string{"status"}, nil),
		heldReplies: prometheus.NewDesc("ilinkflow_held_replies",
			"Replies held for their conversation's next window (its quota used up, its last send kept for the final answer, "+
				"or it expired) still to send (held or sending), per account: every account not removed, and any other that holds some. "+
				"`starter held list` lists them.", []string{"account"}, nil),
		heldBytes: prometheus.NewDesc("ilinkflow_held_reply_bytes",
			"Bytes of content of the held replies still to send, per account (as ilinkflow_held_replies).", []string{"account"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.windows, c.breakers, c.sinceLastPoll, c.accounts, c.heldReplies, c.heldBytes} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	now := c.now()
	up := 1.0

	accts, err := c.src.ListAccounts(ctx, "")
	if err != nil {
		up = 0
		ch <- prometheus.NewInvalidMetric(c.accounts, err)
	} else {
		byStatus := map[string]int{}
		open := 0
		for _, a := range accts {
			byStatus[a.Status]++
			if (a.Status == vocab.AccountActive || a.Status == vocab.AccountPaused) &&
				a.SendsBlockedUntil != nil && now.Before(*a.SendsBlockedUntil) {
				open++
			}
		}
		for _, s := range accountStatuses {
			ch <- prometheus.MustNewConstMetric(c.accounts, prometheus.GaugeValue, float64(byStatus[s]), s)
		}
		ch <- prometheus.MustNewConstMetric(c.breakers, prometheus.GaugeValue, float64(open))
	}

	if ages, err := c.src.PollAges(ctx); err != nil {
		up = 0
		ch <- prometheus.NewInvalidMetric(c.sinceLastPoll, err)
	} else {
		for _, a := range ages {
			ch <- prometheus.MustNewConstMetric(c.sinceLastPoll, prometheus.GaugeValue, a.Since.Seconds(), a.AccountKey)
		}
	}

	if held, err := c.src.WaitingHeldCounts(ctx); err != nil {
		up = 0
		ch <- prometheus.NewInvalidMetric(c.heldReplies, err)
	} else {
		c.collectHeld(ch, accts, held)
	}

	if ws, err := c.src.ListWindows(ctx, store.WindowFilter{State: vocab.WindowOpen, Limit: maxOpenWindows}); err != nil {
		up = 0
		ch <- prometheus.NewInvalidMetric(c.windows, err)
	} else {
		ch <- prometheus.MustNewConstMetric(c.windows, prometheus.GaugeValue, float64(len(ws)), vocab.WindowOpen)
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
}

// heldLoad is what an account holds still to send.
type heldLoad struct {
	replies, bytes int64
}

// collectHeld sends the held replies still to send per account: 0 for an account not
// removed that holds none (a series present from the start), and the load of any account
// that holds some, removed or not.
func (c *storeCollector) collectHeld(ch chan<- prometheus.Metric, accts []store.Account, held []store.HeldCount) {
	per := map[string]heldLoad{}
	for _, a := range accts {
		if a.Status != vocab.AccountReplaced && a.Status != vocab.AccountDisabled {
			per[a.AccountKey] = heldLoad{}
		}
	}
	for _, h := range held {
		l := per[h.AccountKey]
		l.replies += int64(h.Replies)
		l.bytes += h.Bytes
		per[h.AccountKey] = l
	}
	for key, l := range per {
		ch <- prometheus.MustNewConstMetric(c.heldReplies, prometheus.GaugeValue, float64(l.replies), key)
		ch <- prometheus.MustNewConstMetric(c.heldBytes, prometheus.GaugeValue, float64(l.bytes), key)
	}
}
