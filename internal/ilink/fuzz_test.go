package ilink

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"
)

// fuzzLimit is the body cap used by the fuzz targets: every parser must
// refuse inputs above it.
const fuzzLimit = 4096

// responseSeeds are bodies every response fuzz target starts from.
var responseSeeds = []string{
	``, `{}`, `null`, `[]`, `{"ret":0}`, `{"ret":-2,"errmsg":"prepare failed"}`, `{"errcode":-14,"errmsg":"session timeout"}`,
	`{"ret":-14}`, `{"ret":"0"}`, `{"ret":1e400}`, `{"ret":0`, "\xff\xfe", `{"a":` + string(bytes.Repeat([]byte("["), 200)),
	`{"ret":0,"pad":"` + string(bytes.Repeat([]byte("x"), fuzzLimit)) + `"}`,
}

func addSeeds(f *testing.F, extra ...string) {
	for _, s := range append(responseSeeds, extra...) {
		f.Add([]byte(s))
	}
}

// checkCap fails when a body over the cap was not refused as too large.
func checkCap(t *testing.T, data []byte, err error) {
	t.Helper()
	if len(data) > fuzzLimit && CodeOf(err) != CodeBodyTooLarge {
		t.Fatalf("%d-byte body over the %d cap: got %v", len(data), fuzzLimit, err)
	}
	if err != nil && CodeOf(err) == "" {
		t.Fatalf("untyped error %v", err)
	}
}

func FuzzParseUpdates(f *testing.F) {
	addSeeds(f,
		`{"ret":0,"msgs":[{"message_id":18446744073709551615,"item_list":[{"type":1,"msg_id":"1","text_item":{"text":"hi"},"ref_msg":{"svr_id":"18446744073709551615"}}]}],"get_updates_buf":"Ck","longpolling_timeout_ms":35000}`,
		`{"msgs":[{"message_id":"18446744073709551615"}]}`, `{"msgs":[{"message_id":18446744073709551616}]}`,
		`{"msgs":[{"message_id":-1}]}`, `{"msgs":null,"longpolling_timeout_ms":-5}`,
		`{"msgs":[{"item_list":[{"type":4,"file_item":{"len":12}}]}]}`, `{"longpolling_timeout_ms":9223372036854775807}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		page, err := parseUpdates(bytes.NewReader(data), fuzzLimit, "cursor")
		checkCap(t, data, err)
		if err == nil {
			if page.Cursor == "" || page.PollTimeout < 0 {
				t.Fatalf("bad page %+v", page)
			}
			for _, m := range page.Messages {
				// Every id survives an encode/decode round trip unchanged.
				b, err := json.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				var back Message
				if err := json.Unmarshal(b, &back); err != nil || back.MessageID != m.MessageID {
					t.Fatalf("round trip %v: %d != %d", err, back.MessageID, m.MessageID)
				}
			}
		}
	})
}

func FuzzParseSendMessage(f *testing.F) {
	addSeeds(f, `{"ret":0,"message_id":18446744073709551615}`, `{"message_id":"12"}`, `{"message_id":1.5}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := parseSend(bytes.NewReader(data), fuzzLimit)
		checkCap(t, data, err)
	})
}

func FuzzParseUploadURL(f *testing.F) {
	addSeeds(f, `{"upload_param":"p"}`, `{"upload_full_url":"https://cdn/upload?x=1"}`, `{"ret":0,"thumb_upload_param":"t"}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		u, err := parseUploadURL(bytes.NewReader(data), fuzzLimit)
		checkCap(t, data, err)
		if err == nil && u.UploadParam == "" && u.UploadFullURL == "" {
			t.Fatal("accepted an answer without an upload reference")
		}
	})
}

func FuzzParseGetConfig(f *testing.F) {
	addSeeds(f, `{"ret":0,"typing_ticket":"AARTBK8F"}`, `{"typing_ticket":5}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := parseConfig(bytes.NewReader(data), fuzzLimit)
		checkCap(t, data, err)
	})
}

func FuzzParsePlainEnvelope(f *testing.F) {
	addSeeds(f, `{"ret":0,"errmsg":""}`, `{"errcode":0}`, `{"errcode":-12}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		err := parsePlain(opSendTyping, bytes.NewReader(data), fuzzLimit)
		checkCap(t, data, err)
	})
}

func FuzzParseBotQRCode(f *testing.F) {
	addSeeds(f, `{"qrcode":"q","qrcode_img_content":"https://liteapp.weixin.qq.com/q/x"}`, `{"qrcode":""}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		qr, err := parseBotQRCode(bytes.NewReader(data), fuzzLimit)
		checkCap(t, data, err)
		if err == nil && qr.QRCode == "" {
			t.Fatal("accepted an empty qrcode")
		}
	})
}

func FuzzParseQRCodeStatus(f *testing.F) {
	addSeeds(f, `{"status":"wait"}`, `{"status":"scaned_but_redirect","redirect_host":"h"}`,
		`{"status":"confirmed","bot_token":"t","ilink_bot_id":"b@im.bot","baseurl":"https://x","ilink_user_id":"u"}`,
		`{"status":"confirmed"}`, `{"status":7}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := parseQRStatus(bytes.NewReader(data), fuzzLimit)
		checkCap(t, data, err)
		if err == nil && (st.Status == "" || st.Status == QRConfirmed && (st.ILinkBotID == "" || st.BotToken == "")) {
			t.Fatalf("accepted %+v", st)
		}
	})
}

func FuzzParseCDNUploadResponse(f *testing.F) {
	f.Add("dl-param")
	f.Add("")
	f.Add("a\x00b")
	f.Fuzz(func(t *testing.T, v string) {
		h := http.Header{}
		h["X-Encrypted-Param"] = []string{v}
		p, err := parseUploadResponse(h)
		if (v == "") != (err != nil) || err == nil && p != v {
			t.Fatalf("%q: %q %v", v, p, err)
		}
	})
}

func FuzzDecodeAESKey(f *testing.F) {
	key := []byte("0123456789abcdef")
	f.Add(base64.StdEncoding.EncodeToString(key))
	f.Add(OutboundAESKey(key).Reveal())
	f.Add("")
	f.Add("!!!!")
	f.Add(base64.StdEncoding.EncodeToString(make([]byte, 32)))
	f.Fuzz(func(t *testing.T, s string) {
		k, err := DecodeAESKey(Secret(s))
		if err == nil && len(k) != KeySize {
			t.Fatalf("%d-byte key accepted", len(k))
		}
	})
}

func FuzzDecryptMedia(f *testing.F) {
	key := []byte("0123456789abcdef")
	ct, _ := EncryptECB(key, []byte("hello media"))
	f.Add(ct, key)
	f.Add([]byte{}, key)
	f.Add(make([]byte, 16), key)
	f.Add(ct, []byte("short"))
	f.Fuzz(func(t *testing.T, data, key []byte) {
		if len(data) > fuzzLimit {
			return
		}
		plain, err := decryptMedia(data, key)
		if err == nil && key != nil && len(plain) >= len(data) {
			t.Fatal("decryption did not remove padding")
		}
		if err != nil && CodeOf(err) != CodeMedia {
			t.Fatalf("untyped error %v", err)
		}
		if err == nil && len(key) == KeySize {
			again, err := EncryptECB(key, plain)
			if err != nil || !bytes.Equal(again, data) {
				t.Fatal("ECB/PKCS#7 is not a bijection on valid input")
			}
		}
	})
}

func FuzzIDUnmarshal(f *testing.F) {
	for _, s := range []string{`18446744073709551615`, `"18446744073709551615"`, `0`, `""`, `null`, `-1`, `1e3`, `"x"`, `18446744073709551616`, `"\u0031"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var id ID
		if err := id.UnmarshalJSON(data); err != nil {
			return
		}
		b, _ := id.MarshalJSON()
		var back ID
		if err := json.Unmarshal(b, &back); err != nil || back != id {
			t.Fatalf("round trip of %d: %d %v", id, back, err)
		}
		var sid StringID
		if err := sid.UnmarshalJSON(data); err != nil || uint64(sid) != uint64(id) {
			t.Fatalf("StringID disagrees: %d %v", sid, err)
		}
	})
}

func FuzzReadLimited(f *testing.F) {
	f.Add([]byte("abc"), int64(3), int64(2))
	f.Add([]byte("abc"), int64(-1), int64(3))
	f.Add([]byte(""), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, data []byte, contentLength, limit int64) {
		limit = min(limit, fuzzLimit)
		got, err := readLimited(bytes.NewReader(data), contentLength, limit)
		effective := max(limit, 0) // a negative cap reads nothing
		if err == nil && (int64(len(got)) > effective || !bytes.Equal(got, data)) {
			t.Fatalf("read %d bytes with limit %d", len(got), limit)
		}
		if err != nil && int64(len(data)) <= effective && contentLength <= effective {
			t.Fatalf("refused %d bytes under the limit %d: %v", len(data), limit, err)
		}
	})
}
