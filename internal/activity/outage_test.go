package activity

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/tcpproxy"
)

// A page iLink handed out is stored even when PostgreSQL is unreachable at its commit:
// the poll keeps the page and retries until the database is back (the simulator, like
// iLink, never hands it out again).
func TestAPageFetchedDuringADatabaseOutageIsCommittedWhenItComesBack(t *testing.T) {
	h := newHarness(t)
	// The store reaches PostgreSQL through a proxy the test cuts; the poll lease does not.
	cfg := h.pool.Config()
	proxy, err := tcpproxy.New(net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	pcfg := cfg.Copy()
	pcfg.ConnConfig.Host, pcfg.ConnConfig.Port = "127.0.0.1", uint16(proxy.Port())
	viaProxy, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(viaProxy.Close)
	st, err := store.New(viaProxy, testKeys, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	h.acts.Store = st
	cutOnce := sync.Once{}
	h.acts.hooks = &testHooks{afterFetch: func(int) { cutOnce.Do(func() { proxy.Cut() }) }}
	injected := h.inject(ilinksim.InjectRequest{Text: "sent during the outage"})

	type result struct {
		res activities.PollResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := h.poll(false)
		done <- result{res, err}
	}()
	// The commit failed at least twice (connections refused) before the database returns;
	// a poll that ends meanwhile has given the page up.
	for refusals := 0; refusals < 2; {
		select {
		case <-proxy.Refused():
			refusals++
		case got := <-done:
			t.Fatalf("the poll ended during the outage (%+v, %v): the fetched page was not kept", got.res, got.err)
		}
	}
	proxy.Restore()
	got := <-done
	if got.err != nil {
		t.Fatalf("poll: %v", got.err)
	}
	if n := h.count("SELECT count(*) FROM inbound_messages WHERE provider_message_id = $1", strconv.FormatUint(injected.MessageID, 10)); n != 1 {
		t.Fatalf("the page fetched during the outage: %d messages stored, want 1 (poll %+v)", n, got.res)
	}
	if got.res.Pages < 1 || got.res.Messages != 1 {
		t.Fatalf("poll result %+v", got.res)
	}
}
