package ilinksim

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzHandlerNeverFails sends arbitrary bodies and queries to every route;
// the simulator must answer without an internal error (a recovered panic
// would show as HTTP 500).
func FuzzHandlerNeverFails(f *testing.F) {
	seeds := []string{
		``, `{}`, `null`, `[]`, `{"get_updates_buf":null}`, `{"msg":null}`, `{"msg":{"item_list":[null]}}`,
		`{"msg":{"to_user_id":"u","item_list":[{"type":1,"text_item":null}]}}`,
		`{"msg":{"to_user_id":"u","item_list":[{"type":4,"file_item":{"media":{},"len":null}}]}}`,
		`{"msg":{"to_user_id":"u","item_list":[{"type":2,"image_item":{"media":{"aes_key":"%%%"}}}]}}`,
		`{"local_token_list":[1,2]}`, `{"kind":"image","data":"AAAA","key_encoding":"aeskey-hex","duplicates":[{"mode":"same","delay":-5}]}`,
		`{"by":"-1h"}`, `{"by":9223372036854775807}`, `{"message_id":18446744073709551616}`,
		`{"endpoint":"*","kind":"oversized","size":-1}`, `{"filekey":"a","media_type":1,"to_user_id":"u","rawsize":-1,"filesize":16,"aeskey":"00000000000000000000000000000000"}`,
	}
	paths := []string{
		"/ilink/bot/getupdates", "/ilink/bot/sendmessage", "/ilink/bot/getuploadurl", "/ilink/bot/getconfig",
		"/ilink/bot/sendtyping", "/ilink/bot/msg/notifystart", "/ilink/bot/msg/notifystop",
		"/ilink/bot/get_bot_qrcode?bot_type=3", "/ilink/bot/get_qrcode_status?qrcode=x&verify_code=1",
		"/c2c/upload?encrypted_query_param=x&filekey=y", "/c2c/download?encrypted_query_param=%zz",
		"/_sim/bots", "/_sim/bots/BOT/messages", "/_sim/bots/BOT/duplicates", "/_sim/bots/BOT/kill",
		"/_sim/clock/advance", "/_sim/qr/scan", "/_sim/qr/verify", "/_sim/qr/redirect", "/_sim/qr/confirm",
		"/_sim/qr/expire", "/_sim/qr/dance", "/_sim/faults", "/_sim/cdn?encrypted_query_param=x",
	}
	for i, s := range seeds {
		f.Add(uint8(i), s, true)
		f.Add(uint8(i*7+3), s, false)
	}
	f.Fuzz(func(t *testing.T, pathIdx uint8, body string, auth bool) {
		cfg := DefaultConfig()
		cfg.LongPollHold = 0
		sim := New(cfg)
		h := sim.Handler()
		b := sim.CreateBot(CreateBotRequest{}, "http://sim")
		if _, err := sim.Inject(b.BotID, InjectRequest{Text: "x"}, "http://sim/c2c"); err != nil {
			t.Fatal(err)
		}
		path := strings.ReplaceAll(paths[int(pathIdx)%len(paths)], "BOT", b.BotID)
		for _, method := range []string{http.MethodPost, http.MethodGet} {
			req := httptest.NewRequest(method, path, bytes.NewReader([]byte(body)))
			pluginHeaders(req.Header, "")
			if auth {
				req.Header.Set("Authorization", "Bearer "+b.Token)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code == http.StatusInternalServerError {
				t.Fatalf("%s %s %q: HTTP 500: %s", method, path, body, rec.Body.String())
			}
		}
	})
}
