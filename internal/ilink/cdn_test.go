package ilink

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeCDN is a minimal API + CDN used to check the client's upload logic.
type fakeCDN struct {
	mu        sync.Mutex
	objects   map[string][]byte
	uploads   atomic.Int32
	failFirst int32 // answer 503 to this many uploads first
	status4xx bool
	noParam   bool
	fullURL   bool
	lastQuery string
	lastCType string
	uploadReq getUploadURLRequest
}

func (f *fakeCDN) handler(base *string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/ilink/bot/getuploadurl", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		_ = json.NewDecoder(r.Body).Decode(&f.uploadReq)
		f.mu.Unlock()
		if f.fullURL {
			_ = json.NewEncoder(w).Encode(map[string]string{"upload_full_url": *base + "/c2c/upload?full=1&encrypted_query_param=ZZ"})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"upload_param": "up+param/="})
	})
	mux.HandleFunc("/c2c/upload", func(w http.ResponseWriter, r *http.Request) {
		n := f.uploads.Add(1)
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.lastQuery, f.lastCType = r.URL.RawQuery, r.Header.Get("Content-Type")
		f.mu.Unlock()
		switch {
		case n <= f.failFirst:
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case f.status4xx:
			w.Header().Set("x-error-message", "content rejected")
			w.Header().Set("x-error-code", "-5102031")
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if !f.noParam {
			f.mu.Lock()
			f.objects["dl-1"] = body
			f.mu.Unlock()
			w.Header().Set("x-encrypted-param", "dl-1")
		}
	})
	mux.HandleFunc("/c2c/download", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		obj, ok := f.objects[r.URL.Query().Get("encrypted_query_param")]
		f.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = w.Write(obj)
	})
	return mux
}

func newFakeCDN(t *testing.T, f *fakeCDN) *Client {
	t.Helper()
	f.objects = map[string][]byte{}
	var base string
	srv := httptest.NewServer(f.handler(&base))
	t.Cleanup(srv.Close)
	base = srv.URL
	return newServerClient(t, srv.URL, Config{CDNRetryDelay: -1}, "tok")
}

func TestUploadSendsPluginGetUploadURLFieldsAndRoundTrips(t *testing.T) {
	f := &fakeCDN{}
	c := newFakeCDN(t, f)
	data := bytes.Repeat([]byte("abcdefgh"), 4) // 32 bytes: aligned, padding adds a full block
	m, err := c.UploadMedia(context.Background(), UploadRequest{ToUserID: "u", MediaType: MediaFile, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	r := f.uploadReq
	if r.FileKey != m.FileKey || len(r.FileKey) != 32 || r.MediaType != MediaFile || r.ToUserID != "u" || r.RawSize != 32 ||
		r.FileSize != 48 || r.RawFileMD5 != m.RawMD5 || !r.NoNeedThumb || r.AESKey != m.AESKey || len(r.AESKey) != 32 {
		t.Fatalf("getuploadurl body %+v", r)
	}
	if f.lastQuery != "encrypted_query_param=up%2Bparam%2F%3D&filekey="+m.FileKey || f.lastCType != "application/octet-stream" {
		t.Fatalf("upload query %q ctype %q", f.lastQuery, f.lastCType)
	}
	if m.EncryptQueryParam != "dl-1" || m.CipherSize != 48 {
		t.Fatalf("%+v", m)
	}
	key, _ := DecodeHexKey(m.AESKey)
	got, err := c.DownloadMedia(context.Background(), &CDNMedia{EncryptQueryParam: m.EncryptQueryParam}, key)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("download %q %v", got, err)
	}
}

func TestUploadPrefersUploadFullURL(t *testing.T) {
	f := &fakeCDN{fullURL: true}
	c := newFakeCDN(t, f)
	if _, err := c.UploadMedia(context.Background(), UploadRequest{ToUserID: "u", MediaType: MediaImage, Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if f.lastQuery != "full=1&encrypted_query_param=ZZ" {
		t.Fatalf("query %q", f.lastQuery)
	}
}

func TestUploadRetries5xxUpToThreeAttempts(t *testing.T) {
	f := &fakeCDN{failFirst: 2}
	c := newFakeCDN(t, f)
	if _, err := c.UploadMedia(context.Background(), UploadRequest{ToUserID: "u", MediaType: MediaImage, Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if f.uploads.Load() != 3 {
		t.Fatalf("%d attempts", f.uploads.Load())
	}
	f2 := &fakeCDN{failFirst: 5}
	c2 := newFakeCDN(t, f2)
	_, err := c2.UploadMedia(context.Background(), UploadRequest{ToUserID: "u", MediaType: MediaImage, Data: []byte("x")})
	if CodeOf(err) != CodeHTTPStatus || f2.uploads.Load() != 3 {
		t.Fatalf("%v after %d attempts", err, f2.uploads.Load())
	}
}

func TestUpload4xxIsPermanentAndKeepsXErrorMessage(t *testing.T) {
	f := &fakeCDN{status4xx: true}
	c := newFakeCDN(t, f)
	_, err := c.UploadMedia(context.Background(), UploadRequest{ToUserID: "u", MediaType: MediaImage, Data: []byte("x")})
	var e *Error
	if !asError(err, &e) || e.Code != CodeHTTPStatus || e.Status != 400 || e.Errmsg != "content rejected" || IsRetryable(err) {
		t.Fatalf("got %v", err)
	}
	if f.uploads.Load() != 1 {
		t.Fatalf("4xx retried: %d attempts", f.uploads.Load())
	}
}

func TestUploadWithoutEncryptedParamHeaderFails(t *testing.T) {
	f := &fakeCDN{noParam: true}
	c := newFakeCDN(t, f)
	_, err := c.UploadMedia(context.Background(), UploadRequest{ToUserID: "u", MediaType: MediaImage, Data: []byte("x")})
	if CodeOf(err) != CodeMalformedBody {
		t.Fatalf("got %v", err)
	}
}

func TestDownloadPrefersFullURL(t *testing.T) {
	var mu sync.Mutex
	var hits []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits = append(hits, r.URL.RequestURI())
		mu.Unlock()
		_, _ = io.WriteString(w, "plain")
	}))
	defer srv.Close()
	c := newServerClient(t, srv.URL, Config{}, "")
	got, err := c.DownloadMedia(context.Background(), &CDNMedia{FullURL: srv.URL + "/full?taskid=1", EncryptQueryParam: "e"}, nil)
	mu.Lock()
	defer mu.Unlock()
	if err != nil || string(got) != "plain" || len(hits) != 1 || hits[0] != "/full?taskid=1" {
		t.Fatalf("%q %v %v", got, err, hits)
	}
	mu.Unlock()
	_, _ = c.DownloadMedia(context.Background(), &CDNMedia{EncryptQueryParam: "a+b"}, nil)
	mu.Lock()
	if hits[1] != "/c2c/download?encrypted_query_param=a%2Bb" {
		t.Fatalf("fallback %v", hits)
	}
}

func TestDownloadRespectsTheMediaCap(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(make([]byte, 4096))
	}))
	defer srv.Close()
	c := newServerClient(t, srv.URL, Config{MaxMediaBytes: 1024}, "")
	if _, err := c.DownloadMedia(context.Background(), &CDNMedia{EncryptQueryParam: "e"}, nil); CodeOf(err) != CodeBodyTooLarge {
		t.Fatalf("got %v", err)
	}
	if _, err := c.UploadMedia(context.Background(), UploadRequest{ToUserID: "u", Data: make([]byte, 2048)}); CodeOf(err) != CodeInvalidInput {
		t.Fatalf("upload over cap: %v", err)
	}
}

func TestDownloadWithWrongKeyIsAMediaError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("not a multiple of 16"))
	}))
	defer srv.Close()
	c := newServerClient(t, srv.URL, Config{}, "")
	if _, err := c.DownloadMedia(context.Background(), &CDNMedia{EncryptQueryParam: "e"}, make([]byte, 16)); CodeOf(err) != CodeMedia {
		t.Fatalf("got %v", err)
	}
}
