package gateway_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/payloadcodec"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

var testKeys = func() *sealing.Keyring {
	k, err := sealing.ParseKeyring(keySpec)
	if err != nil {
		panic(err)
	}
	return k
}()

// testConverter decodes the histories of a gateway that dialed Temporal itself (its
// payloads are encrypted with the codec of testKeys) and of one with an injected client
// without the codec (unencrypted payloads pass through).
var testConverter = func() converter.DataConverter {
	dc, err := payloadcodec.DataConverter(testKeys)
	if err != nil {
		panic(err)
	}
	return dc
}()

// bot is an account registered through the store, with what a test needs to feed it pages.
type bot struct {
	key, owner string
	generation int32
	cursor     string
	nextID     int64
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// register registers an account with unique provider and owner ids. Its base URL is a
// loopback port nothing listens on, so a poller that runs never reaches real iLink.
// reservePending reserves a reply with ReserveAndStart while the bot's throttle breaker is
// open (BlockSends), so the attempt stays pending, as a crash between the reservation and
// the start leaves it.
func reservePending(ctx context.Context, t testing.TB, st *store.Store, now time.Time, b *bot, tok sealing.Secret, text string) store.Attempt {
	t.Helper()
	if _, err := st.BlockSends(ctx, now, b.key, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	p, err := st.ReserveAndStart(ctx, now, store.ReplyInput{Session: store.ByToken(tok), Content: vocab.Content{Type: "text", Text: text}}, store.SendPacing{})
	if err != nil || p.Attempt.Status != vocab.AttemptPending {
		t.Fatalf("reserve: %+v %v", p, err)
	}
	return p.Attempt
}

func register(ctx context.Context, t testing.TB, st *store.Store, now time.Time) *bot {
	t.Helper()
	id := randomHex(t, 6)
	a, err := storetest.RegisterAccount(ctx, st, now, store.ConfirmInput{
		ProviderAccountID: id + "@im.bot",
		OwnerPeerID:       "o9cq8owner" + id + "@im.wechat",
		BaseURL:           "http://127.0.0.1:9/",
		BotToken:          sealing.NewSecret("bot-token-" + id),
	})
	if err != nil {
		t.Fatalf("register account: %v", err)
	}
	return &bot{key: a.AccountKey, owner: a.OwnerPeerID, generation: a.Generation, nextID: 7000000000000000000}
}

// commit commits one page with one message from the bot's owner and returns its result.
func (b *bot) commit(ctx context.Context, t testing.TB, st *store.Store, now, sentAt time.Time, text string) store.PageResult {
	t.Helper()
	b.nextID++
	next := fmt.Sprintf("cursor-%d", b.nextID)
	res, err := st.CommitPage(ctx, now, store.PageInput{
		AccountKey: b.key, Generation: b.generation, ExpectedCursor: b.cursor, NextCursor: next,
		Entries: []store.PageEntry{{
			ProviderMessageID: fmt.Sprint(b.nextID), PeerID: b.owner, SentAt: sentAt, Cursor: b.cursor,
			ContextToken: sealing.NewSecret(fmt.Sprintf("context-token-%d", b.nextID)),
			Payload:      store.Payload{Summary: text},
		}},
	})
	if err != nil {
		t.Fatalf("commit page: %v", err)
	}
	b.cursor = next
	return res
}

// describe returns the latest run of a workflow id (nil when there is none).
func describe(ctx context.Context, t testing.TB, tc client.Client, id string) *workflowpb.WorkflowExecutionInfo {
	t.Helper()
	d, err := tc.DescribeWorkflow(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil
	}
	if err != nil {
		t.Fatalf("describe %s: %v", id, err)
	}
	return d.RawResponse.GetWorkflowExecutionInfo()
}

// history reads the events of a workflow run.
func history(ctx context.Context, t testing.TB, tc client.Client, id, runID string) []*historypb.HistoryEvent {
	t.Helper()
	it := tc.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		events = append(events, e)
	}
	return events
}

// startInput decodes the input a workflow run was started with.
func startInput(ctx context.Context, t testing.TB, tc client.Client, id, runID string, out any) {
	t.Helper()
	events := history(ctx, t, tc, id, runID)
	if len(events) == 0 {
		t.Fatalf("%s has no history", id)
	}
	attrs := events[0].GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		t.Fatalf("first event of %s is %v", id, events[0].GetEventType())
	}
	if err := testConverter.FromPayloads(attrs.GetInput(), out); err != nil {
		t.Fatalf("decode input of %s: %v", id, err)
	}
}

// signals lists the signal names and first-argument payloads a run received.
func signals(ctx context.Context, t testing.TB, tc client.Client, id, runID string) []*historypb.WorkflowExecutionSignaledEventAttributes {
	t.Helper()
	var out []*historypb.WorkflowExecutionSignaledEventAttributes
	for _, e := range history(ctx, t, tc, id, runID) {
		if a := e.GetWorkflowExecutionSignaledEventAttributes(); a != nil {
			out = append(out, a)
		}
	}
	return out
}
