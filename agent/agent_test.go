package agent_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/mocks"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ilinkflow/ilinkflow/agent"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/payloadcodec"
	"github.com/ilinkflow/ilinkflow/vocab"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

func TestMain(m *testing.M) { os.Exit(devserver.Main(m)) }

// replier is an agent workflow that answers at once.
func replier(ctx workflow.Context, in agent.Input) error {
	_, err := agent.WorkflowReplyTo(ctx, in, "an answer", "")
	return err
}

// Right after a hand-off the window's workflow may not be started yet: the reply activity
// retries a missing window workflow twice before it calls the window closed.
func TestAReplyToAWindowWorkflowNotStartedYetIsRetriedBeforeItIsClosed(t *testing.T) {
	srv := devserver.Start(t)
	_, tc := srv.NewNamespace(t)
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(replier)
	agent.RegisterActivities(env, tc)
	attempts := 0
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == agent.ReplyActivity {
			attempts++
		}
	})
	env.ExecuteWorkflow(replier, agent.Input{ReplyWindowID: 987654321, WindowWorkflowID: "ilink-window/0123456789ab/987654321",
		SessionID: "00000000-0000-0000-0000-000000000001"})
	err := env.GetWorkflowError()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != agent.CodeWindowClosed || !app.NonRetryable() {
		t.Fatalf("reply to a window without a workflow: %v, want a non-retryable %s", err, agent.CodeWindowClosed)
	}
	if attempts != 3 {
		t.Fatalf("%d attempts, want 3: two retries for a workflow not started yet, then closed", attempts)
	}
}

// finisher is an agent workflow that gives its verdict at once.
func finisher(ctx workflow.Context, in agent.Input) error {
	return agent.WorkflowFinish(ctx, in.WindowWorkflowID, true, "")
}

// The verdict goes to the window's workflow id from the input; an input that names none
// is refused without a call, and not retried.
func TestTheVerdictGoesToTheInputsWindowWorkflow(t *testing.T) {
	mc := &mocks.Client{}
	mc.On("UpdateWorkflow", mock.Anything, mock.MatchedBy(func(o client.UpdateWorkflowOptions) bool {
		return o.WorkflowID == "ilink-window/0123456789ab/5" && o.UpdateName == wfapi.UpdateFinish
	})).Return(nil, serviceerror.NewNotFound("window workflow closed")).Once()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(finisher)
	agent.RegisterActivities(env, mc)
	env.ExecuteWorkflow(finisher, agent.Input{ReplyWindowID: 5, WindowWorkflowID: "ilink-window/0123456789ab/5"})
	var app *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &app) || app.Type() != agent.CodeWindowClosed {
		t.Fatalf("finish: %v, want %s", err, agent.CodeWindowClosed)
	}
	mc.AssertExpectations(t)

	none := &mocks.Client{}
	acts := &agent.Activities{Client: none}
	if err := acts.Finish(context.Background(), agent.FinishInput{Handled: true}); !errors.As(err, &app) ||
		app.Type() != string(vocab.CodeInvalidInput) || !app.NonRetryable() {
		t.Fatalf("finish without a window workflow: %v, want a non-retryable %s", err, vocab.CodeInvalidInput)
	}
	if _, err := acts.Reply(context.Background(), agent.ReplyInput{Text: "hi"}); !errors.As(err, &app) ||
		app.Type() != string(vocab.CodeInvalidInput) || !app.NonRetryable() {
		t.Fatalf("reply without a window workflow: %v, want a non-retryable %s", err, vocab.CodeInvalidInput)
	}
	none.AssertExpectations(t)
}

// An agent's data converter reads what the gateway's codec encrypted: the same keys
// give the same codec.
func TestAnAgentsDataConverterDecryptsTheGatewaysPayloads(t *testing.T) {
	keys := testkit.Keyring
	gw, err := payloadcodec.DataConverter(keys)
	if err != nil {
		t.Fatal(err)
	}
	p, err := gw.ToPayload(agent.Input{Summary: "what the user wrote"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(p.GetData()), "what the user wrote") {
		t.Fatal("the gateway's payload is not encrypted")
	}
	dc, err := agent.DataConverter(keys)
	if err != nil {
		t.Fatal(err)
	}
	var in agent.Input
	if err := dc.FromPayload(p, &in); err != nil || in.Summary != "what the user wrote" {
		t.Fatalf("agent decoded %q %v", in.Summary, err)
	}
	// Without the codec the input does not read.
	if err := converter.GetDefaultDataConverter().FromPayload(p, &in); err == nil {
		t.Fatal("the default converter read an encrypted payload")
	}
}

// A text that breaks the rule for outbound text is refused by Reply up front, with a
// *TextError whose Code is invalid_input, before any Update reaches Temporal (the window
// named here has no workflow: an Update would answer reply_window_closed); the reply
// activity makes it non-retryable.
func TestAReplyThatBreaksTheTextRuleIsRefusedBeforeAnyUpdate(t *testing.T) {
	srv := devserver.Start(t)
	_, tc := srv.NewNamespace(t)
	ctx := context.Background()
	for _, c := range []struct {
		text  string
		fault vocab.TextFault
	}{
		{"a\x00b", vocab.TextNUL},
		{"ok \xff", vocab.TextNotUTF8},
		{" \n\t", vocab.TextEmpty},
		{strings.Repeat("a", vocab.MaxTextBytes+1), vocab.TextTooLong},
	} {
		_, err := agent.Reply(ctx, tc, "ilink-window/0123456789ab/424242", c.text, "")
		var te *agent.TextError
		if !errors.As(err, &te) || te.Fault != c.fault || te.Field != agent.FieldText || agent.Code(err) != string(vocab.CodeInvalidInput) {
			t.Fatalf("%.20q: %v (%s), want a *TextError %s", c.text, err, agent.Code(err), c.fault)
		}
		if strings.Contains(err.Error(), "aaaa") || strings.Contains(err.Error(), "a\x00b") {
			t.Fatalf("the refusal quotes the text: %q", err)
		}
		_, err = (&agent.Activities{Client: tc}).Reply(ctx, agent.ReplyInput{WindowWorkflowID: "ilink-window/0123456789ab/424242", Text: c.text})
		var app *temporal.ApplicationError
		if !errors.As(err, &app) || app.Type() != string(vocab.CodeInvalidInput) || !app.NonRetryable() {
			t.Fatalf("reply activity of %.20q: %v, want a non-retryable %s", c.text, err, vocab.CodeInvalidInput)
		}
	}
	// A text within the rule does reach the window (here: none, so it is closed).
	if _, err := agent.Reply(ctx, tc, "ilink-window/0123456789ab/424242", "hello", ""); agent.Code(err) != agent.CodeWindowClosed {
		t.Fatalf("a valid reply: %v, want %s", err, agent.CodeWindowClosed)
	}
}

// A media reply whose file name is not valid UTF-8 or holds a control character is
// refused before any request leaves.
func TestAMediaReplyWithAnUnsendableFileNameIsRefusedBeforeAnyRequest(t *testing.T) {
	var requests atomic.Int32
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(gw.Close)
	for _, name := range []string{"report\x00.pdf", "a\nb.pdf", "bad \xff.pdf"} {
		_, err := agent.ReplyMedia(context.Background(), gw.Client(), gw.URL, "token", "file", name, []byte("data"), "")
		var te *agent.TextError
		if !errors.As(err, &te) || te.Field != agent.FieldFileName || agent.Code(err) != string(vocab.CodeInvalidInput) {
			t.Fatalf("%q: %v, want a *TextError for the file name", name, err)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests reached the gateway", n)
	}
	// A valid name is sent (and refused by this gateway).
	var fe *agent.FetchError
	if _, err := agent.ReplyMedia(context.Background(), gw.Client(), gw.URL, "token", "file", "report.pdf", []byte("data"), ""); !errors.As(err, &fe) || requests.Load() != 1 {
		t.Fatalf("a valid name: %v after %d requests", err, requests.Load())
	}
}
