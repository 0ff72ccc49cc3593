package payloadcodec

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ilinkflow/ilinkflow/sealing"
)

const fuzzToken = "fuzz-codec-token-0123456789"
const fuzzOrigin = "http://127.0.0.1:8233"

// FuzzCodecEndpoint sends arbitrary methods, paths, Authorization and Origin headers and
// bodies to the codec endpoint over loopback. It must answer every request; only a
// request with the token (the scheme in any case) or the configured origin's preflight
// is ever answered 200; every refusal is one of the fixed answers, never an echo of the
// request; and what it encodes decodes back.
func FuzzCodecEndpoint(f *testing.F) {
	keys, err := sealing.NewKeyring(1, map[int32][]byte{1: []byte("payload-codec-fuzz-key-1-0123456")})
	if err != nil {
		f.Fatal(err)
	}
	c, err := New(keys)
	if err != nil {
		f.Fatal(err)
	}
	plain, err := converter.GetDefaultDataConverter().ToPayloads("a private message", 7)
	if err != nil {
		f.Fatal(err)
	}
	enc, err := c.Encode(plain.Payloads)
	if err != nil {
		f.Fatal(err)
	}
	plainBody, _ := protojson.Marshal(plain)
	encBody, _ := protojson.Marshal(&commonpb.Payloads{Payloads: enc})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := httptest.NewServer(http.StripPrefix("/codec", NewHTTPHandler(c, HTTPConfig{
		Token: sealing.NewSecret(fuzzToken), CORSOrigin: fuzzOrigin, Logger: quiet})))
	f.Cleanup(srv.Close)

	for _, s := range []struct {
		method, path, auth, origin string
		body                       []byte
	}{
		{"POST", "/decode", "Bearer " + fuzzToken, "", encBody},
		{"POST", "/encode", "bearer " + fuzzToken, "", plainBody},
		{"POST", "/decode", "BEARER  " + fuzzToken, fuzzOrigin, plainBody},
		{"POST", "/decode", "Bearer " + fuzzToken, "", []byte(`{"payloads":[{"metadata":{"encoding":"YmluYXJ5L2lsaW5rZmxvdy1hZXNnY20=","ilinkflow-key-generation":"Nw=="},"data":"AAAA"}]}`)},
		{"POST", "/decode", "Bearer " + fuzzToken, "", []byte(`<script>alert(1)</script>`)},
		{"POST", "/decode", "Bearer wrong", "", encBody},
		{"POST", "/decode", "", "", encBody},
		{"OPTIONS", "/decode", "", fuzzOrigin, nil},
		{"OPTIONS", "/decode", "", "https://evil.example", nil},
		{"GET", "/decode", "Bearer " + fuzzToken, "", nil},
		{"POST", "/other", "Bearer " + fuzzToken, "", encBody},
		{"POST", "/encode", "Bearer " + fuzzToken, "", []byte(`{"payloads":[{}]}`)},
	} {
		f.Add(s.method, s.path, s.auth, s.origin, s.body)
	}
	fixed := map[string]bool{"unauthorized\n": true, "origin not allowed\n": true, "method not allowed\n": true,
		"404 page not found\n": true, "": true}
	for code, msg := range refusals {
		fixed[code+": "+msg+"\n"] = true
	}
	f.Fuzz(func(t *testing.T, method, path, auth, origin string, body []byte) {
		if len(body) > 1<<20 {
			t.Skip()
		}
		req, err := http.NewRequest(method, srv.URL+"/codec"+path, bytes.NewReader(body))
		if err != nil || !strings.HasPrefix(req.URL.Path, "/codec/") {
			t.Skip() // not a request a client can send to the endpoint
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Skip() // the client refused the method or a header value
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		// The server reads header values without surrounding spaces and tabs.
		auth, origin = strings.Trim(auth, " \t"), strings.Trim(origin, " \t")
		tok, hasBearer := bearer(auth)
		authorized := hasBearer && tok == fuzzToken
		switch resp.StatusCode {
		case http.StatusOK:
			preflight := method == http.MethodOptions && origin == fuzzOrigin
			if !preflight && !(authorized && method == http.MethodPost) {
				t.Fatalf("200 for %s %q without the token (auth %q, origin %q)", method, path, auth, origin)
			}
			if preflight {
				return
			}
			var got commonpb.Payloads
			if err := protojson.Unmarshal(out, &got); err != nil {
				t.Fatalf("a 200 answer is not JSON Payloads: %v", err)
			}
			if strings.HasSuffix(req.URL.Path, encodePath) {
				dec, err := c.Decode(got.Payloads)
				if err != nil {
					t.Fatalf("what the endpoint encoded does not decode: %v", err)
				}
				var in commonpb.Payloads
				_ = protojson.Unmarshal(body, &in)
				if len(dec) != len(in.Payloads) {
					t.Fatalf("encoded %d payloads into %d", len(in.Payloads), len(dec))
				}
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusNotFound, http.StatusMethodNotAllowed:
			if !authorized {
				t.Fatalf("%d for a request without the token: it got past authentication", resp.StatusCode)
			}
			fallthrough
		case http.StatusUnauthorized, http.StatusForbidden:
			if !fixed[string(out)] {
				t.Fatalf("%d answered %q: not one of the fixed answers", resp.StatusCode, out)
			}
		default:
			t.Fatalf("status %d for %s %q", resp.StatusCode, method, path)
		}
	})
}
