package ilink

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

const testLimit = 1 << 16

func TestEnvelopeClassification(t *testing.T) {
	cases := []struct {
		body string
		code Code
	}{
		{`{}`, ""},
		{`{"ret":0}`, ""},
		{`{"ret":0,"errcode":0,"errmsg":""}`, ""},
		{`{"unknown":{"nested":[1,2]},"ret":0}`, ""},
		{`{"errcode":-14,"errmsg":"session timeout"}`, CodeStaleToken},
		{`{"ret":0,"errcode":-14}`, CodeStaleToken},
		{`{"ret":-14}`, CodeStaleToken},
		{`{"ret":-2,"errmsg":"prepare failed"}`, CodeRejected},
		{`{"ret":-2}`, CodeRejected},
		{`{"ret":-2,"errcode":0,"errmsg":"ilink_user_id required"}`, CodeRejected},
		{`{"ret":1}`, CodeAPI},
		{`{"errcode":-12}`, CodeAPI},
	}
	for _, tc := range cases {
		err := parsePlain("op", strings.NewReader(tc.body), testLimit)
		if CodeOf(err) != tc.code {
			t.Errorf("%s: got %v, want %q", tc.body, err, tc.code)
		}
	}
}

func TestRejectedKeepsItsErrmsg(t *testing.T) {
	err := parsePlain(opSendMessage, strings.NewReader(`{"ret":-2,"errmsg":"prepare failed"}`), testLimit)
	var e *Error
	if !errors.As(err, &e) || e.Ret != -2 || e.Errmsg != "prepare failed" || !errors.Is(err, ErrRejected) || !IsRejected(err) {
		t.Fatalf("got %#v", err)
	}
	if IsRetryable(err) || IsTransient(err) || MayHaveTakenEffect(err) {
		t.Fatal("a rejection is neither retryable nor uncertain")
	}
	if !strings.Contains(err.Error(), `errmsg="prepare failed"`) || !strings.Contains(err.Error(), "sendmessage") {
		t.Fatalf("text %q", err.Error())
	}
}

func TestStaleTokenMatchesSentinel(t *testing.T) {
	err := parsePlain(opGetUpdates, strings.NewReader(`{"errcode":-14,"errmsg":"session timeout"}`), testLimit)
	if !errors.Is(err, ErrStaleToken) || !IsStaleToken(err) || errors.Is(err, ErrRejected) {
		t.Fatalf("got %v", err)
	}
}

func TestUpdatesKeepTheCursorWhenTheServerSendsNone(t *testing.T) {
	page, err := parseUpdates(strings.NewReader(`{"ret":0,"msgs":[]}`), testLimit, "old")
	if err != nil || page.Cursor != "old" || page.PollTimeout != 0 {
		t.Fatalf("%+v %v", page, err)
	}
	page, err = parseUpdates(strings.NewReader(`{}`), testLimit, "")
	if err != nil || page.Cursor != "" || page.Messages != nil {
		t.Fatalf("%+v %v", page, err)
	}
}

func TestUpdatesDecodeTheFullMessageModel(t *testing.T) {
	body := `{"ret":0,"get_updates_buf":"Ck2","longpolling_timeout_ms":35000,"sync_buf":"x","msgs":[{
	  "seq":7,"message_id":18446744073709551615,"from_user_id":"o9cq8@im.wechat","to_user_id":"b@im.bot",
	  "client_id":"c","create_time_ms":1700000000000,"session_id":"s","message_type":1,"message_state":2,
	  "context_token":"CKtok","new_field":true,
	  "item_list":[
	    {"type":1,"msg_id":"18446744073709551614","text_item":{"text":"hi"},
	     "ref_msg":{"title":"t","svr_id":"18446744073709551615","partial_text":{"start":"a","end":"b","startindex":1,"endindex":2,"quotemd5":"m"}}},
	    {"type":2,"image_item":{"aeskey":"00112233445566778899aabbccddeeff","media":{"encrypt_query_param":"e","aes_key":"k","encrypt_type":1,"full_url":"https://cdn/x"},"mid_size":32}},
	    {"type":3,"voice_item":{"encode_type":4,"sample_rate":16000,"playtime":1200,"text":"transcript","size":9}},
	    {"type":4,"file_item":{"file_name":"a.pdf","len":"1234","md5":"abc"}},
	    {"type":5,"video_item":{"video_size":99,"play_length":3}}
	  ]}]}`
	page, err := parseUpdates(strings.NewReader(body), testLimit, "Ck1")
	if err != nil {
		t.Fatal(err)
	}
	if page.Cursor != "Ck2" || page.PollTimeout != 35*time.Second || len(page.Messages) != 1 {
		t.Fatalf("%+v", page)
	}
	m := page.Messages[0]
	if m.MessageID != ID(^uint64(0)) || m.Seq != 7 || m.ContextToken.Reveal() != "CKtok" || m.MessageType != MessageTypeUser {
		t.Fatalf("%+v", m)
	}
	it := m.ItemList
	if it[0].MsgID != StringID(^uint64(0)-1) || it[0].RefMsg.SvrID != StringID(^uint64(0)) || it[0].RefMsg.PartialText.QuoteMD5 != "m" {
		t.Fatalf("text item %+v", it[0])
	}
	if it[1].ImageItem.Media.FullURL != "https://cdn/x" || it[1].ImageItem.AESKey.Reveal() != "00112233445566778899aabbccddeeff" {
		t.Fatalf("image item %+v", it[1].ImageItem)
	}
	if it[2].VoiceItem.Text != "transcript" || it[3].FileItem.Len != "1234" || it[4].VideoItem.VideoSize != 99 {
		t.Fatalf("items %+v %+v %+v", it[2].VoiceItem, it[3].FileItem, it[4].VideoItem)
	}
}

func TestSendMessageSuccessShapes(t *testing.T) {
	for body, want := range map[string]ID{`{}`: 0, `{"ret":0}`: 0, `{"ret":0,"message_id":123}`: 123, `{"message_id":"18446744073709551615"}`: ID(^uint64(0))} {
		id, err := parseSend(strings.NewReader(body), testLimit)
		if err != nil || id != want {
			t.Errorf("%s: %d %v", body, id, err)
		}
	}
}

func TestUploadURLNeedsAtLeastOneReference(t *testing.T) {
	if _, err := parseUploadURL(strings.NewReader(`{"ret":0}`), testLimit); CodeOf(err) != CodeMalformedBody {
		t.Fatalf("got %v", err)
	}
	u, err := parseUploadURL(strings.NewReader(`{"upload_full_url":"https://cdn/up","upload_param":"p"}`), testLimit)
	if err != nil || u.UploadFullURL != "https://cdn/up" || u.UploadParam != "p" {
		t.Fatalf("%+v %v", u, err)
	}
}

func TestQRStatusExposesEveryReturnedField(t *testing.T) {
	st, err := parseQRStatus(strings.NewReader(`{"status":"confirmed","bot_token":"b:t","ilink_bot_id":"b0f5860fdecb@im.bot","baseurl":"https://x","ilink_user_id":"o9@im.wechat"}`), testLimit)
	if err != nil || st.Status != QRConfirmed || st.BotToken.Reveal() != "b:t" || st.ILinkBotID != "b0f5860fdecb@im.bot" ||
		st.BaseURL != "https://x" || st.ILinkUserID != "o9@im.wechat" {
		t.Fatalf("%+v %v", st, err)
	}
	st, err = parseQRStatus(strings.NewReader(`{"status":"scaned_but_redirect","redirect_host":"idc2.example"}`), testLimit)
	if err != nil || st.RedirectHost != "idc2.example" {
		t.Fatalf("%+v %v", st, err)
	}
}

func TestQRStatusConfirmedWithoutBotIDIsAFailedLogin(t *testing.T) {
	for _, body := range []string{`{"status":"confirmed","bot_token":"t"}`, `{"status":"confirmed","ilink_bot_id":"b"}`, `{}`} {
		if _, err := parseQRStatus(strings.NewReader(body), testLimit); CodeOf(err) != CodeMalformedBody {
			t.Errorf("%s: %v", body, err)
		}
	}
}

func TestUploadResponseNeedsEncryptedParamHeader(t *testing.T) {
	if _, err := parseUploadResponse(http.Header{}); CodeOf(err) != CodeMalformedBody {
		t.Fatalf("got %v", err)
	}
	h := http.Header{}
	h.Set("x-encrypted-param", "dl")
	if p, err := parseUploadResponse(h); err != nil || p != "dl" {
		t.Fatalf("%q %v", p, err)
	}
}

func TestParsersRespectTheBodyCap(t *testing.T) {
	big := `{"ret":0,"x":"` + strings.Repeat("a", 200) + `"}`
	if _, err := parseUpdates(strings.NewReader(big), 100, ""); CodeOf(err) != CodeBodyTooLarge {
		t.Fatalf("got %v", err)
	}
	if _, err := parseUpdates(strings.NewReader(big), int64(len(big)), ""); err != nil {
		t.Fatalf("exactly at the cap: %v", err)
	}
}

func TestJSONErrorsDoNotEchoValues(t *testing.T) {
	err := parsePlain("op", strings.NewReader(`{"ret":"CKsecret"}`), testLimit)
	if CodeOf(err) != CodeMalformedBody || strings.Contains(err.Error(), "CKsecret") {
		t.Fatalf("got %v", err)
	}
}
