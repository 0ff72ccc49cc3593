package ilinksim

import (
	"bytes"
	"crypto/aes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
)

// uploadSlot is what getuploadurl announced for one upload.
type uploadSlot struct {
	botID     string
	fileKey   string
	mediaType int
	toUserID  string
	rawSize   int64
	rawMD5    string
	fileSize  int64
	aesKeyHex string
	// downloadParam is set after a successful upload (re-uploads reuse it).
	downloadParam string
}

// cdnObject is one stored CDN object (ciphertext, or plaintext for KeyNone images).
type cdnObject struct {
	data      []byte
	aesKeyHex string
	fileKey   string
	mediaType int
	toUserID  string
	botID     string
	source    string
}

// encryptECB is AES-128-ECB with PKCS#7 padding.
func encryptECB(key, plain []byte) []byte {
	blk, err := aes.NewCipher(key)
	if err != nil {
		return nil
	}
	pad := aes.BlockSize - len(plain)%aes.BlockSize
	buf := make([]byte, len(plain)+pad)
	copy(buf, plain)
	for i := len(plain); i < len(buf); i++ {
		buf[i] = byte(pad)
	}
	for i := 0; i < len(buf); i += aes.BlockSize {
		blk.Encrypt(buf[i:i+aes.BlockSize], buf[i:i+aes.BlockSize])
	}
	return buf
}

// decryptECB reverses encryptECB and checks the padding.
func decryptECB(key, ct []byte) ([]byte, error) {
	blk, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("aes key: %w", err)
	}
	if len(ct) == 0 || len(ct)%aes.BlockSize != 0 {
		return nil, fmt.Errorf("ciphertext length %d is not a positive multiple of 16", len(ct))
	}
	out := make([]byte, len(ct))
	for i := 0; i < len(ct); i += aes.BlockSize {
		blk.Decrypt(out[i:i+aes.BlockSize], ct[i:i+aes.BlockSize])
	}
	pad := int(out[len(out)-1])
	if pad == 0 || pad > aes.BlockSize {
		return nil, errors.New("bad PKCS#7 padding")
	}
	for _, c := range out[len(out)-pad:] {
		if int(c) != pad {
			return nil, errors.New("bad PKCS#7 padding")
		}
	}
	return out[:len(out)-pad], nil
}

// paddedSize is the AES-ECB/PKCS#7 ciphertext size for n plaintext bytes.
func paddedSize(n int64) int64 { return (n/16 + 1) * 16 }

var hex32 = regexp.MustCompile(`^[0-9a-fA-F]{32}$`)

func (s *Server) handleGetUploadURL(c *call) {
	var req struct {
		FileKey    string `json:"filekey"`
		MediaType  int    `json:"media_type"`
		ToUserID   string `json:"to_user_id"`
		RawSize    int64  `json:"rawsize"`
		RawFileMD5 string `json:"rawfilemd5"`
		FileSize   int64  `json:"filesize"`
		AESKey     string `json:"aeskey"`
	}
	s.mu.Lock()
	b, ok := s.authedPostLocked(c, &req)
	s.mu.Unlock()
	if !ok {
		return
	}
	switch {
	case req.FileKey == "":
		writeJSON(c.w, map[string]any{"ret": -2, "errmsg": "filekey required"})
		return
	case req.MediaType < 1 || req.MediaType > 4:
		writeJSON(c.w, map[string]any{"ret": -2, "errmsg": "invalid media_type"})
		return
	case req.ToUserID == "":
		writeJSON(c.w, map[string]any{"ret": -2, "errmsg": "to_user_id required"})
		return
	case !hex32.MatchString(req.AESKey):
		writeJSON(c.w, map[string]any{"ret": -2, "errmsg": "invalid aeskey"})
		return
	case req.RawSize < 0 || req.FileSize <= 0:
		writeJSON(c.w, invalidArgs())
		return
	}
	slot := &uploadSlot{
		botID: b.info.BotID, fileKey: req.FileKey, mediaType: req.MediaType, toUserID: req.ToUserID,
		rawSize: req.RawSize, rawMD5: req.RawFileMD5, fileSize: req.FileSize, aesKeyHex: req.AESKey,
	}
	param := newOpaqueParam()
	s.mu.Lock()
	s.uploads[param] = slot
	s.mu.Unlock()
	resp := map[string]any{"ret": 0}
	full := s.cdnBase(c.r) + "/upload?encrypted_query_param=" + url.QueryEscape(param) + "&filekey=" + url.QueryEscape(req.FileKey)
	switch s.cfg.UploadURLStyle {
	case UploadFull:
		resp["upload_full_url"] = full
	case UploadParam:
		resp["upload_param"] = param
	default:
		resp["upload_full_url"] = full
		resp["upload_param"] = param
	}
	writeJSON(c.w, resp)
}

func cdnError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("x-error-message", msg)
	w.WriteHeader(status)
}

func (s *Server) handleCDNUpload(c *call) {
	if c.r.Method != http.MethodPost {
		cdnError(c.w, http.StatusNotFound, "upload requires POST")
		return
	}
	q := c.r.URL.Query()
	param, fileKey := q.Get("encrypted_query_param"), q.Get("filekey")
	s.mu.Lock()
	defer s.mu.Unlock()
	slot := s.uploads[param]
	switch {
	case param == "" || slot == nil:
		cdnError(c.w, http.StatusBadRequest, "invalid encrypted_query_param")
		return
	case fileKey != slot.fileKey:
		cdnError(c.w, http.StatusBadRequest, "filekey mismatch")
		return
	}
	if s.cfg.CDNStrict {
		if msg := checkUpload(slot, c.body); msg != "" {
			cdnError(c.w, http.StatusBadRequest, msg)
			return
		}
	}
	if slot.downloadParam == "" {
		slot.downloadParam = newOpaqueParam()
	}
	s.objects[slot.downloadParam] = &cdnObject{
		data: bytes.Clone(c.body), aesKeyHex: slot.aesKeyHex, fileKey: slot.fileKey,
		mediaType: slot.mediaType, toUserID: slot.toUserID, botID: slot.botID, source: "upload",
	}
	c.w.Header().Set("x-encrypted-param", slot.downloadParam)
	c.w.WriteHeader(http.StatusOK)
}

// checkUpload verifies size, padding and MD5 of an upload against its slot.
func checkUpload(slot *uploadSlot, body []byte) string {
	if int64(len(body)) != slot.fileSize {
		return "body size " + strconv.Itoa(len(body)) + " != filesize " + strconv.FormatInt(slot.fileSize, 10)
	}
	if slot.fileSize != paddedSize(slot.rawSize) {
		return "filesize " + strconv.FormatInt(slot.fileSize, 10) + " != padded(rawsize) " + strconv.FormatInt(paddedSize(slot.rawSize), 10)
	}
	key, err := hex.DecodeString(slot.aesKeyHex)
	if err != nil {
		return "invalid aeskey"
	}
	plain, err := decryptECB(key, body)
	if err != nil {
		return "decrypt: " + err.Error()
	}
	if int64(len(plain)) != slot.rawSize {
		return "decrypted size " + strconv.Itoa(len(plain)) + " != rawsize " + strconv.FormatInt(slot.rawSize, 10)
	}
	sum := md5.Sum(plain)
	if slot.rawMD5 != "" && hex.EncodeToString(sum[:]) != slot.rawMD5 {
		return "rawfilemd5 mismatch"
	}
	return ""
}

func (s *Server) handleCDNDownload(c *call) {
	if c.r.Method != http.MethodGet {
		cdnError(c.w, http.StatusNotFound, "download requires GET")
		return
	}
	param := c.r.URL.Query().Get("encrypted_query_param")
	s.mu.Lock()
	obj := s.objects[param]
	var data []byte
	if obj != nil {
		data = obj.data
	}
	s.mu.Unlock()
	if obj == nil {
		cdnError(c.w, http.StatusNotFound, "object not found")
		return
	}
	c.w.Header().Set("Content-Type", "application/octet-stream")
	c.w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = c.w.Write(data)
}

// CDNObject returns a stored object by its download parameter (the same as GET /_sim/cdn).
func (s *Server) CDNObject(encryptQueryParam string) (CDNObject, error) {
	s.mu.Lock()
	obj := s.objects[encryptQueryParam]
	s.mu.Unlock()
	if obj == nil {
		return CDNObject{}, fmt.Errorf("%w: CDN object %q", ErrNotFound, encryptQueryParam)
	}
	out := CDNObject{
		EncryptQueryParam: encryptQueryParam, Ciphertext: bytes.Clone(obj.data), AESKeyHex: obj.aesKeyHex,
		FileKey: obj.fileKey, MediaType: obj.mediaType, ToUserID: obj.toUserID, BotID: obj.botID, Source: obj.source,
	}
	if obj.aesKeyHex == "" {
		out.Plaintext = bytes.Clone(obj.data)
	} else if key, err := hex.DecodeString(obj.aesKeyHex); err == nil {
		if p, err := decryptECB(key, obj.data); err == nil {
			out.Plaintext = p
		}
	}
	return out, nil
}

// ExpireCDNObject removes a stored object, as the real CDN forgets media after a while: a
// later download of it answers 404. It reports whether the object existed.
func (s *Server) ExpireCDNObject(encryptQueryParam string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.objects[encryptQueryParam]
	delete(s.objects, encryptQueryParam)
	return ok
}
