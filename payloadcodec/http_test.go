package payloadcodec_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ilinkflow/ilinkflow/payloadcodec"
)

// The auth scheme is case-insensitive (RFC 7235): the CLI's --codec-auth may spell it
// in any case, and several spaces may follow it.
func TestCodecEndpointAcceptsTheBearerSchemeInAnyCase(t *testing.T) {
	srv, c := endpoint(t, token, "")
	body := encodedBody(t, c)
	for _, auth := range []string{"Bearer " + token, "bearer " + token, "BEARER " + token, "bEaReR   " + token} {
		code, text, _ := post(t, srv.URL+"/codec/decode", map[string]string{"Authorization": auth}, body)
		if code != http.StatusOK || !strings.Contains(text, "payloads") {
			t.Fatalf("%q: %d %s", strings.Replace(auth, token, "<token>", 1), code, text)
		}
	}
	for _, auth := range []string{"Basic " + token, "Bearer" + token, "Bearer ", token + " Bearer", "Bearer " + token + "x"} {
		if code, _, _ := post(t, srv.URL+"/codec/decode", map[string]string{"Authorization": auth}, body); code != http.StatusUnauthorized {
			t.Fatalf("%q: %d, want 401", strings.Replace(auth, token, "<token>", 1), code)
		}
	}
}

// A refused body is answered with its code and a fixed message: nothing of the request
// (its JSON, a payload's generation or bytes) comes back.
func TestCodecEndpointRefusalsNeverEchoTheRequest(t *testing.T) {
	srv, c := endpoint(t, token, "")
	auth := map[string]string{"Authorization": "Bearer " + token}
	const marker = "<script>echo-marker-7731</script>"

	enc, err := c.Encode(payloads(t))
	if err != nil {
		t.Fatal(err)
	}
	unknown := &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(payloadcodec.Encoding),
		payloadcodec.MetaGeneration: []byte("7731")}, Data: enc[0].Data}
	tampered := &commonpb.Payload{Metadata: enc[0].Metadata, Data: append([]byte(marker), enc[0].Data...)}
	asBody := func(p *commonpb.Payload) []byte {
		b, err := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{p}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name, path string
		body       []byte
		want       string
	}{
		{"not JSON", "/codec/decode", []byte(marker), "invalid_input: the request body is not a JSON Payloads object\n"},
		{"JSON of another shape", "/codec/encode", []byte(`{"payloads":[{"data":"` + marker + `"}]}`),
			"invalid_input: the request body is not a JSON Payloads object\n"},
		{"unknown generation", "/codec/decode", asBody(unknown),
			"payload_codec_unknown_generation: a payload was encrypted with a key generation this worker does not have\n"},
		{"tampered payload", "/codec/decode", asBody(tampered),
			"payload_codec_decrypt_failed: a payload does not decrypt (tampered, truncated or relabelled)\n"},
	}
	for _, tc := range cases {
		code, text, _ := post(t, srv.URL+tc.path, auth, tc.body)
		if code != http.StatusBadRequest || text != tc.want {
			t.Fatalf("%s: %d %q, want 400 %q", tc.name, code, text, tc.want)
		}
		if strings.Contains(text, "7731") || strings.Contains(text, "script") {
			t.Fatalf("%s: the refusal echoes the request: %q", tc.name, text)
		}
	}
}

// A request without the right token is refused before its body is read: a client that
// declared a huge body and sent only its start gets its 401 at once. A body declared over
// the limit is refused unread too (413), and one that turns out longer than declared is
// cut at the limit.
func TestCodecEndpointAuthenticatesBeforeReadingTheBodyAndBoundsIt(t *testing.T) {
	srv, _ := endpoint(t, token, "")
	stalled := func(auth string, declared int64) *http.Response {
		t.Helper()
		pr, pw := io.Pipe()
		t.Cleanup(func() { _ = pw.Close() })
		go func() { _, _ = pw.Write([]byte(`{"payloads":[`)) }() // and then nothing more
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		t.Cleanup(cancel)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/codec/decode", pr)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = declared
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("no answer while the body is unsent (the endpoint waits for the body): %v", err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	if resp := stalled("Bearer wrong-token", 1<<30); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token with a stalled body: %d, want 401", resp.StatusCode)
	}
	resp := stalled("Bearer "+token, payloadcodec.MaxRequestBytes+1)
	text, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || string(text) != "body_too_large: the request body is too large\n" {
		t.Fatalf("declared over the limit: %d %q, want 413", resp.StatusCode, text)
	}
	// A chunked body (no declared length) over the limit is read up to the limit only.
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/codec/decode",
		io.MultiReader(strings.NewReader(`{"payloads":[],"x":"`), strings.NewReader(strings.Repeat("a", payloadcodec.MaxRequestBytes))))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if text, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusRequestEntityTooLarge || strings.Contains(string(text), "aaaa") {
		t.Fatalf("chunked over the limit: %d %q, want 413", resp.StatusCode, text)
	}
}
