package activity

import (
	"strconv"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// A page iLink handed out is stored whatever an operator did to the account while it was
// in flight: a pause or a removal that lands between the fetch and the commit takes
// effect after the page is stored (the poll then stops), and the message is in the inbox
// exactly once.
func TestAPageInFlightIsStoredWhenTheAccountIsPausedOrRemovedMeanwhile(t *testing.T) {
	for _, op := range []string{"pause", "remove", "rotate"} {
		t.Run(op, func(t *testing.T) {
			h := newHarness(t)
			h.acts.hooks = &testHooks{afterFetch: func(int) {
				var err error
				switch op {
				case "pause":
					_, err = h.store.PauseAccount(h.ctx, time.Now(), h.key, 1, time.Now().Add(time.Hour), "operator")
				case "remove":
					_, err = h.store.DisableAccount(h.ctx, time.Now(), h.key, 1, "operator")
				case "rotate": // a re-enrollment of the same bot with a new token
					_, err = storetest.Enroll(h.ctx, h.store, time.Now(), store.ConfirmInput{AccountGeneration: 2,
						ProviderAccountID: h.bot.BotID, OwnerPeerID: h.bot.Owner, BaseURL: h.srv.URL, BotToken: sealing.NewSecret(h.bot.Token)})
				}
				if err != nil {
					t.Errorf("%s: %v", op, err)
				}
			}}
			injected := h.inject(ilinksim.InjectRequest{Text: "handed out as the operator acts"})
			res, err := h.poll(false)
			if err != nil {
				t.Fatalf("poll: %v", err)
			}
			wantStop := vocab.CodeAccountNotActive
			if op == "rotate" {
				wantStop = vocab.CodeGenerationConflict // the new generation's poller takes over
			}
			if res.Stopped != string(wantStop) || res.Messages != 1 {
				t.Fatalf("poll %+v: want the page stored, then the poll stopped (%s)", res, wantStop)
			}
			id := strconv.FormatUint(injected.MessageID, 10)
			if n := h.count("SELECT count(*) FROM inbound_messages WHERE provider_message_id = $1", id); n != 1 {
				t.Fatalf("%d copies of the message in flight, want 1", n)
			}
			if op == "rotate" {
				// The rotated account is active: the message opened a window of the new
				// generation and is handed to the agent as usual.
				if n := h.count("SELECT count(*) FROM reply_windows WHERE account_generation = 2 AND state = 'open'"); n != 1 {
					t.Fatalf("%d open windows of the new generation, want 1", n)
				}
				return
			}
			// Nobody is handed it while the account is not active: it waits as received.
			if n := h.count("SELECT count(*) FROM inbound_messages WHERE provider_message_id = $1 AND status = 'received'", id); n != 1 {
				t.Fatal("the message in flight was handed out although the account is not active")
			}
		})
	}
}
