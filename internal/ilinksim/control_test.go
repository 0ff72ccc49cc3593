package ilinksim

import (
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRequestsAreRecordedWithHeadersBodyAndProblems(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	e.poll(b.Token, "")
	// A sloppy client: no iLink headers, no base_info, bad UIN.
	req, _ := http.NewRequestWithContext(e.ctx, http.MethodPost, e.srv.URL+"/ilink/bot/getupdates", strings.NewReader(`{"get_updates_buf":""}`))
	req.Header.Set("Authorization", "Bearer "+b.Token)
	req.Header.Set("X-WECHAT-UIN", base64.StdEncoding.EncodeToString([]byte("-1")))
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	reqs, err := e.ctl.Requests(e.ctx)
	if err != nil || len(reqs) != 2 {
		t.Fatalf("requests: %d %v", len(reqs), err)
	}
	good, bad := reqs[0], reqs[1]
	if good.Method != http.MethodPost || good.Path != "/ilink/bot/getupdates" || good.Endpoint != "getupdates" ||
		good.Header["Authorizationtype"] == nil && good.Header["AuthorizationType"] == nil ||
		!strings.Contains(string(good.Body), `"channel_version":"2.4.9"`) || len(good.Problems) != 0 {
		t.Fatalf("plugin-like request: %+v", good)
	}
	want := []string{"iLink-App-Id", "iLink-App-ClientVersion", "AuthorizationType", "X-WECHAT-UIN", "base_info", "Content-Type"}
	joined := strings.Join(bad.Problems, "\n")
	for _, w := range want {
		if !strings.Contains(joined, w) {
			t.Fatalf("problem about %s not recorded: %q", w, bad.Problems)
		}
	}
	if err := e.ctl.ClearRequests(e.ctx); err != nil {
		t.Fatal(err)
	}
	if reqs, _ := e.ctl.Requests(e.ctx); len(reqs) != 0 {
		t.Fatalf("requests after clear: %d", len(reqs))
	}
}

func TestStrictClientRejectsRequestsMissingPluginHeaders(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.StrictClient = true })
	b := e.bot()
	if r := e.poll(b.Token, ""); num(r, "ret") != 0 {
		t.Fatalf("plugin-like poll in strict mode: %v", r)
	}
	req, _ := http.NewRequestWithContext(e.ctx, http.MethodPost, e.srv.URL+"/ilink/bot/getupdates", strings.NewReader(`{"get_updates_buf":""}`))
	pluginHeaders(req.Header, b.Token)
	req.Header.Del("iLink-App-Id")
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := decodeMap(t, out)
	if num(m, "ret") != -2 || !strings.HasPrefix(m["errmsg"].(string), "strict client:") {
		t.Fatalf("strict rejection: %v", m)
	}
}

func TestRequireNotifyStartRendersOnlyFirstReplyPerConnection(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.RequireNotifyStart = true })
	b := e.bot()
	in := e.inject(b.BotID, InjectRequest{Text: "x"})
	e.send(b, b.Owner, in.ContextToken, "1")
	e.advance(gap)
	e.send(b, b.Owner, in.ContextToken, "2")
	e.api(b.Token, "msg/notifystart", nil)
	e.advance(gap)
	e.send(b, b.Owner, in.ContextToken, "3")
	sent, _ := e.ctl.Sent(e.ctx, b.BotID)
	if !sent[0].Rendered || sent[1].Rendered || !sent[2].Rendered {
		t.Fatalf("render flags: %+v", sent)
	}
}

func TestControlHelperErrorsAreTypedAndWrapped(t *testing.T) {
	e := newEnv(t, nil)
	_, err := e.ctl.BotState(e.ctx, "nope@im.bot")
	var ce *ControlError
	if !errors.As(err, &ce) || ce.StatusCode != http.StatusNotFound || !errors.Is(err, ErrControlNotFound) || ce.Op != "BotState" {
		t.Fatalf("unknown bot: %v", err)
	}
	if _, err := e.ctl.Inject(e.ctx, "nope@im.bot", InjectRequest{}); !errors.Is(err, ErrControlNotFound) {
		t.Fatalf("inject to unknown bot: %v", err)
	}
	b := e.bot()
	for _, req := range []InjectRequest{
		{Kind: "sticker"},
		{KeyEncoding: "rot13", Kind: KindImage},
		{MessageID: 5, NoMessageID: true},
		{Duplicates: []DuplicateSpec{{Mode: "twice"}}},
	} {
		if _, err := e.ctl.Inject(e.ctx, b.BotID, req); !errors.As(err, &ce) || ce.StatusCode != http.StatusBadRequest {
			t.Fatalf("bad inject %+v: %v", req, err)
		}
	}
	if _, err := e.ctl.Advance(e.ctx, -time.Second); err == nil {
		t.Fatal("clock moved backwards")
	}
	if _, err := e.ctl.ScanQR(e.ctx, "", ""); !errors.Is(err, ErrControlNotFound) {
		t.Fatalf("scan without QR: %v", err)
	}
	if _, err := e.ctl.Sent(e.ctx, "nope@im.bot"); !errors.Is(err, ErrControlNotFound) {
		t.Fatalf("sent of unknown bot: %v", err)
	}
	if _, err := e.ctl.CDNObject(e.ctx, "nope"); !errors.Is(err, ErrControlNotFound) {
		t.Fatalf("unknown CDN object: %v", err)
	}
	// Garbage control bodies do not panic.
	for _, path := range []string{"/_sim/bots", "/_sim/bots/" + b.BotID + "/messages", "/_sim/clock/advance", "/_sim/qr/scan", "/_sim/faults", "/_sim/bots/" + b.BotID + "/duplicates"} {
		resp, err := e.srv.Client().Post(e.srv.URL+path, "application/json", strings.NewReader(`{"by":"soon","kind":7,`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%s garbage: %d", path, resp.StatusCode)
		}
	}
	dead := NewControl("http://127.0.0.1:1", nil)
	if _, err := dead.Now(e.ctx); err == nil || !strings.Contains(err.Error(), "ilinksim control Now") {
		t.Fatalf("unreachable simulator: %v", err)
	}
}

func TestControlHelperClockBotsAndState(t *testing.T) {
	e := newEnv(t, nil)
	t0, err := e.ctl.Now(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	t1, err := e.ctl.Advance(e.ctx, 90*time.Minute)
	if err != nil || t1.Sub(t0) != 90*time.Minute {
		t.Fatalf("advance: %s %v", t1.Sub(t0), err)
	}
	owner := "o9cq8owner@im.wechat"
	b1, _ := e.ctl.CreateBot(e.ctx, CreateBotRequest{Owner: owner})
	b2, _ := e.ctl.CreateBot(e.ctx, CreateBotRequest{Owner: owner, KillPrevious: true})
	if b1.BaseURL != e.srv.URL || b2.Owner != owner {
		t.Fatalf("bots: %+v %+v", b1, b2)
	}
	bots, err := e.ctl.Bots(e.ctx)
	if err != nil || len(bots) != 2 || !bots[0].Dead || bots[1].Dead {
		t.Fatalf("bots: %+v %v", bots, err)
	}
	in := e.inject(b2.BotID, InjectRequest{Text: "x", From: "o9cq8other@im.wechat"})
	st, err := e.ctl.BotState(e.ctx, b2.BotID)
	if err != nil || st.Queued != 1 || len(st.Peers) != 1 || st.Peers[0].LatestContextToken != in.ContextToken || !st.Peers[0].LastInboundAt.Equal(t1) {
		t.Fatalf("state: %+v %v", st, err)
	}
	qrs, err := e.ctl.QRSessions(e.ctx)
	if err != nil || len(qrs) != 0 {
		t.Fatalf("qr sessions: %+v %v", qrs, err)
	}
	all, err := e.ctl.Sent(e.ctx, "")
	if err != nil || len(all) != 0 {
		t.Fatalf("sent: %+v %v", all, err)
	}
}

func TestDurationJSONAcceptsStringsAndMilliseconds(t *testing.T) {
	var d Duration
	for in, want := range map[string]time.Duration{`"1.5s"`: 1500 * time.Millisecond, `250`: 250 * time.Millisecond, `""`: 0} {
		if err := d.UnmarshalJSON([]byte(in)); err != nil || time.Duration(d) != want {
			t.Fatalf("%s: %s %v", in, time.Duration(d), err)
		}
	}
	for _, bad := range []string{`"soon"`, `1.5`, `true`} {
		if err := d.UnmarshalJSON([]byte(bad)); err == nil {
			t.Fatalf("%s accepted", bad)
		}
	}
}

func TestConfigValidateRejectsBadSettings(t *testing.T) {
	for _, mut := range []func(*Config){
		func(c *Config) { c.ContextTokenMode = "maybe" },
		func(c *Config) { c.ReplyQuota = -1 },
		func(c *Config) { c.ReplyWindow = -time.Hour },
		func(c *Config) { c.SendSuccessStyle = "" },
		func(c *Config) { c.MaxBodyBytes = 0 },
	} {
		c := DefaultConfig()
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Fatalf("accepted: %+v", c)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	// The zero Config still yields a working simulator.
	s := New(Config{})
	if s.Config().MaxBodyBytes <= 0 || s.Config().ContextTokenMode == "" {
		t.Fatalf("zero config not defaulted: %+v", s.Config())
	}
}
