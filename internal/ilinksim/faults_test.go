package ilinksim

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestFaultStatusAnswers5xxForTheNextNRequests(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	if err := e.ctl.AddFault(e.ctx, Fault{Endpoint: "getupdates", Kind: FaultStatus, Status: 502, Count: 2}); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"get_updates_buf":"","base_info":{"channel_version":"2.4.9"}}`)
	for i := 0; i < 2; i++ {
		if status, _, _, err := e.raw(e.ctx, http.MethodPost, "/ilink/bot/getupdates", b.Token, body); err != nil || status != 502 {
			t.Fatalf("try %d: %d %v", i, status, err)
		}
	}
	if r := e.poll(b.Token, ""); num(r, "ret") != 0 {
		t.Fatalf("after the fault: %v", r)
	}
	reqs, _ := e.ctl.Requests(e.ctx)
	if reqs[0].Fault != FaultStatus || reqs[2].Fault != "" {
		t.Fatalf("fault not recorded: %+v", reqs)
	}
}

func TestFaultDropClosesConnectionAfterRequestWasRead(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	in := e.inject(b.BotID, InjectRequest{Text: "x"})
	if err := e.ctl.AddFault(e.ctx, Fault{Endpoint: "sendmessage", Kind: FaultDrop}); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(textMsg(b.Owner, in.ContextToken, "lost?"))
	_, _, _, err := e.raw(e.ctx, http.MethodPost, "/ilink/bot/sendmessage", b.Token, raw)
	if err == nil {
		t.Fatal("dropped connection returned no error")
	}
	reqs, _ := e.ctl.Requests(e.ctx)
	last := reqs[len(reqs)-1]
	if last.Endpoint != "sendmessage" || last.Fault != FaultDrop || !strings.Contains(string(last.Body), "lost?") {
		t.Fatalf("request not recorded with its body: %+v", last)
	}
}

func TestFaultDelayThenNormalAnswer(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	if err := e.ctl.AddFault(e.ctx, Fault{Endpoint: "getconfig", Kind: FaultDelay, Delay: Duration(30 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := e.api(b.Token, "getconfig", map[string]any{"ilink_user_id": b.Owner})
	if num(r, "ret") != 0 || time.Since(start) < 30*time.Millisecond {
		t.Fatalf("delayed getconfig: %v after %s", r, time.Since(start))
	}
}

func TestFaultBodiesStaleInvalidOversizedCustom(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	for _, f := range []Fault{
		{Endpoint: "sendmessage", Kind: FaultStale},
		{Endpoint: "getupdates", Kind: FaultInvalidJSON},
		{Endpoint: "getupdates", Kind: FaultOversized, Size: 3 << 20},
		{Endpoint: "*", Kind: FaultBody, Body: `{"ret":-2,"errmsg":"unknown error"}`},
	} {
		if err := e.ctl.AddFault(e.ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	if r := e.send(b, b.Owner, "", "x"); num(r, "errcode") != -14 {
		t.Fatalf("stale fault: %v", r)
	}
	body := []byte(`{"get_updates_buf":"","base_info":{"channel_version":"2.4.9"}}`)
	_, _, out, err := e.raw(e.ctx, http.MethodPost, "/ilink/bot/getupdates", b.Token, body)
	if err != nil || json.Valid(out) {
		t.Fatalf("invalid_json fault: %v %s", err, out)
	}
	_, _, out, err = e.raw(e.ctx, http.MethodPost, "/ilink/bot/getupdates", b.Token, body)
	if err != nil || len(out) != 3<<20 || !json.Valid(out) {
		t.Fatalf("oversized fault: %v, %d bytes", err, len(out))
	}
	if r := e.api(b.Token, "msg/notifystart", nil); r["errmsg"] != "unknown error" {
		t.Fatalf("custom body fault on *: %v", r)
	}
	if fs, _ := e.ctl.Faults(e.ctx); len(fs) != 0 {
		t.Fatalf("faults left: %+v", fs)
	}
}

func TestFaultsCanBeListedAndCleared(t *testing.T) {
	e := newEnv(t, nil)
	if err := e.ctl.AddFault(e.ctx, Fault{Endpoint: "/ilink/bot/getupdates", Kind: FaultStatus, Count: 3}); err != nil {
		t.Fatal(err)
	}
	fs, err := e.ctl.Faults(e.ctx)
	if err != nil || len(fs) != 1 || fs[0].Endpoint != "getupdates" || fs[0].Count != 3 {
		t.Fatalf("faults: %+v %v", fs, err)
	}
	if err := e.ctl.ClearFaults(e.ctx); err != nil {
		t.Fatal(err)
	}
	if fs, _ := e.ctl.Faults(e.ctx); len(fs) != 0 {
		t.Fatalf("faults after clear: %+v", fs)
	}
	var ce *ControlError
	if err := e.ctl.AddFault(e.ctx, Fault{Endpoint: "x", Kind: "explode"}); !errors.As(err, &ce) || ce.StatusCode != http.StatusBadRequest {
		t.Fatalf("unknown kind: %v", err)
	}
}

func TestOversizedAndInvalidRequestBodies(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxBodyBytes = 1024 })
	b := e.bot()
	big := []byte(`{"get_updates_buf":"` + strings.Repeat("x", 2000) + `"}`)
	status, _, _, err := e.raw(e.ctx, http.MethodPost, "/ilink/bot/getupdates", b.Token, big)
	if err != nil || status != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body: %d %v", status, err)
	}
	for _, body := range []string{`{"get_updates_buf":`, ``, `[]`, `{"msg":{"item_list":"nope"}}`} {
		for _, ep := range []string{"getupdates", "sendmessage", "getconfig", "sendtyping", "getuploadurl"} {
			status, _, out, err := e.raw(e.ctx, http.MethodPost, "/ilink/bot/"+ep, b.Token, []byte(body))
			if err != nil || status != http.StatusOK {
				t.Fatalf("%s %q: %d %v", ep, body, status, err)
			}
			if m := decodeMap(t, out); num(m, "ret") != -2 && ep != "getupdates" {
				t.Fatalf("%s %q: %v", ep, body, m)
			}
		}
	}
	// Wrong methods.
	status, _, _, _ = e.raw(e.ctx, http.MethodGet, "/ilink/bot/sendmessage", b.Token, nil)
	if status != http.StatusMethodNotAllowed {
		t.Fatalf("GET sendmessage: %d", status)
	}
}
