package e2e_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/ilinkflow/ilinkflow/agent"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/internal/handoff"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/payloadcodec"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

const codecToken = "e2e-codec-endpoint-token-5b1d0c"

// TestNoUserTextReplyOrAttachmentNameIsInHistoryOnlyInEncryptedPayloads runs a user's
// text message and file message through the workflow agent hand-off (the agent's input
// carries the summary and the attachment's name; its replies through the send Update
// carry a reply text and the summary), then reads every event of every workflow run as raw bytes: none of the
// texts or the file name appears, every payload carries the codec's encoding, and
// decoding the payloads through the worker's codec endpoint (POST /codec/decode with the
// token, as the Temporal CLI and UI do) shows them. The Temporal CLI's `workflow show
// --codec-endpoint --codec-auth` shows the reply texts too.
func TestNoUserTextReplyOrAttachmentNameIsInHistoryOnlyInEncryptedPayloads(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = time.Hour
	agentQueue := devserver.TaskQueue(t) + "-agent"
	addr := make(chan net.Addr, 1)
	s := start(t, limits, configured(func(cfg *gateway.Config) {
		cfg.Handler = handoff.KindWorkflow
		cfg.AgentWorkflow = "TestAgent"
		cfg.AgentTaskQueue = agentQueue
		cfg.HTTPAddr = "127.0.0.1:0"
		cfg.CodecToken = sealing.NewSecret(codecToken)
	}), func(_ *gateway.Config, o *gateway.Options) { o.HTTPStarted = func(a net.Addr) { addr <- a } })
	endpoint := "http://" + (<-addr).String() + "/codec"

	aw := worker.New(s.tc, agentQueue, worker.Options{})
	aw.RegisterWorkflowWithOptions(codecAgent, workflow.RegisterOptions{Name: "TestAgent"})
	agent.RegisterActivities(aw, s.tc)
	if err := aw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(aw.Stop)

	const (
		owner    = "o9cq8e2ecodec00000000001@im.wechat"
		userText = "codec-user-text meet me at the north gate"
		fileName = "codec-attachment-plans.pdf"
		reply    = codecReply
	)
	accountKey, bot := s.enrolledBot("qo_e2e_codec", owner)
	if _, err := s.ctl.InjectText(s.ctx, bot.BotID, "", userText); err != nil {
		t.Fatal(err)
	}
	w1 := s.storedWindow(accountKey)
	s.messageReaches(w1.SourceMessageKey, vocab.MessageHandled, time.Minute)
	if _, err := s.ctl.Inject(s.ctx, bot.BotID, ilinksim.InjectRequest{Kind: ilinksim.KindFile, FileName: fileName}); err != nil {
		t.Fatal(err)
	}
	var w2 store.Window
	s.eventually("the file message's window", time.Minute, func() (bool, error) {
		ws, err := s.store.ListWindows(s.ctx, store.WindowFilter{AccountKey: accountKey, State: vocab.WindowOpen})
		if err != nil || len(ws) != 1 || ws[0].ReplyWindowID == w1.ReplyWindowID {
			return false, err
		}
		w2 = ws[0]
		return true, nil
	})
	s.messageReaches(w2.SourceMessageKey, vocab.MessageHandled, time.Minute)
	// The agent answered both through the send Update.
	texts := s.sentTexts(bot.BotID, 2)
	if !strings.Contains(strings.Join(texts, "\n"), codecReply+" re: "+userText) {
		t.Fatalf("the agent did not answer the text: %q", texts)
	}

	// Raw bytes of every history: no plaintext; every payload is encrypted.
	plain := []string{userText, fileName, reply}
	var payloads []*commonpb.Payload
	execs := s.executions()
	for _, e := range execs {
		raw, err := proto.Marshal(e.history)
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		collectText(e.history.ProtoReflect(), &text)
		for _, p := range plain {
			if bytes.Contains(raw, []byte(p)) || strings.Contains(text.String(), p) {
				t.Errorf("%q appears in the history of %s (%s)", p, e.workflowID, e.workflowType)
			}
		}
		collectPayloads(e.history.ProtoReflect(), &payloads)
	}
	encrypted := 0
	for _, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) == payloadcodec.Encoding {
			encrypted++
		} else {
			t.Errorf("an unencrypted payload in history (encoding %q)", p.GetMetadata()[converter.MetadataEncoding])
		}
	}
	if encrypted < 10 {
		t.Fatalf("%d encrypted payloads in %d histories, want many", encrypted, len(execs))
	}

	// Through the codec endpoint: refused without the token, decoded with it.
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: payloads})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := postDecode(t, endpoint, "", s.ns, body); code != http.StatusUnauthorized {
		t.Fatalf("decode without the token: %d, want 401", code)
	}
	code, out := postDecode(t, endpoint, "Bearer "+codecToken, s.ns, body)
	if code != http.StatusOK {
		t.Fatalf("decode: %d %s", code, out)
	}
	var decoded commonpb.Payloads
	if err := protojson.Unmarshal([]byte(out), &decoded); err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, p := range decoded.Payloads {
		all.Write(p.GetData())
		all.WriteByte('\n')
	}
	for _, p := range plain {
		if !strings.Contains(all.String(), p) {
			t.Errorf("%q is not in the decoded payloads", p)
		}
	}
	t.Logf("%d payloads of %d workflow runs, all encrypted; decoded through %s", encrypted, len(execs), endpoint)

	// The Temporal CLI decodes through the endpoint as an operator would.
	cli, err := devserver.FindCLI()
	if err != nil {
		t.Fatalf("temporal CLI: %v", err)
	}
	dev := devserver.Start(t)
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	// show returns the payloads' data of the window's history as the CLI shows it.
	show := func(auth string) (string, error) {
		args := []string{"workflow", "show", "--address", dev.HostPort, "--namespace", s.ns,
			"--workflow-id", s.windowWF(w2.ReplyWindowID), "--output", "json", "--codec-endpoint", endpoint}
		if auth != "" {
			args = append(args, "--codec-auth", auth)
		}
		cmd := exec.CommandContext(ctx, cli, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			return stderr.String(), err
		}
		var h historypb.History
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &h); err != nil {
			return "", err
		}
		var ps []*commonpb.Payload
		collectPayloads(h.ProtoReflect(), &ps)
		var data strings.Builder
		for _, p := range ps {
			data.Write(p.GetData())
		}
		return data.String(), nil
	}
	shown, err := show("Bearer " + codecToken)
	if err != nil || !strings.Contains(shown, reply) {
		t.Fatalf("temporal workflow show with the codec: %v, reply text shown: %v", err, strings.Contains(shown, reply))
	}
	if shown, _ := show("Bearer wrong-token"); strings.Contains(shown, reply) {
		t.Fatal("temporal workflow show with a wrong token shows the reply text")
	}
}

const codecReply = "codec-reply-text the gate is closed"

// codecAgent is an agent workflow that answers with codecReply and the summary through
// the window's send Update, then marks the message handled.
func codecAgent(ctx workflow.Context, in agent.Input) error {
	if _, err := agent.WorkflowReplyTo(ctx, in, codecReply+" re: "+in.Summary, ""); err != nil {
		return err
	}
	return agent.WorkflowFinish(ctx, in.WindowWorkflowID, true, "")
}

func postDecode(t *testing.T, endpoint, auth, ns string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint+"/decode", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Namespace", ns)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// collectPayloads appends every Payload message in m (at any depth) to out.
func collectPayloads(m protoreflect.Message, out *[]*commonpb.Payload) {
	switch v := m.Interface().(type) {
	case *commonpb.Payload:
		*out = append(*out, v)
		return
	case *commonpb.SearchAttributes:
		return // indexed by the server, never encoded by a codec (ilinkflow's: account key and peer id)
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			return true
		}
		switch {
		case fd.IsList():
			for i := 0; i < v.List().Len(); i++ {
				collectPayloads(v.List().Get(i).Message(), out)
			}
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					collectPayloads(mv.Message(), out)
					return true
				})
			}
		default:
			collectPayloads(v.Message(), out)
		}
		return true
	})
}
