package ilink_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
)

// simEnv is a simulator served over loopback HTTP, its control client, one
// bound bot and an ilink client authenticated as that bot.
type simEnv struct {
	t      *testing.T
	ctx    context.Context
	sim    *ilinksim.Server
	srv    *httptest.Server
	ctl    *ilinksim.Control
	bot    ilinksim.BotInfo
	client *ilink.Client
}

// newSim starts a simulator with test-friendly defaults (short long-poll
// hold), changed by simCfg, and a client changed by cliCfg.
func newSim(t *testing.T, simCfg func(*ilinksim.Config), cliCfg func(*ilink.Config)) *simEnv {
	t.Helper()
	cfg := ilinksim.DefaultConfig()
	cfg.LongPollHold = 50 * time.Millisecond
	if simCfg != nil {
		simCfg(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	sim := ilinksim.New(cfg)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	e := &simEnv{t: t, ctx: context.Background(), sim: sim, srv: srv, ctl: ilinksim.NewControl(srv.URL, srv.Client())}
	bot, err := e.ctl.CreateBot(e.ctx, ilinksim.CreateBotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	e.bot = bot
	e.client = e.newClient(ilink.Secret(bot.Token), cliCfg)
	return e
}

// newClient returns a client for this simulator.
func (e *simEnv) newClient(token ilink.Secret, cliCfg func(*ilink.Config)) *ilink.Client {
	e.t.Helper()
	cfg := ilink.Config{
		BaseURL:        e.srv.URL,
		CDNBaseURL:     e.srv.URL + "/c2c",
		RedirectScheme: "http",
		CDNRetryDelay:  -1,
		PollTimeout:    5 * time.Second,
		PollMargin:     5 * time.Second,
	}
	if cliCfg != nil {
		cliCfg(&cfg)
	}
	c, err := ilink.New(cfg, token)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// advance moves the sim clock.
func (e *simEnv) advance(d time.Duration) {
	e.t.Helper()
	if _, err := e.ctl.Advance(e.ctx, d); err != nil {
		e.t.Fatal(err)
	}
}

// inject queues an inbound message from the owner.
func (e *simEnv) inject(req ilinksim.InjectRequest) ilinksim.Injected {
	e.t.Helper()
	in, err := e.ctl.Inject(e.ctx, e.bot.BotID, req)
	if err != nil {
		e.t.Fatal(err)
	}
	return in
}

// poll calls GetUpdates and fails the test on error.
func (e *simEnv) poll(cursor string) *ilink.UpdatesPage {
	e.t.Helper()
	page, err := e.client.GetUpdates(e.ctx, ilink.GetUpdatesRequest{Cursor: cursor})
	if err != nil {
		e.t.Fatal(err)
	}
	return page
}

// converse injects a text from the owner and polls it; it returns the
// inbound message (whose context token allows replies).
func (e *simEnv) converse(text string) ilink.Message {
	e.t.Helper()
	e.inject(ilinksim.InjectRequest{Kind: ilinksim.KindText, Text: text})
	page := e.poll("")
	if len(page.Messages) != 1 {
		e.t.Fatalf("%d messages", len(page.Messages))
	}
	return page.Messages[0]
}

// replyOpts addresses a reply to m.
func replyOpts(m ilink.Message) ilink.SendOptions {
	return ilink.SendOptions{ToUserID: m.FromUserID, ContextToken: m.ContextToken}
}

// requests returns the recorded requests to endpoint.
func (e *simEnv) requests(endpoint string) []ilinksim.RecordedRequest {
	e.t.Helper()
	all, err := e.ctl.Requests(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []ilinksim.RecordedRequest
	for _, r := range all {
		if r.Endpoint == endpoint {
			out = append(out, r)
		}
	}
	return out
}

// sent returns the bot's sendmessage log.
func (e *simEnv) sent() []ilinksim.SentMessage {
	e.t.Helper()
	s, err := e.ctl.Sent(e.ctx, e.bot.BotID)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// fault arms a simulator fault.
func (e *simEnv) fault(f ilinksim.Fault) {
	e.t.Helper()
	if err := e.ctl.AddFault(e.ctx, f); err != nil {
		e.t.Fatal(err)
	}
}

// header returns the single value of a recorded header.
func header(t *testing.T, r ilinksim.RecordedRequest, name string) string {
	t.Helper()
	for k, v := range r.Header {
		if strings.EqualFold(k, name) {
			if len(v) != 1 {
				t.Fatalf("%s: header %s has %d values", r.Endpoint, name, len(v))
			}
			return v[0]
		}
	}
	return ""
}

// checkUIN asserts X-WECHAT-UIN is base64 of a decimal uint32.
func checkUIN(t *testing.T, r ilinksim.RecordedRequest) {
	t.Helper()
	v := header(t, r, "X-WECHAT-UIN")
	raw, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		t.Fatalf("%s: X-WECHAT-UIN %q is not base64", r.Endpoint, v)
	}
	if _, err := strconv.ParseUint(string(raw), 10, 32); err != nil || raw[0] == '+' {
		t.Fatalf("%s: X-WECHAT-UIN decodes to %q, not a decimal uint32", r.Endpoint, raw)
	}
}

// jsonBody decodes a recorded request body into a generic map.
func jsonBody(t *testing.T, r ilinksim.RecordedRequest) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(string(r.Body)))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%s: body is not a JSON object: %v", r.Endpoint, err)
	}
	return m
}

// sentItem decodes the single item of a recorded send.
func sentItem(t *testing.T, s ilinksim.SentMessage) map[string]any {
	t.Helper()
	var msg struct {
		ItemList []map[string]any `json:"item_list"`
	}
	dec := json.NewDecoder(strings.NewReader(string(s.Msg)))
	dec.UseNumber()
	if err := dec.Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if len(msg.ItemList) != 1 {
		t.Fatalf("send %d carries %d items, want exactly 1", s.Index, len(msg.ItemList))
	}
	return msg.ItemList[0]
}

// b64 is standard base64 of s.
func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// asIlinkError is errors.As for *ilink.Error.
func asIlinkError(err error, target **ilink.Error) bool { return errors.As(err, target) }
