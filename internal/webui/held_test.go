package webui_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/webui"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// accountItem is the accounts page's item of one account (its <li>).
func accountItem(t *testing.T, page, key string) string {
	t.Helper()
	_, item, ok := strings.Cut(page, `data-account="`+key+`"`)
	if !ok {
		t.Fatalf("the accounts page does not list %s", key)
	}
	item, _, _ = strings.Cut(item, "</li>")
	return item
}

// The accounts page counts, per bot, the replies held for its conversations' next
// windows (never their content); a bot holding none says none, and a dropped reply is no
// longer counted. The page reads the store only: the UI runs without a gateway here.
func TestTheAccountsPageShowsHowManyRepliesEachBotHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.New(dbtest.NewPool(t), keyring, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	tc, err := devserver.Start(t).Dial(ctx, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	h, err := webui.New(webui.Config{Temporal: tc, Store: st, OperatorToken: tokenSecret()})
	if err != nil {
		t.Fatal(err)
	}
	ui := httptest.NewServer(h)
	t.Cleanup(ui.Close)

	base := time.Now().Add(-25 * time.Hour)
	var accounts []store.Account
	for _, bot := range []string{"0000000uih01", "0000000uih02"} {
		a, err := storetest.RegisterAccount(ctx, st, base.Add(-time.Minute), store.ConfirmInput{ProviderAccountID: bot + "@im.bot",
			OwnerPeerID: "o9-" + bot + "@im.wechat", BaseURL: "https://ilinkai.weixin.qq.com", BotToken: sealing.NewSecret(bot + ":token")})
		if err != nil {
			t.Fatal(err)
		}
		accounts = append(accounts, a)
	}
	holder, idle := accounts[0], accounts[1]
	// The owner wrote a day and an hour ago; the window expired before the agent answered.
	res, err := st.CommitPage(ctx, base, store.PageInput{AccountKey: holder.AccountKey, Generation: holder.Generation, NextCursor: "Ck1",
		Entries: []store.PageEntry{{ProviderMessageID: "7000000000000000001", PeerID: holder.OwnerPeerID, SentAt: base,
			ContextToken: sealing.NewSecret("CKctx-ui-held"), Payload: store.Payload{Summary: "hello"}}}})
	if err != nil || res.Deliverable == nil {
		t.Fatalf("commit page: %+v %v", res, err)
	}
	tok := sealing.NewSecret("session-token-ui-held")
	if _, err := st.OpenAgentSession(ctx, base, store.OpenSessionInput{ReplyWindowID: res.Deliverable.ReplyWindowID, Token: tok}); err != nil {
		t.Fatal(err)
	}
	late := time.Now().Add(-30 * time.Minute)
	if _, err := st.ExpireWindow(ctx, late, res.Deliverable.ReplyWindowID); err != nil {
		t.Fatal(err)
	}
	bodies := []string{"a late answer kept sealed", "and its sealed postscript"}
	var held []store.HeldReply
	for i, body := range bodies {
		h, err := st.HoldReply(ctx, late.Add(time.Duration(i+1)*time.Second), store.HoldInput{Session: store.ByToken(tok),
			RequestID: fmt.Sprintf("req-%d", i+1), Content: vocab.Content{Type: "text", Text: body}})
		if err != nil || h.Reason != string(vocab.CodeReplyWindowExpired) {
			t.Fatalf("hold: %+v %v", h, err)
		}
		held = append(held, h)
	}

	b := newBrowser(t, ui.URL)
	b.login()
	page := b.get("/accounts")
	if page.status != 200 {
		t.Fatalf("accounts page: %d %s", page.status, page.body)
	}
	item := accountItem(t, page.body, holder.AccountKey)
	want := fmt.Sprintf(`data-held="2">2 waiting for the user's next message (1 conversation, %d bytes)`, len(bodies[0])+len(bodies[1]))
	if !strings.Contains(item, "Held replies") || !strings.Contains(item, want) ||
		!strings.Contains(item, "starter held list --account "+holder.AccountKey) {
		t.Errorf("the holding bot's item lacks %q:\n%s", want, item)
	}
	if item := accountItem(t, page.body, idle.AccountKey); !strings.Contains(item, `data-held="0">none<`) {
		t.Errorf("the idle bot's item does not say it holds none:\n%s", item)
	}
	for _, body := range bodies {
		if strings.Contains(page.body, body) {
			t.Errorf("the accounts page shows a held reply's content %q", body)
		}
	}

	if _, err := st.DropHeldReply(ctx, time.Now(), holder.AccountKey, held[0].HeldID, "ops"); err != nil {
		t.Fatal(err)
	}
	page = b.get("/accounts")
	if item := accountItem(t, page.body, holder.AccountKey); !strings.Contains(item, `data-held="1">1 waiting`) {
		t.Errorf("after a drop the holding bot's item does not count 1:\n%s", item)
	}
}
