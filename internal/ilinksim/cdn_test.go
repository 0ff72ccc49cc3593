package ilinksim

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// upload runs getuploadurl + CDN POST the way the official plugin does and
// returns the x-encrypted-param and the hex key.
func (e *env) upload(b BotInfo, plain []byte, mediaType int) (string, string) {
	e.t.Helper()
	key := randBytes(16)
	keyHex := hex.EncodeToString(key)
	sum := md5.Sum(plain)
	ct := encryptECB(key, plain)
	fileKey := randHex(16)
	r := e.api(b.Token, "getuploadurl", map[string]any{
		"filekey": fileKey, "media_type": mediaType, "to_user_id": b.Owner,
		"rawsize": len(plain), "rawfilemd5": hex.EncodeToString(sum[:]), "filesize": len(ct),
		"no_need_thumb": true, "aeskey": keyHex,
	})
	full, _ := r["upload_full_url"].(string)
	param, _ := r["upload_param"].(string)
	if num(r, "ret") != 0 || !strings.HasPrefix(full, e.srv.URL+"/c2c/upload?") || param == "" {
		e.t.Fatalf("getuploadurl: %v", r)
	}
	resp, err := e.srv.Client().Post(full, "application/octet-stream", bytes.NewReader(ct))
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	dl := resp.Header.Get("x-encrypted-param")
	if resp.StatusCode != http.StatusOK || dl == "" {
		e.t.Fatalf("upload: HTTP %d, x-encrypted-param %q, x-error-message %q", resp.StatusCode, dl, resp.Header.Get("x-error-message"))
	}
	return dl, keyHex
}

func (e *env) download(param string) (int, http.Header, []byte) {
	e.t.Helper()
	status, h, body, err := e.raw(e.ctx, http.MethodGet, "/c2c/download?encrypted_query_param="+url.QueryEscape(param), "", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return status, h, body
}

func TestCDNUploadThenDownloadReturnsCiphertextByteForByte(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	plain := []byte(strings.Repeat("picture bytes ", 100))
	dl, keyHex := e.upload(b, plain, 1)
	status, _, ct := e.download(dl)
	if status != http.StatusOK {
		t.Fatalf("download: %d", status)
	}
	key, _ := hex.DecodeString(keyHex)
	got, err := decryptECB(key, ct)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("decrypted download differs: %v", err)
	}
	obj, err := e.ctl.CDNObject(e.ctx, dl)
	if err != nil || !bytes.Equal(obj.Ciphertext, ct) || !bytes.Equal(obj.Plaintext, plain) || obj.Source != "upload" || obj.MediaType != 1 {
		t.Fatalf("control CDN object: %+v %v", obj, err)
	}
	// Sending it with the plugin's shape renders.
	in := e.inject(b.BotID, InjectRequest{Text: "send me a picture"})
	msg := map[string]any{"msg": map[string]any{
		"from_user_id": "", "to_user_id": b.Owner, "client_id": "c", "message_type": 2, "message_state": 2, "context_token": in.ContextToken,
		"item_list": []any{map[string]any{"type": 2, "image_item": map[string]any{
			"media":    map[string]any{"encrypt_query_param": dl, "aes_key": base64.StdEncoding.EncodeToString([]byte(keyHex)), "encrypt_type": 1},
			"mid_size": len(ct),
		}}},
	}}
	if r := e.api(b.Token, "sendmessage", msg); num(r, "ret") != 0 {
		t.Fatalf("send image: %v", r)
	}
	sent, _ := e.ctl.Sent(e.ctx, b.BotID)
	if !sent[0].Rendered {
		t.Fatalf("image not rendered: %s", sent[0].RenderNote)
	}
}

func TestOutboundMediaWithWrongKeyEncodingIsAcceptedButNotRendered(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ThrottleBurst = 0 })
	b := e.bot()
	dl, keyHex := e.upload(b, []byte("a file"), 3)
	key, _ := hex.DecodeString(keyHex)
	in := e.inject(b.BotID, InjectRequest{Text: "x"})
	send := func(param, aesKey string) SentMessage {
		msg := map[string]any{"msg": map[string]any{
			"to_user_id": b.Owner, "client_id": randHex(4), "message_type": 2, "message_state": 2, "context_token": in.ContextToken,
			"item_list": []any{map[string]any{"type": 4, "file_item": map[string]any{
				"media": map[string]any{"encrypt_query_param": param, "aes_key": aesKey, "encrypt_type": 1}, "file_name": "a.txt", "len": "6",
			}}},
		}}
		if r := e.api(b.Token, "sendmessage", msg); num(r, "ret") != 0 {
			t.Fatalf("send: %v", r)
		}
		sent, _ := e.ctl.Sent(e.ctx, b.BotID)
		return sent[len(sent)-1]
	}
	if s := send(dl, base64.StdEncoding.EncodeToString([]byte(keyHex))); !s.Rendered {
		t.Fatalf("correct key: %s", s.RenderNote)
	}
	if s := send(dl, base64.StdEncoding.EncodeToString(key)); s.Rendered || !strings.Contains(s.RenderNote, "raw key") {
		t.Fatalf("raw-bytes key: %+v", s)
	}
	if s := send("bogus", base64.StdEncoding.EncodeToString([]byte(keyHex))); s.Rendered {
		t.Fatalf("unknown param: %+v", s)
	}
	// len must be a decimal string.
	msg := map[string]any{"msg": map[string]any{
		"to_user_id": b.Owner, "client_id": "n", "message_type": 2, "message_state": 2, "context_token": in.ContextToken,
		"item_list": []any{map[string]any{"type": 4, "file_item": map[string]any{"media": map[string]any{"encrypt_query_param": dl}, "len": 6}}},
	}}
	if r := e.api(b.Token, "sendmessage", msg); num(r, "ret") != -2 {
		t.Fatalf("numeric len: %v", r)
	}
}

func TestCDNRejectsBadUploadsWith4xxAndErrorMessage(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	plain := []byte("hello world")
	key := randBytes(16)
	ct := encryptECB(key, plain)
	sum := md5.Sum(plain)
	r := e.api(b.Token, "getuploadurl", map[string]any{
		"filekey": "fk", "media_type": 3, "to_user_id": b.Owner, "rawsize": len(plain),
		"rawfilemd5": hex.EncodeToString(sum[:]), "filesize": len(ct), "aeskey": hex.EncodeToString(key),
	})
	param, _ := r["upload_param"].(string)
	post := func(method, q string, body []byte) *http.Response {
		req, _ := http.NewRequestWithContext(e.ctx, method, e.srv.URL+"/c2c/upload?"+q, bytes.NewReader(body))
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	good := "encrypted_query_param=" + url.QueryEscape(param) + "&filekey=fk"
	for name, resp := range map[string]*http.Response{
		"unknown param": post(http.MethodPost, "encrypted_query_param=nope&filekey=fk", ct),
		"wrong filekey": post(http.MethodPost, "encrypted_query_param="+url.QueryEscape(param)+"&filekey=other", ct),
		"plaintext":     post(http.MethodPost, good, append(plain, make([]byte, 5)...)),
		"PUT":           post(http.MethodPut, good, ct),
	} {
		if resp.StatusCode/100 != 4 || resp.Header.Get("x-error-message") == "" || resp.Header.Get("x-encrypted-param") != "" {
			t.Fatalf("%s: HTTP %d %q", name, resp.StatusCode, resp.Header.Get("x-error-message"))
		}
	}
	if resp := post(http.MethodPost, good, ct); resp.StatusCode != http.StatusOK || resp.Header.Get("x-encrypted-param") == "" {
		t.Fatalf("good upload after failures: %d", resp.StatusCode)
	}
	if status, h, _ := e.download("missing"); status != http.StatusNotFound || h.Get("x-error-message") == "" {
		t.Fatalf("download of a missing object: %d", status)
	}
	// getuploadurl validates the hex key.
	if r := e.api(b.Token, "getuploadurl", map[string]any{"filekey": "fk", "media_type": 1, "to_user_id": b.Owner, "rawsize": 1, "filesize": 16, "aeskey": "short"}); num(r, "ret") != -2 {
		t.Fatalf("bad aeskey: %v", r)
	}
}

func TestUploadURLStyles(t *testing.T) {
	for style, want := range map[string][2]bool{UploadFull: {true, false}, UploadParam: {false, true}} {
		e := newEnv(t, func(c *Config) { c.UploadURLStyle = style })
		b := e.bot()
		r := e.api(b.Token, "getuploadurl", map[string]any{"filekey": "fk", "media_type": 1, "to_user_id": b.Owner, "rawsize": 1, "filesize": 16, "aeskey": randHex(16)})
		_, full := r["upload_full_url"]
		_, param := r["upload_param"]
		if full != want[0] || param != want[1] {
			t.Fatalf("%s: %v", style, r)
		}
	}
}

// decodeInboundKey applies the protocol's key rules for inbound media: an image's
// image_item.aeskey (32 hex digits) when present, else media.aes_key, which is base64 of
// either the 16 raw key bytes or their 32 hex digits.
func decodeInboundKey(t *testing.T, item map[string]any, media map[string]any) []byte {
	t.Helper()
	if img, ok := item["image_item"].(map[string]any); ok {
		if h, ok := img["aeskey"].(string); ok && h != "" {
			k, err := hex.DecodeString(h)
			if err != nil {
				t.Fatal(err)
			}
			return k
		}
	}
	s, _ := media["aes_key"].(string)
	if s == "" {
		return nil
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) == 16 {
		return raw
	}
	k, err := hex.DecodeString(string(raw))
	if err != nil || len(k) != 16 {
		t.Fatalf("aes_key %q decodes to neither form", s)
	}
	return k
}

func TestInboundMediaDecryptsInEveryKeyEncoding(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	cases := []struct {
		kind, enc, field string
		full             bool
	}{
		{KindImage, KeyRawBase64, "image_item", false},
		{KindImage, KeyHexBase64, "image_item", true},
		{KindImage, KeyImageHex, "image_item", false},
		{KindImage, KeyNone, "image_item", false},
		{KindFile, "", "file_item", true},
		{KindVoice, "", "voice_item", false},
		{KindVideo, KeyRawBase64, "video_item", false},
	}
	for _, c := range cases {
		plain := []byte("content of " + c.kind + "/" + c.enc)
		in := e.inject(b.BotID, InjectRequest{Kind: c.kind, KeyEncoding: c.enc, Data: plain, FullURL: c.full, Text: "transcript", FileName: "r.pdf"})
		m := msgs(e.poll(b.Token, ""))[0]
		item := m["item_list"].([]any)[0].(map[string]any)
		payload := item[c.field].(map[string]any)
		media := payload["media"].(map[string]any)
		path := "/c2c/download?encrypted_query_param=" + url.QueryEscape(media["encrypt_query_param"].(string))
		if c.full {
			full, _ := media["full_url"].(string)
			if !strings.HasPrefix(full, e.srv.URL+"/c2c/download?") || !strings.Contains(full, "taskid=") {
				t.Fatalf("%s/%s full_url %q", c.kind, c.enc, full)
			}
			path = strings.TrimPrefix(full, e.srv.URL)
		}
		status, _, body, err := e.raw(e.ctx, http.MethodGet, path, "", nil)
		if err != nil || status != http.StatusOK {
			t.Fatalf("%s/%s download: %d %v", c.kind, c.enc, status, err)
		}
		got := body
		if key := decodeInboundKey(t, item, media); key != nil {
			if got, err = decryptECB(key, body); err != nil {
				t.Fatalf("%s/%s: %v", c.kind, c.enc, err)
			}
		} else if c.enc != KeyNone {
			t.Fatalf("%s/%s: no key", c.kind, c.enc)
		}
		if !bytes.Equal(got, plain) {
			t.Fatalf("%s/%s: plaintext differs", c.kind, c.enc)
		}
		if in.Media == nil || in.Media.EncryptQueryParam != media["encrypt_query_param"] {
			t.Fatalf("%s/%s: inject result %+v", c.kind, c.enc, in.Media)
		}
		switch c.kind {
		case KindFile:
			if payload["len"] != strconv.Itoa(len(plain)) || payload["file_name"] != "r.pdf" {
				t.Fatalf("file item: %v", payload)
			}
		case KindVoice:
			if payload["text"] != "transcript" {
				t.Fatalf("voice item: %v", payload)
			}
		}
	}
	// A non-image key encoding for the image-only forms is refused.
	if _, err := e.ctl.Inject(e.ctx, b.BotID, InjectRequest{Kind: KindFile, KeyEncoding: KeyImageHex}); err == nil {
		t.Fatal("aeskey-hex on a file accepted")
	}
}

func TestAnExpiredCDNObjectAnswers404(t *testing.T) {
	e := newEnv(t, nil)
	b := e.bot()
	dl, _ := e.upload(b, []byte("soon gone"), 3)
	if status, _, _ := e.download(dl); status != http.StatusOK {
		t.Fatalf("download before expiry: %d", status)
	}
	if err := e.ctl.ExpireCDNObject(e.ctx, dl); err != nil {
		t.Fatal(err)
	}
	if status, _, _ := e.download(dl); status != http.StatusNotFound {
		t.Fatalf("download after expiry: %d, want 404", status)
	}
	if err := e.ctl.ExpireCDNObject(e.ctx, dl); err == nil {
		t.Fatal("expiring an unknown object succeeded")
	}
}
