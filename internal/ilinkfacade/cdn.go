package ilinkfacade

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// The facade's CDN: media moves between a client and the facade as it moves between a
// client and iLink's CDN (AES-128-ECB with a key the uploader picks), and between the
// facade and iLink through the account's own CDN path (the reply API). Its references
// (upload_param, encrypt_query_param) are sealed by the installation's keys, so that only
// the facade can read them, and they expire.
const (
	refLifetime       = time.Hour
	bindingUploadRef  = "ilink-facade/upload-param"
	bindingDownloadRf = "ilink-facade/download-ref"
)

// uploadRef is what an upload_param names.
type uploadRef struct {
	Client    string `json:"c"`
	Account   string `json:"a"`
	Key       string `json:"k"`
	RawSize   int64  `json:"r"`
	MD5       string `json:"m"`
	MediaType int32  `json:"t"`
	FileKey   string `json:"f"`
	Expires   int64  `json:"e"`
}

// downloadRef is what an inbound item's encrypt_query_param names.
type downloadRefBody struct {
	Message string `json:"m"`
	Index   int    `json:"i"`
	Key     string `json:"k"`
	Expires int64  `json:"e"`
}

func (f *Facade) seal(binding string, v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	s, err := f.cfg.Keys.Seal(sealing.PurposeILinkClientUpload, binding, sealing.NewSecret(string(b)))
	if err != nil {
		return "", err
	}
	raw, _ := json.Marshal(s)
	return base64.RawURLEncoding.EncodeToString(raw), nil
}

func (f *Facade) open(binding, ref string, v any) error {
	raw, err := base64.RawURLEncoding.DecodeString(ref)
	if err != nil {
		return err
	}
	var s sealing.Sealed
	if err := json.Unmarshal(raw, &s); err != nil {
		return err
	}
	plain, err := f.cfg.Keys.Open(sealing.PurposeILinkClientUpload, binding, s)
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(plain.Reveal()), v)
}

// downloadRef is the media of an inbound image as the facade's CDN serves it: a sealed
// reference to the message's attachment and a fresh key it is encrypted with.
func (f *Facade) downloadRef(r *http.Request, messageKey string, index int) (*ilink.CDNMedia, error) {
	key, err := ilink.NewMediaKey()
	if err != nil {
		return nil, err
	}
	ref, err := f.seal(bindingDownloadRf, downloadRefBody{Message: messageKey, Index: index, Key: hex.EncodeToString(key),
		Expires: f.cfg.Now().Add(refLifetime).Unix()})
	if err != nil {
		return nil, err
	}
	return &ilink.CDNMedia{EncryptQueryParam: ref, AESKey: ilink.Secret(base64.StdEncoding.EncodeToString(key)), EncryptType: ilink.EncryptTypePacked,
		FullURL: f.publicURL(r) + CDNPath + "download?encrypted_query_param=" + url.QueryEscape(ref)}, nil
}

// cdnError answers a CDN refusal as iLink's CDN does: a 4xx with x-error-message.
func (f *Facade) cdnError(w http.ResponseWriter, endpoint string, status int, why string) {
	f.log.Info("iLink facade CDN request refused", "endpoint", endpoint, "status", status, "why", why)
	f.count(endpoint, CodeUploadRefused)
	w.Header().Set("x-error-message", why)
	w.WriteHeader(status)
}

// cdnDownload serves an inbound attachment, encrypted with the key its reference carries.
func (f *Facade) cdnDownload(w http.ResponseWriter, r *http.Request) {
	const endpoint = "cdn/download"
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var ref downloadRefBody
	if err := f.open(bindingDownloadRf, r.URL.Query().Get("encrypted_query_param"), &ref); err != nil {
		f.cdnError(w, endpoint, http.StatusBadRequest, "unknown encrypted_query_param")
		return
	}
	if f.cfg.Now().Unix() > ref.Expires {
		f.cdnError(w, endpoint, http.StatusNotFound, "the reference expired")
		return
	}
	key, err := hex.DecodeString(ref.Key)
	if err != nil {
		f.cdnError(w, endpoint, http.StatusBadRequest, "unknown encrypted_query_param")
		return
	}
	ctx, cancel := f.storeContext(r.Context())
	o, found, err := f.cfg.Store.GetILinkClientOffer(ctx, ref.Message)
	cancel()
	switch {
	case err != nil:
		f.storeFailed(w, f.log, endpoint, err)
		return
	case !found:
		f.cdnError(w, endpoint, http.StatusNotFound, "the message is gone")
		return
	}
	data, status, err := f.attachment(r.Context(), o, ref.Index)
	switch {
	case err != nil || status >= 500:
		http.Error(w, "the attachment could not be read", http.StatusServiceUnavailable)
		return
	case status >= 300:
		f.cdnError(w, endpoint, http.StatusNotFound, "the attachment cannot be read: "+replyCode(data))
		return
	}
	enc, err := ilink.EncryptECB(key, data)
	if err != nil {
		http.Error(w, "encrypt", http.StatusInternalServerError)
		return
	}
	f.count(endpoint, "ok")
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(enc)
}

type getUploadURLRequest struct {
	FileKey    string `json:"filekey"`
	MediaType  int32  `json:"media_type"`
	ToUserID   string `json:"to_user_id"`
	RawSize    int64  `json:"rawsize"`
	RawFileMD5 string `json:"rawfilemd5"`
	FileSize   int64  `json:"filesize"`
	AESKey     string `json:"aeskey"`
}

// getUploadURL answers where the client uploads media for a reply: the facade's CDN, with
// a sealed reference to what it announced.
func (f *Facade) getUploadURL(c *call) {
	var req getUploadURLRequest
	if err := json.Unmarshal(c.body, &req); err != nil {
		f.refuse(c.w, c.log, c.endpoint, CodeInvalidRequest, "body does not decode", invalidArgs())
		return
	}
	key, kerr := hex.DecodeString(req.AESKey)
	switch {
	case req.FileKey == "" || len(req.FileKey) > 128 || !visibleASCII(req.FileKey):
		f.refuse(c.w, c.log, c.endpoint, CodeInvalidRequest, "filekey missing or malformed", invalidArgs())
		return
	case req.MediaType < 1 || req.MediaType > 4:
		f.refuse(c.w, c.log, c.endpoint, CodeInvalidRequest, "media_type is not 1 to 4", invalidArgs())
		return
	case req.RawSize < 1 || req.RawSize > store.MaxILinkUploadBytes || req.FileSize != ilink.PaddedSize(req.RawSize):
		f.refuse(c.w, c.log, c.endpoint, CodeInvalidRequest, "rawsize out of bounds or filesize not its padded size", invalidArgs())
		return
	case kerr != nil || len(key) != ilink.KeySize:
		f.refuse(c.w, c.log, c.endpoint, CodeInvalidRequest, "aeskey is not 32 hex characters", invalidArgs())
		return
	case len(req.RawFileMD5) != 32:
		f.refuse(c.w, c.log, c.endpoint, CodeInvalidRequest, "rawfilemd5 is not 32 hex characters", invalidArgs())
		return
	}
	account := c.caller.AccountKey
	if account == "" {
		// A client's own token: the bot is the one the user last wrote to.
		ctx, cancel := f.storeContext(c.r.Context())
		o, found, err := f.cfg.Store.LatestILinkClientOffer(ctx, c.caller.Client, "", req.ToUserID)
		cancel()
		switch {
		case store.CodeOf(err) == vocab.CodeInvalidInput:
			f.refuse(c.w, c.log, c.endpoint, CodeInvalidRequest, "to_user_id malformed", invalidArgs())
			return
		case err != nil:
			f.storeFailed(c.w, c.log, c.endpoint, err)
			return
		case !found:
			f.refuse(c.w, c.log, c.endpoint, CodeNotYours, "no message from to_user_id", invalidArgs())
			return
		}
		account = o.AccountKey
	}
	ref, err := f.seal(bindingUploadRef, uploadRef{Client: c.caller.Client, Account: account, Key: req.AESKey, RawSize: req.RawSize,
		MD5: strings.ToLower(req.RawFileMD5), MediaType: req.MediaType, FileKey: req.FileKey, Expires: f.cfg.Now().Add(refLifetime).Unix()})
	if err != nil {
		http.Error(c.w, "seal", http.StatusInternalServerError)
		return
	}
	full := f.publicURL(c.r) + CDNPath + "upload?encrypted_query_param=" + url.QueryEscape(ref) + "&filekey=" + url.QueryEscape(req.FileKey)
	c.ok(f, map[string]any{"ret": 0, "upload_param": ref, "upload_full_url": full})
}

// cdnUpload receives a client's encrypted upload: it decrypts it with the key the client
// announced, checks its size and MD5, stores it, and answers the download reference
// (x-encrypted-param) the client's sendmessage names it by.
func (f *Facade) cdnUpload(w http.ResponseWriter, r *http.Request) {
	const endpoint = "cdn/upload"
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var ref uploadRef
	if err := f.open(bindingUploadRef, r.URL.Query().Get("encrypted_query_param"), &ref); err != nil {
		f.cdnError(w, endpoint, http.StatusBadRequest, "unknown encrypted_query_param")
		return
	}
	if f.cfg.Now().Unix() > ref.Expires {
		f.cdnError(w, endpoint, http.StatusBadRequest, "the upload URL expired")
		return
	}
	if fk := r.URL.Query().Get("filekey"); fk != "" && fk != ref.FileKey {
		f.cdnError(w, endpoint, http.StatusBadRequest, "filekey does not match")
		return
	}
	limit := ilink.PaddedSize(ref.RawSize)
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	if int64(len(body)) != limit {
		f.cdnError(w, endpoint, http.StatusBadRequest, "the body is not the announced filesize")
		return
	}
	key, _ := hex.DecodeString(ref.Key)
	plain, err := ilink.DecryptECB(key, body)
	if err != nil || int64(len(plain)) != ref.RawSize {
		f.cdnError(w, endpoint, http.StatusBadRequest, "the body does not decrypt to the announced rawsize")
		return
	}
	if sum := md5.Sum(plain); hex.EncodeToString(sum[:]) != ref.MD5 {
		f.cdnError(w, endpoint, http.StatusBadRequest, "the body's MD5 is not the announced rawfilemd5")
		return
	}
	ctx, cancel := f.storeContext(r.Context())
	id, err := f.cfg.Store.StageILinkUpload(ctx, f.cfg.Now(), ref.Client, ref.Account, ref.MediaType, plain)
	cancel()
	if err != nil {
		f.storeFailed(w, f.log, endpoint, err)
		return
	}
	f.count(endpoint, "ok")
	w.Header().Set("x-encrypted-param", uploadPrefix+id)
	w.WriteHeader(http.StatusOK)
}

// uploadPrefix starts the download reference of an upload.
const uploadPrefix = "ilkup:"

// uploadIDOf is the upload id a download reference names ("" when it names none).
func uploadIDOf(ref string) string {
	id, ok := strings.CutPrefix(ref, uploadPrefix)
	if !ok {
		return ""
	}
	return id
}
