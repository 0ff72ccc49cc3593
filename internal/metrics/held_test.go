package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/metrics"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// A reply held in the store shows in the next scrape, counted and measured under its
// account (never its conversation's peer), and leaves it once an operator dropped it; an
// account holding none reports 0.
func TestAHeldReplyShowsInTheScrapeUnderItsAccountUntilItIsDropped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.New(dbtest.NewPool(t), testkit.Keyring, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	var gen int32
	for _, bot := range []string{"00000000h0a1", "00000000h0a2"} {
		a, err := storetest.RegisterAccount(ctx, st, now, store.ConfirmInput{ProviderAccountID: bot + "@im.bot", OwnerPeerID: "o9-" + bot + "@im.wechat",
			BaseURL: "https://ilinkai.weixin.qq.com", BotToken: sealing.NewSecret(bot + ":tok")})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, a.AccountKey)
		if gen == 0 {
			gen = a.Generation
		}
	}
	holder, idle := keys[0], keys[1]
	res, err := st.CommitPage(ctx, now, store.PageInput{AccountKey: holder, Generation: gen, NextCursor: "Ck1",
		Entries: []store.PageEntry{{ProviderMessageID: "7000000000000000001", PeerID: "o9-00000000h0a1@im.wechat", SentAt: now,
			ContextToken: sealing.NewSecret("CKctx-held"), Payload: store.Payload{Summary: "hello"}}}})
	if err != nil || res.Deliverable == nil {
		t.Fatalf("commit page: %+v %v", res, err)
	}
	tok := sealing.NewSecret("session-token-metrics-held")
	if _, err := st.OpenAgentSession(ctx, now, store.OpenSessionInput{ReplyWindowID: res.Deliverable.ReplyWindowID, Token: tok}); err != nil {
		t.Fatal(err)
	}
	late := now.Add(vocab.DefaultWindowLifetime + time.Minute)
	if _, err := st.ExpireWindow(ctx, late, res.Deliverable.ReplyWindowID); err != nil {
		t.Fatal(err)
	}
	const body = "an answer that came too late"
	h, err := st.HoldReply(ctx, late, store.HoldInput{Session: store.ByToken(tok), RequestID: "req-1",
		Content: vocab.Content{Type: "text", Text: body}})
	if err != nil {
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
	scrape := func() map[string]map[string]float64 {
		t.Helper()
		fams, err := reg.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]map[string]float64{}
		for _, f := range fams {
			if f.GetName() != "ilinkflow_held_replies" && f.GetName() != "ilinkflow_held_reply_bytes" {
				continue
			}
			out[f.GetName()] = map[string]float64{}
			for _, m := range f.GetMetric() {
				if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetName() != "account" {
					t.Fatalf("%s has labels %v, want the account only", f.GetName(), m.GetLabel())
				}
				out[f.GetName()][m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		}
		return out
	}
	got := scrape()
	if got["ilinkflow_held_replies"][holder] != 1 || got["ilinkflow_held_reply_bytes"][holder] != float64(len(body)) {
		t.Fatalf("scrape with a held reply: %v, want 1 reply of %d bytes for %s", got, len(body), holder)
	}
	if v, ok := got["ilinkflow_held_replies"][idle]; !ok || v != 0 {
		t.Fatalf("an account holding nothing: %v (reported %v), want 0", v, ok)
	}

	if _, err := st.DropHeldReply(ctx, late.Add(time.Minute), holder, h.HeldID, "ops"); err != nil {
		t.Fatal(err)
	}
	got = scrape()
	if got["ilinkflow_held_replies"][holder] != 0 || got["ilinkflow_held_reply_bytes"][holder] != 0 {
		t.Fatalf("scrape after the held reply was dropped: %v, want 0", got)
	}
}
