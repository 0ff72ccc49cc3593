package replyapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ilinkflow/ilinkflow/internal/jsontext"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// The fuzz targets run the request parsing of the reply API on any input: it never
// panics, refuses with a typed 4xx, and what it accepts keeps the rules (vocab.CheckText
// for text, strict JSON, vocab.CheckFileName and SafeFileName for file names). Their seed
// corpora run with the normal tests; CI fuzzes each for a few seconds:
//
//	go test -run '^$' -fuzz FuzzReplyJSON -fuzztime 5s ./replyapi/

// badRequest reports whether a refusal is one the parsing may make: a 4xx with a message.
func badRequest(e *apiError) bool {
	s := StatusOf(e.code)
	return e.msg != "" && s >= 400 && s < 500
}

func FuzzReplyJSON(f *testing.F) {
	for _, s := range []string{
		`{"type":"text","text":"hello"}`,
		`{"type":"text","text":"a\u0000b"}`,
		`{"type":"text","text":"a","text":"b"}`,
		`{"type":"text","TEXT":"b","text":"a"}`,
		`{"type":"text","text":"\ud83d\ude00"}`,
		`{"type":"text","text":"\ud800"}`,
		`{"type":"text","text":"   "}`,
		`{"type":"image","media":{}}`,
		`{"type":"text","text":"a","media":{"k":1,"k":2}}`,
		`{"status":"failed","reason":"a\u0000"}`,
		`{"status":"handled","status":"failed"}`,
		`{"status":"typing"}`,
		"{\"type\":\"text\",\"text\":\"\xff\"}",
		`[]`, `{`, ``, `null`, `{"type":"text","text":"a"} {}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := parseReply(body, DefaultMaxTextBytes)
		if e != nil {
			if !badRequest(e) {
				t.Fatalf("reply %q: refusal %+v is not a typed 4xx", body, e)
			}
		} else {
			if req.Type != "text" || vocab.CheckText(req.Text, DefaultMaxTextBytes) != vocab.TextOK || len(req.Media) != 0 {
				t.Fatalf("reply %q accepted as %+v", body, req)
			}
			if !jsontext.Valid(body) {
				t.Fatalf("reply %q accepted though not valid text", body)
			}
			if name, dup := jsontext.DuplicateKey(body); dup {
				t.Fatalf("reply %q accepted with the member %q twice", body, name)
			}
		}
		if d, e := parseDone(body); e != nil {
			if !badRequest(e) {
				t.Fatalf("done %q: refusal %+v is not a typed 4xx", body, e)
			}
		} else if (d.Status != vocab.MessageHandled && d.Status != vocab.MessageFailed) || len(d.Reason) > vocab.MaxReasonBytes ||
			!utf8.ValidString(d.Reason) || strings.IndexByte(d.Reason, 0) >= 0 {
			t.Fatalf("done %q accepted as %+v", body, d)
		}
		if ty, e := parseTyping(body); e != nil {
			if !badRequest(e) {
				t.Fatalf("typing %q: refusal %+v is not a typed 4xx", body, e)
			}
		} else if ty.Status != "typing" && ty.Status != "cancel" {
			t.Fatalf("typing %q accepted as %+v", body, ty)
		}
	})
}

// FuzzReplyText checks the text path: a text reply is accepted exactly when its text
// passes vocab.CheckText, and the text sent is the text written. The text limit is
// small here, so that short inputs reach it.
func FuzzReplyText(f *testing.F) {
	const maxText = 64
	for _, s := range []string{"hello", "a\x00b", "\x00", "", " \n\t", "smile 😀", "\xff\xfe", strings.Repeat("é", maxText/2+1), "\u2028\u2029"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		body, err := json.Marshal(ReplyRequest{Type: "text", Text: text})
		if err != nil {
			t.Skip()
		}
		var written ReplyRequest // json.Marshal writes invalid UTF-8 as U+FFFD
		if err := json.Unmarshal(body, &written); err != nil {
			t.Fatal(err)
		}
		sent := written.Text
		req, e := parseReply(body, maxText)
		fault := vocab.CheckText(sent, maxText)
		switch {
		case fault == vocab.TextOK && e != nil:
			t.Fatalf("text %q refused: %+v", text, e)
		case fault != vocab.TextOK && e == nil:
			t.Fatalf("text %q (%s) accepted", text, fault)
		case e == nil && req.Text != sent:
			t.Fatalf("text %q sent as %q", sent, req.Text)
		case e != nil && e.code != CodeInvalidText && e.code != CodeTextTooLong:
			t.Fatalf("text %q refused as %s", text, e.code)
		}
	})
}

const fuzzBoundary = "b0undary"

// multipartBody is a multipart body of the given parts (name, filename, content).
func multipartBody(parts ...[3]string) []byte {
	var b bytes.Buffer
	for _, p := range parts {
		b.WriteString("--" + fuzzBoundary + "\r\nContent-Disposition: form-data; name=\"" + p[0] + "\"")
		if p[1] != "" {
			b.WriteString("; filename=\"" + p[1] + "\"")
		}
		b.WriteString("\r\n\r\n" + p[2] + "\r\n")
	}
	b.WriteString("--" + fuzzBoundary + "--\r\n")
	return b.Bytes()
}

func FuzzReplyMultipart(f *testing.F) {
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
	for _, body := range [][]byte{
		multipartBody([3]string{"type", "", "image"}, [3]string{"file", "a.png", png}),
		multipartBody([3]string{"type", "", "file"}, [3]string{"file_name", "", "../../etc/passwd"}, [3]string{"file", "x.txt", "data"}),
		multipartBody([3]string{"type", "", "file"}, [3]string{"file_name", "", "a\x00b.txt"}, [3]string{"file", "x.txt", "data"}),
		multipartBody([3]string{"type", "", "file"}, [3]string{"file", "..\\..\\evil<script>.pdf", "data"}),
		multipartBody([3]string{"type", "", "file"}, [3]string{"type", "", "image"}, [3]string{"file", "x.txt", "data"}),
		multipartBody([3]string{"type", "", "video"}, [3]string{"file", "v.mp4", "\x00\x00\x00\x18ftypmp42"}),
		multipartBody([3]string{"type", "", "file"}, [3]string{"file", "", "data"}),
		multipartBody([3]string{"type", "", "file"}, [3]string{"file", "big.bin", strings.Repeat("x", 5000)}),
		multipartBody([3]string{"other", "", "x"}),
		[]byte("--" + fuzzBoundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename*=UTF-8''a%00b\r\n\r\nx\r\n--" + fuzzBoundary + "--\r\n"),
		[]byte("not multipart at all"),
	} {
		f.Add(body)
	}
	const limit = 4096
	f.Fuzz(func(t *testing.T, body []byte) {
		m, e := parseMediaReply(http.MaxBytesReader(nil, io.NopCloser(bytes.NewReader(body)), limit+multipartOverhead), fuzzBoundary, limit, int64(len(body)))
		if e != nil {
			if !badRequest(e) {
				t.Fatalf("%q: refusal %+v is not a typed 4xx", body, e)
			}
			return
		}
		sum := sha256.Sum256(m.data)
		switch {
		case m.kind != "image" && m.kind != "file" && m.kind != "video":
			t.Fatalf("%q accepted as kind %q", body, m.kind)
		case len(m.data) == 0 || len(m.data) > limit || m.sha256 != hex.EncodeToString(sum[:]):
			t.Fatalf("%q accepted with %d bytes (sum %s)", body, len(m.data), m.sha256)
		case m.kind != "file" && m.fileName != "":
			t.Fatalf("%q: a %s keeps the name %q", body, m.kind, m.fileName)
		case m.kind == "file" && (m.fileName == "" || vocab.CheckFileName(m.fileName) != vocab.TextOK ||
			strings.ContainsAny(m.fileName, `/\`) || len(m.fileName) > vocab.MaxFileNameBytes):
			t.Fatalf("%q: file name %q is not a safe name", body, m.fileName)
		}
	})
}

// An attachment's Content-Disposition carries the safe name: an ASCII fallback and the
// name as percent-encoded UTF-8, which a MIME parser reads back as the safe name.
func TestAnAttachmentsContentDispositionCarriesTheSafeNameEncoded(t *testing.T) {
	for name, want := range map[string]string{
		"report.pdf": `attachment; filename="report.pdf"; filename*=UTF-8''report.pdf`,
		"报告.pdf":     `attachment; filename="__.pdf"; filename*=UTF-8''%E6%8A%A5%E5%91%8A.pdf`,
		"../../etc/<script>alert(1)</script>.pdf": `attachment; filename="script_.pdf"; filename*=UTF-8''script_.pdf`,
		"a b;c=d'e%f.txt":                         `attachment; filename="a b;c=d'e%f.txt"; filename*=UTF-8''a%20b%3Bc%3Dd%27e%25f.txt`,
		"..\\..\\win\"dows\r\n.txt":               `attachment; filename="win_dows.txt"; filename*=UTF-8''win_dows.txt`,
	} {
		safe := vocab.SafeFileName(name)
		got := contentDisposition(safe)
		if got != want {
			t.Errorf("%q: %s, want %s", name, got, want)
		}
		typ, params, err := mime.ParseMediaType(got)
		if err != nil || typ != "attachment" || params["filename"] != safe {
			t.Errorf("%q: %s parses as %q %v (%v), want the name %q", name, got, typ, params, err, safe)
		}
	}
}
