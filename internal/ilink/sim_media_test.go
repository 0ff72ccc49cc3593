package ilink_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
)

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSimUploadedImageAndFileDownloadByteIdentical uploads an image and a
// file through the client, sends them, then downloads them from the
// simulator's CDN using what was sent and decrypts them.
func TestSimUploadedImageAndFileDownloadByteIdentical(t *testing.T) {
	for _, style := range []string{ilinksim.UploadFull, ilinksim.UploadParam, ilinksim.UploadBoth} {
		e := newSim(t, func(c *ilinksim.Config) { c.UploadURLStyle = style; c.CDNStrict = true }, nil)
		m := e.converse("send me things")
		cases := []struct {
			kind ilink.MediaType
			data []byte
		}{
			{ilink.MediaImage, randomBytes(t, 70000)},
			{ilink.MediaFile, randomBytes(t, 4096)}, // block-aligned
		}
		for i, tc := range cases {
			up, err := e.client.UploadMedia(e.ctx, ilink.UploadRequest{ToUserID: m.FromUserID, MediaType: tc.kind, Data: tc.data})
			if err != nil {
				t.Fatalf("%s: upload %d: %v", style, i, err)
			}
			item := up.ImageItem()
			if tc.kind == ilink.MediaFile {
				item = up.FileItem("data.bin")
			}
			e.advance(pace)
			if _, err := e.client.SendItem(e.ctx, replyOpts(m), item); err != nil {
				t.Fatalf("%s: send %d: %v", style, i, err)
			}
			// The CDN keeps the ciphertext; it decrypts to the original.
			obj, err := e.ctl.CDNObject(e.ctx, up.EncryptQueryParam)
			if err != nil {
				t.Fatal(err)
			}
			if obj.Source != "upload" || int64(len(obj.Ciphertext)) != up.CipherSize || !bytes.Equal(obj.Plaintext, tc.data) {
				t.Fatalf("%s: CDN object %d: %d bytes, plaintext equal %v", style, i, len(obj.Ciphertext), bytes.Equal(obj.Plaintext, tc.data))
			}
			// Download through the client with exactly the sent reference.
			media := item.ImageItem
			var ref *ilink.CDNMedia
			if media != nil {
				ref = media.Media
			} else {
				ref = item.FileItem.Media
			}
			key, err := ilink.DecodeAESKey(ref.AESKey)
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.client.DownloadMedia(e.ctx, ref, key)
			if err != nil || !bytes.Equal(got, tc.data) {
				t.Fatalf("%s: download %d: equal=%v %v", style, i, bytes.Equal(got, tc.data), err)
			}
		}
		// The upload went to the right place.
		for _, r := range e.requests("c2c/upload") {
			q, _ := url.ParseQuery(r.RawQuery)
			if q.Get("encrypted_query_param") == "" || len(q.Get("filekey")) != 32 {
				t.Errorf("%s: upload query %s", style, r.RawQuery)
			}
		}
		s := e.sent()
		if len(s) != 2 || s[0].Outcome != ilinksim.OutcomeAccepted || s[1].Outcome != ilinksim.OutcomeAccepted {
			t.Fatalf("%s: %d sends", style, len(s))
		}
	}
}

// TestSimInboundImageDecryptsInEveryKeyEncoding injects images with
// media.aes_key as base64 of raw bytes, as base64 of hex, with
// image_item.aeskey only, and with no key, each with and without full_url.
func TestSimInboundImageDecryptsInEveryKeyEncoding(t *testing.T) {
	e := newSim(t, nil, nil)
	for _, enc := range []string{ilinksim.KeyRawBase64, ilinksim.KeyHexBase64, ilinksim.KeyImageHex, ilinksim.KeyNone} {
		for _, full := range []bool{false, true} {
			data := randomBytes(t, 1234)
			in := e.inject(ilinksim.InjectRequest{Kind: ilinksim.KindImage, Data: data, KeyEncoding: enc, FullURL: full})
			page := e.poll("")
			if len(page.Messages) != 1 {
				t.Fatalf("%s: %d messages", enc, len(page.Messages))
			}
			it := page.Messages[0].ItemList[0]
			if it.Type != ilink.ItemImage || it.ImageItem == nil || it.ImageItem.Media == nil {
				t.Fatalf("%s: item %+v", enc, it)
			}
			if (it.ImageItem.Media.FullURL != "") != full {
				t.Fatalf("%s: full_url %q", enc, it.ImageItem.Media.FullURL)
			}
			_, key, err := ilink.ItemMedia(&it)
			if err != nil {
				t.Fatalf("%s: %v", enc, err)
			}
			if enc == ilinksim.KeyNone && key != nil || enc != ilinksim.KeyNone && hex.EncodeToString(key) != in.Media.AESKeyHex {
				t.Fatalf("%s: key %x, want %s", enc, key, in.Media.AESKeyHex)
			}
			got, err := e.client.DownloadItem(e.ctx, &it)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%s full=%v: equal=%v %v", enc, full, bytes.Equal(got, data), err)
			}
		}
	}
	// full_url was preferred whenever present.
	n := 0
	for _, r := range e.requests("c2c/download") {
		if strings.Contains(r.RawQuery, "taskid=") {
			n++
		}
	}
	if n != 4 {
		t.Fatalf("%d downloads through full_url, want 4", n)
	}
}

// TestSimInboundFileVoiceAndVideoDecrypt downloads the other media kinds.
func TestSimInboundFileVoiceAndVideoDecrypt(t *testing.T) {
	e := newSim(t, nil, nil)
	for _, kind := range []string{ilinksim.KindFile, ilinksim.KindVoice, ilinksim.KindVideo} {
		for _, enc := range []string{ilinksim.KeyHexBase64, ilinksim.KeyRawBase64} {
			data := randomBytes(t, 777)
			e.inject(ilinksim.InjectRequest{Kind: kind, Data: data, KeyEncoding: enc, Text: "transcript", FileName: "a.pdf"})
			it := e.poll("").Messages[0].ItemList[0]
			got, err := e.client.DownloadItem(e.ctx, &it)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%s/%s: equal=%v %v", kind, enc, bytes.Equal(got, data), err)
			}
			switch kind {
			case ilinksim.KindFile:
				if n, err := it.FileItem.Len.Int64(); err != nil || n != 777 || it.FileItem.FileName != "a.pdf" {
					t.Fatalf("file item %+v", it.FileItem)
				}
			case ilinksim.KindVoice:
				if it.VoiceItem.Text != "transcript" {
					t.Fatalf("voice item %+v", it.VoiceItem)
				}
			}
		}
	}
}

// TestSimCDNUpload5xxIsRetriedUpToThreeAttempts arms upload faults.
func TestSimCDNUpload5xxIsRetriedUpToThreeAttempts(t *testing.T) {
	e := newSim(t, nil, nil)
	m := e.converse("hi")
	e.fault(ilinksim.Fault{Endpoint: "c2c/upload", Kind: ilinksim.FaultStatus, Status: 500, Count: 2})
	if _, err := e.client.UploadMedia(e.ctx, ilink.UploadRequest{ToUserID: m.FromUserID, MediaType: ilink.MediaImage, Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if n := len(e.requests("c2c/upload")); n != 3 {
		t.Fatalf("%d upload attempts, want 3", n)
	}
	e.fault(ilinksim.Fault{Endpoint: "c2c/upload", Kind: ilinksim.FaultStatus, Status: 503, Count: 3})
	_, err := e.client.UploadMedia(e.ctx, ilink.UploadRequest{ToUserID: m.FromUserID, MediaType: ilink.MediaImage, Data: []byte("x")})
	if ilink.CodeOf(err) != ilink.CodeHTTPStatus || len(e.requests("c2c/upload")) != 6 {
		t.Fatalf("got %v after %d attempts", err, len(e.requests("c2c/upload")))
	}
	e.fault(ilinksim.Fault{Endpoint: "c2c/upload", Kind: ilinksim.FaultDrop})
	if _, err := e.client.UploadMedia(e.ctx, ilink.UploadRequest{ToUserID: m.FromUserID, MediaType: ilink.MediaImage, Data: []byte("x")}); err != nil {
		t.Fatalf("a dropped upload is retried: %v", err)
	}
}

// TestSimCDNUpload4xxIsPermanentWithItsErrorMessage uploads with a wrong
// file key, which the simulated CDN refuses with 400 and x-error-message.
func TestSimCDNUpload4xxIsPermanentWithItsErrorMessage(t *testing.T) {
	e := newSim(t, func(c *ilinksim.Config) { c.UploadURLStyle = ilinksim.UploadParam }, nil)
	m := e.converse("hi")
	key, _ := ilink.NewMediaKey()
	data := []byte("payload")
	u, err := e.client.GetUploadURL(e.ctx, ilink.UploadURLRequest{
		FileKey: strings.Repeat("ab", 16), MediaType: ilink.MediaFile, ToUserID: m.FromUserID,
		RawSize: int64(len(data)), FileSize: ilink.PaddedSize(int64(len(data))), AESKey: ilink.HexKey(key),
	})
	if err != nil {
		t.Fatal(err)
	}
	ct, _ := ilink.EncryptECB(key, data)
	_, err = e.client.UploadToCDN(e.ctx, u, strings.Repeat("cd", 16), ct)
	var ie *ilink.Error
	if !asIlinkError(err, &ie) || ie.Code != ilink.CodeHTTPStatus || ie.Status != 400 || ie.Errmsg != "filekey mismatch" || ilink.IsRetryable(err) {
		t.Fatalf("got %v", err)
	}
	if n := len(e.requests("c2c/upload")); n != 1 {
		t.Fatalf("4xx retried: %d attempts", n)
	}
}

// TestSimVideoUploadAndSendIsAccepted covers the video path end to end.
func TestSimVideoUploadAndSendIsAccepted(t *testing.T) {
	e := newSim(t, nil, nil)
	m := e.converse("a video please")
	data := randomBytes(t, 5000)
	up, err := e.client.UploadMedia(e.ctx, ilink.UploadRequest{ToUserID: m.FromUserID, MediaType: ilink.MediaVideo, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	e.advance(time.Second)
	if _, err := e.client.SendVideo(e.ctx, replyOpts(m), up); err != nil {
		t.Fatal(err)
	}
	s := e.sent()
	if len(s) != 1 || s[0].ItemTypes[0] != 5 || !s[0].Rendered {
		t.Fatalf("%+v", s)
	}
	got, err := e.client.DownloadMedia(e.ctx, up.CDNMedia(), mustHexKey(t, up.AESKey))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("download: %v", err)
	}
}

func mustHexKey(t *testing.T, s ilink.Secret) []byte {
	t.Helper()
	k, err := ilink.DecodeHexKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
