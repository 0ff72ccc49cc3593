package payloadcodec_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/ilinkflow/ilinkflow/payloadcodec"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

var (
	key1 = []byte("payload-codec-test-key-1-0123456")
	key2 = []byte("payload-codec-test-key-2-0123456")
)

func ring(t *testing.T, current int32, keys map[int32][]byte) *sealing.Keyring {
	t.Helper()
	cp := map[int32][]byte{}
	for g, k := range keys {
		cp[g] = bytes.Clone(k)
	}
	k, err := sealing.NewKeyring(current, cp)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func codec(t *testing.T, current int32, keys map[int32][]byte) *payloadcodec.Codec {
	t.Helper()
	c, err := payloadcodec.New(ring(t, current, keys))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const userText = "a private message: meet at 7 at the usual place"

func payloads(t *testing.T) []*commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayloads(wfapi.SendRequest{Type: "text", Text: userText}, "second", nil)
	if err != nil {
		t.Fatal(err)
	}
	return p.Payloads
}

func TestCodecRoundTripEncryptsEveryPayloadAndRestoresIt(t *testing.T) {
	c := codec(t, 1, map[int32][]byte{1: key1})
	in := payloads(t)
	enc, err := c.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(enc) != len(in) {
		t.Fatalf("encoded %d payloads, want %d", len(enc), len(in))
	}
	for i, p := range enc {
		raw, _ := proto.Marshal(p)
		if bytes.Contains(raw, []byte("meet at 7")) || bytes.Contains(raw, []byte("second")) || bytes.Contains(raw, []byte("json/plain")) {
			t.Fatalf("payload %d is not encrypted", i)
		}
		if got := string(p.Metadata[converter.MetadataEncoding]); got != payloadcodec.Encoding {
			t.Fatalf("encoding %q, want %q", got, payloadcodec.Encoding)
		}
		if got := string(p.Metadata[payloadcodec.MetaGeneration]); got != "1" {
			t.Fatalf("generation %q, want 1", got)
		}
	}
	// A fresh nonce per encoding: the same payload encrypts differently each time.
	again, _ := c.Encode(in)
	if bytes.Equal(again[0].Data, enc[0].Data) {
		t.Fatal("two encodings of one payload are equal")
	}
	dec, err := c.Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if !proto.Equal(dec[i], in[i]) {
			t.Fatalf("payload %d: decoded %v, want %v", i, dec[i], in[i])
		}
	}
	// Through the data converter, as a client uses it.
	dc, err := payloadcodec.DataConverter(ring(t, 1, map[int32][]byte{1: key1}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := dc.ToPayload(wfapi.SendRequest{Text: userText})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(p.String(), "meet at 7") {
		t.Fatal("the data converter did not encrypt")
	}
	var back wfapi.SendRequest
	if err := dc.FromPayload(p, &back); err != nil || back.Text != userText {
		t.Fatalf("data converter round trip: %q %v", back.Text, err)
	}
}

func TestCodecKeyDiffersFromSealingKey(t *testing.T) {
	// A payload sealed directly with the sealing key (as if the codec used it) does not
	// open: the codec key is derived.
	keys := ring(t, 1, map[int32][]byte{1: key1})
	_, sub, err := keys.DeriveKeys(payloadcodec.KeyLabel)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(sub[1], key1) || len(sub[1]) != 32 {
		t.Fatal("the codec key is the sealing key")
	}
	_, other, _ := keys.DeriveKeys("another/label")
	if bytes.Equal(sub[1], other[1]) {
		t.Fatal("labels do not separate derived keys")
	}
}

func TestCodecRotationDecodesOldGenerationsAndRefusesUnknownOnes(t *testing.T) {
	gen1 := codec(t, 1, map[int32][]byte{1: key1})
	old, err := gen1.Encode(payloads(t))
	if err != nil {
		t.Fatal(err)
	}
	// Generation 2 becomes current; generation 1 stays in the ring.
	gen2 := codec(t, 2, map[int32][]byte{1: key1, 2: key2})
	fresh, err := gen2.Encode(payloads(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(fresh[0].Metadata[payloadcodec.MetaGeneration]); got != "2" {
		t.Fatalf("the rotated codec encodes with generation %s, want 2", got)
	}
	for name, enc := range map[string][]*commonpb.Payload{"gen 1": old, "gen 2": fresh} {
		dec, err := gen2.Decode(enc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !proto.Equal(dec[0], payloads(t)[0]) {
			t.Fatalf("%s: decoded payload differs", name)
		}
	}
	// A ring without generation 2 cannot decode it: a typed error naming no key.
	_, err = gen1.Decode(fresh)
	if !errors.Is(err, payloadcodec.ErrUnknownGeneration) {
		t.Fatalf("decode of an unknown generation: %v, want ErrUnknownGeneration", err)
	}
	assertNoKeyInError(t, err)
}

func TestCodecTamperedPayloadIsATypedError(t *testing.T) {
	c := codec(t, 2, map[int32][]byte{1: key1, 2: key2})
	tamper := map[string]func(p *commonpb.Payload){
		"flipped ciphertext bit": func(p *commonpb.Payload) { p.Data[len(p.Data)-20] ^= 1 },
		"flipped nonce bit":      func(p *commonpb.Payload) { p.Data[0] ^= 1 },
		"truncated":              func(p *commonpb.Payload) { p.Data = p.Data[:10] },
		"relabelled generation":  func(p *commonpb.Payload) { p.Metadata[payloadcodec.MetaGeneration] = []byte("1") },
		"malformed generation":   func(p *commonpb.Payload) { p.Metadata[payloadcodec.MetaGeneration] = []byte("02") },
		"no generation":          func(p *commonpb.Payload) { delete(p.Metadata, payloadcodec.MetaGeneration) },
	}
	for name, f := range tamper {
		t.Run(name, func(t *testing.T) {
			enc, err := c.Encode(payloads(t))
			if err != nil {
				t.Fatal(err)
			}
			f(enc[0])
			_, err = c.Decode(enc)
			if !errors.Is(err, payloadcodec.ErrDecryptFailed) {
				t.Fatalf("decode: %v, want ErrDecryptFailed", err)
			}
			assertNoKeyInError(t, err)
		})
	}
}

func TestCodecPassesUnencodedPayloadsThrough(t *testing.T) {
	c := codec(t, 1, map[int32][]byte{1: key1})
	plain := payloads(t)
	enc, err := c.Encode(plain[:1])
	if err != nil {
		t.Fatal(err)
	}
	// A mix: an old unencoded payload beside an encoded one, and a payload without
	// metadata at all.
	mixed := []*commonpb.Payload{plain[1], enc[0], {Data: []byte("raw")}}
	dec, err := c.Decode(mixed)
	if err != nil {
		t.Fatal(err)
	}
	if dec[0] != plain[1] || dec[2] != mixed[2] {
		t.Fatal("an unencoded payload was changed")
	}
	if !proto.Equal(dec[1], plain[0]) {
		t.Fatal("the encoded payload did not decode")
	}
}

func TestCodecNeverPrintsKeys(t *testing.T) {
	c := codec(t, 1, map[int32][]byte{1: key1})
	for _, s := range []string{c.String(), fmt.Sprintf("%v %+v %#v", c, c, c)} {
		if strings.Contains(s, string(key1)) {
			t.Fatal("the codec prints its key")
		}
	}
	if _, err := payloadcodec.New(nil); !errors.Is(err, payloadcodec.ErrInvalidInput) {
		t.Fatalf("New(nil): %v", err)
	}
}

func assertNoKeyInError(t *testing.T, err error) {
	t.Helper()
	for _, k := range [][]byte{key1, key2} {
		if strings.Contains(err.Error(), string(k)) {
			t.Fatal("an error contains a key")
		}
	}
	if strings.Contains(err.Error(), "meet at 7") {
		t.Fatal("an error contains plaintext")
	}
}

// --- the HTTP endpoint

const token = "codec-test-token-3f9a"

func endpoint(t *testing.T, tok, origin string) (*httptest.Server, *payloadcodec.Codec) {
	t.Helper()
	c := codec(t, 1, map[int32][]byte{1: key1})
	srv := httptest.NewServer(http.StripPrefix("/codec", payloadcodec.NewHTTPHandler(c, payloadcodec.HTTPConfig{
		Token: sealing.NewSecret(tok), CORSOrigin: origin})))
	t.Cleanup(srv.Close)
	return srv, c
}

func post(t *testing.T, url string, header map[string]string, body []byte) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func encodedBody(t *testing.T, c *payloadcodec.Codec) []byte {
	t.Helper()
	enc, err := c.Encode(payloads(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := protojson.Marshal(&commonpb.Payloads{Payloads: enc})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCodecEndpointDecodesOnlyWithTheRightToken(t *testing.T) {
	srv, c := endpoint(t, token, "http://127.0.0.1:8233")
	body := encodedBody(t, c)
	for name, auth := range map[string]string{"no token": "", "wrong token": "Bearer wrong", "bare token": token,
		"token prefix": "Bearer " + token[:5]} {
		code, text, h := post(t, srv.URL+"/codec/decode", map[string]string{"Authorization": auth}, body)
		if code != http.StatusUnauthorized {
			t.Fatalf("%s: status %d, want 401", name, code)
		}
		if strings.Contains(text, "meet at 7") || strings.Contains(text, token) || h.Get("WWW-Authenticate") == "" {
			t.Fatalf("%s: the refusal leaks or lacks its challenge: %q", name, text)
		}
	}
	code, text, _ := post(t, srv.URL+"/codec/decode", map[string]string{"Authorization": "Bearer " + token, "X-Namespace": "default"}, body)
	if code != http.StatusOK {
		t.Fatalf("decode with the token: %d %s", code, text)
	}
	var out commonpb.Payloads
	if err := protojson.Unmarshal([]byte(text), &out); err != nil {
		t.Fatal(err)
	}
	var got wfapi.SendRequest
	if err := converter.GetDefaultDataConverter().FromPayload(out.Payloads[0], &got); err != nil || got.Text != userText {
		t.Fatalf("decoded %q %v, want the user text", got.Text, err)
	}
	// Encode works too (the UI encodes signal and query arguments it sends).
	plain, _ := protojson.Marshal(&commonpb.Payloads{Payloads: payloads(t)})
	code, text, _ = post(t, srv.URL+"/codec/encode", map[string]string{"Authorization": "Bearer " + token}, plain)
	if code != http.StatusOK || strings.Contains(text, "meet at 7") {
		t.Fatalf("encode: %d %s", code, text)
	}
}

func TestCodecEndpointIsDisabledWithoutAToken(t *testing.T) {
	srv, c := endpoint(t, "", "")
	code, _, _ := post(t, srv.URL+"/codec/decode", map[string]string{"Authorization": "Bearer "}, encodedBody(t, c))
	if code != http.StatusNotFound {
		t.Fatalf("status %d, want 404", code)
	}
}

func TestCodecEndpointAllowsOnlyTheConfiguredOrigin(t *testing.T) {
	const ui = "http://127.0.0.1:8233"
	srv, c := endpoint(t, token, ui)
	body := encodedBody(t, c)
	auth := "Bearer " + token

	// Preflight from the UI: allowed, with the headers the UI sends.
	req, _ := http.NewRequest(http.MethodOptions, srv.URL+"/codec/decode", nil)
	req.Header.Set("Origin", ui)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type,authorization,x-namespace")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != ui {
		t.Fatalf("preflight: %d, allow-origin %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	for _, h := range []string{"Content-Type", "Authorization", "X-Namespace"} {
		if !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), h) {
			t.Fatalf("preflight allows headers %q, want %s", resp.Header.Get("Access-Control-Allow-Headers"), h)
		}
	}
	// Preflight from a foreign origin: refused, no CORS headers.
	req.Header.Set("Origin", "https://evil.example")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("foreign preflight: %d, allow-origin %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	// A decode from a foreign origin is refused even with the token.
	if code, text, _ := post(t, srv.URL+"/codec/decode", map[string]string{"Authorization": auth, "Origin": "https://evil.example"}, body); code != http.StatusForbidden || strings.Contains(text, "meet at 7") {
		t.Fatalf("foreign origin: %d", code)
	}
	// From the UI's origin with the token: decoded, with the CORS header.
	code, text, h := post(t, srv.URL+"/codec/decode", map[string]string{"Authorization": auth, "Origin": ui}, body)
	if code != http.StatusOK || h.Get("Access-Control-Allow-Origin") != ui || !strings.Contains(text, "payloads") {
		t.Fatalf("UI origin: %d %q", code, h.Get("Access-Control-Allow-Origin"))
	}
	// Without a configured origin, every browser origin is refused.
	srv2, _ := endpoint(t, token, "")
	if code, _, _ := post(t, srv2.URL+"/codec/decode", map[string]string{"Authorization": auth, "Origin": ui}, body); code != http.StatusForbidden {
		t.Fatalf("no configured origin: %d, want 403", code)
	}
}
