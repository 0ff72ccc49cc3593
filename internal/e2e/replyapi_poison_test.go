package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/replyapi"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// updateEvents counts the Update events in a workflow's history: an Update the API sent
// and the window took leaves them (one refused by the validator leaves none, but the API
// must not send one for a body it refuses).
func (a *apiSystem) updateEvents(workflowID string) int {
	a.t.Helper()
	it := a.tc.GetWorkflowHistory(a.ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			a.t.Fatal(err)
		}
		if strings.Contains(e.GetEventType().String(), "UPDATE") {
			n++
		}
	}
	return n
}

// rawFileReply is a multipart file reply whose file_name field is written as given
// (control bytes included, as a client may send them).
func rawFileReply(fileName string, data []byte) (string, []byte) {
	const b = "p0ison"
	body := "--" + b + "\r\nContent-Disposition: form-data; name=\"type\"\r\n\r\nfile\r\n" +
		"--" + b + "\r\nContent-Disposition: form-data; name=\"file_name\"\r\n\r\n" + fileName + "\r\n" +
		"--" + b + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.txt\"\r\n" +
		"Content-Type: application/octet-stream\r\n\r\n" + string(data) + "\r\n--" + b + "--\r\n"
	return "multipart/form-data; boundary=" + b, []byte(body)
}

// Poison input never stalls a window or loses a reply: a text with U+0000, a JSON body
// naming a member twice and a file name with U+0000 each get their typed 400, on the
// first request and on every repeat of its idempotency key, with nothing written (no
// attempt, no staged media), nothing sent and no Update sent to the window; the window
// then sends the next reply. A file name with a path is sent without it, and an inbound
// file's name reaches the attachment's Content-Disposition made safe.
func TestPoisonRepliesGetTypedRefusalsThatWriteAndSendNothing(t *testing.T) {
	t.Parallel()
	a := startAPI(t, store.DefaultLimits(), nil)
	const owner = "o9cq8poisonowner0000000001@im.wechat"
	acct := a.enroll("qo_e2e_poison", owner)
	bot := a.botOf(owner)
	if _, err := a.ctl.InjectText(a.ctx, bot.BotID, "", "send me something odd"); err != nil {
		t.Fatal(err)
	}
	w, _ := a.openWindow(acct.AccountKey, 0)
	tok := a.tokenOf(w.ReplyWindowID)
	wf := a.windowWF(w.ReplyWindowID)
	auth := []string{"Authorization", "Bearer " + tok}
	updates := a.updateEvents(wf)

	nulName, nulNameBody := rawFileReply("report\x00.txt", []byte("the report"))
	for _, c := range []struct {
		name, ctype, key, code string
		body                   []byte
	}{
		{"a text with U+0000", "application/json", "poison-nul", replyapi.CodeInvalidText, []byte(`{"type":"text","text":"before\u0000after"}`)},
		{"a JSON body naming text twice", "application/json", "poison-dup", replyapi.CodeInvalidJSON, []byte(`{"type":"text","text":"a","text":"b"}`)},
		{"a file name with U+0000", nulName, "poison-name", replyapi.CodeInvalidFileName, nulNameBody},
	} {
		for try := 1; try <= 2; try++ {
			got := a.refused(fmt.Sprintf("%s (request %d)", c.name, try), http.StatusBadRequest, c.code, bot.BotID, func() answer {
				return a.do(http.MethodPost, "/v1/reply", c.body, append([]string{"Content-Type", c.ctype, "Idempotency-Key", c.key}, auth...)...)
			})
			if c.code == replyapi.CodeInvalidFileName && !strings.Contains(string(got.body), "file_name") {
				t.Fatalf("%s: the refusal does not name the field: %s", c.name, got.body)
			}
		}
	}
	a.refused("a reason with U+0000", http.StatusBadRequest, replyapi.CodeInvalidReason, bot.BotID, func() answer {
		return a.do(http.MethodPost, "/v1/done", []byte(`{"status":"failed","reason":"x\u0000"}`), auth...)
	})
	if n := a.updateEvents(wf); n != updates {
		t.Fatalf("the refused requests reached the window: %d Update events, were %d", n, updates)
	}

	// The window is not stalled: the next reply is sent, and a file name with a path is
	// sent as its last element.
	if got := a.reply(tok, "a plain answer", "poison-after"); got.status != http.StatusOK {
		t.Fatalf("reply after the poison: %d %s", got.status, got.body)
	}
	ct, body := rawFileReply("../../etc/passwd.txt", []byte("not the passwd file"))
	if got := a.do(http.MethodPost, "/v1/reply", body, append([]string{"Content-Type", ct}, auth...)...); got.status != http.StatusOK {
		t.Fatalf("a file with a path in its name: %d %s", got.status, got.body)
	}
	sent, err := a.ctl.Sent(a.ctx, bot.BotID)
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		ItemList []sentItem `json:"item_list"`
	}
	if last := sent[len(sent)-1]; json.Unmarshal(last.Msg, &msg) != nil || len(msg.ItemList) != 1 || msg.ItemList[0].FileItem == nil ||
		msg.ItemList[0].FileItem.FileName != "passwd.txt" {
		t.Fatalf("the file was sent as %s, want the name passwd.txt", last.Msg)
	}

	// An inbound file whose name is a path with markup: its fetch names it safely.
	const inboundName = "../../etc/<script>alert(1)</script>报告.pdf"
	data := []byte("%PDF-1.4 a file whose name is hostile")
	if _, err := a.ctl.Inject(a.ctx, bot.BotID, ilinksim.InjectRequest{Kind: "file", Data: data, FileName: inboundName}); err != nil {
		t.Fatal(err)
	}
	w2, _ := a.openWindow(acct.AccountKey, w.ReplyWindowID)
	tok2 := a.tokenOf(w2.ReplyWindowID)
	var got answer
	a.eventually("the inbound file fetched", time.Minute, func() (bool, error) {
		got = a.do(http.MethodGet, "/v1/messages/"+w2.SourceMessageKey+"/attachments/0", nil, "Authorization", "Bearer "+tok2)
		return got.status == http.StatusOK, nil
	})
	if !bytes.Equal(got.body, data) {
		t.Fatalf("fetched %d bytes, want the %d injected", len(got.body), len(data))
	}
	cd := got.header.Get("Content-Disposition")
	typ, params, err := mime.ParseMediaType(cd)
	want := vocab.SafeFileName(inboundName)
	if err != nil || typ != "attachment" || params["filename"] != want || strings.ContainsAny(cd, "/<>\\") {
		t.Fatalf("Content-Disposition %q (%v %v), want an attachment named %q without path or markup", cd, params, err, want)
	}
	if !strings.Contains(cd, `filename="`) || !strings.Contains(cd, `filename*=UTF-8''`) {
		t.Fatalf("Content-Disposition %q lacks the ASCII fallback or the UTF-8 name", cd)
	}
}
