package ilink

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/ilinkflow/ilinkflow/internal/pause"
)

// UploadURL is a getuploadurl answer. At least one of UploadFullURL and
// UploadParam is set.
type UploadURL struct {
	// UploadParam is the older upload reference (used with the CDN base).
	UploadParam string
	// ThumbUploadParam is the thumbnail upload reference (unused by current clients).
	ThumbUploadParam string
	// UploadFullURL is a complete upload URL; preferred when present.
	UploadFullURL string
}

// UploadURLRequest is the input of GetUploadURL.
type UploadURLRequest struct {
	// FileKey is chosen by the client: 16 random bytes as 32 hex characters.
	FileKey string
	// MediaType is the upload media type (not the item type).
	MediaType MediaType
	// ToUserID is the recipient.
	ToUserID string
	// RawSize is the plaintext size in bytes.
	RawSize int64
	// RawFileMD5 is the plaintext MD5 in lower-case hex.
	RawFileMD5 string
	// FileSize is the ciphertext size, PaddedSize(RawSize).
	FileSize int64
	// AESKey is the 16-byte key as 32 hex characters.
	AESKey Secret
}

// GetUploadURL calls getuploadurl (no thumbnail: no_need_thumb is true).
func (c *Client) GetUploadURL(ctx context.Context, r UploadURLRequest) (*UploadURL, error) {
	resp, err := c.post(ctx, opGetUploadURL, pathGetUploadURL, c.cfg.SendTimeout, getUploadURLRequest{
		FileKey: r.FileKey, MediaType: r.MediaType, ToUserID: r.ToUserID,
		RawSize: r.RawSize, RawFileMD5: r.RawFileMD5, FileSize: r.FileSize,
		NoNeedThumb: true, AESKey: r.AESKey, BaseInfo: c.baseInfo,
	})
	if err != nil {
		return nil, err
	}
	return parseUploadURL(bytes.NewReader(resp.body), c.cfg.MaxBodyBytes)
}

// UploadRequest is the input of UploadMedia.
type UploadRequest struct {
	// ToUserID is the recipient the media will be sent to.
	ToUserID string
	// MediaType is MediaImage, MediaVideo, MediaFile or MediaVoice.
	MediaType MediaType
	// Data is the plaintext.
	Data []byte
}

// UploadedMedia is media stored on the CDN, ready to be sent.
type UploadedMedia struct {
	// MediaType is the upload media type.
	MediaType MediaType
	// FileKey is the client-chosen file key (32 hex characters).
	FileKey string
	// AESKey is the AES key as 32 hex characters.
	AESKey Secret
	// EncryptQueryParam is the CDN's x-encrypted-param: the download reference.
	EncryptQueryParam string
	// RawSize is the plaintext size.
	RawSize int64
	// CipherSize is the ciphertext size.
	CipherSize int64
	// RawMD5 is the plaintext MD5 in lower-case hex.
	RawMD5 string
}

// CDNMedia returns the outbound media reference: encrypt_query_param, the
// aes_key as base64 of the hex key (44 characters), encrypt_type 1.
func (m *UploadedMedia) CDNMedia() *CDNMedia {
	return &CDNMedia{
		EncryptQueryParam: m.EncryptQueryParam,
		AESKey:            Secret(base64.StdEncoding.EncodeToString([]byte(m.AESKey.Reveal()))),
		EncryptType:       EncryptTypePacked,
	}
}

// ImageItem returns the outbound image item (mid_size = ciphertext size).
func (m *UploadedMedia) ImageItem() Item {
	return Item{Type: ItemImage, ImageItem: &ImageItem{Media: m.CDNMedia(), MidSize: m.CipherSize}}
}

// VideoItem returns the outbound video item (video_size = ciphertext size).
func (m *UploadedMedia) VideoItem() Item {
	return Item{Type: ItemVideo, VideoItem: &VideoItem{Media: m.CDNMedia(), VideoSize: m.CipherSize}}
}

// FileItem returns the outbound file item; len is the plaintext size as a
// decimal string.
func (m *UploadedMedia) FileItem(fileName string) Item {
	return Item{Type: ItemFile, FileItem: &FileItem{
		Media: m.CDNMedia(), FileName: fileName, Len: DecimalString(strconv.FormatInt(m.RawSize, 10)),
	}}
}

// UploadMedia encrypts r.Data with a fresh key, asks getuploadurl for an
// upload reference and uploads the ciphertext to the CDN.
func (c *Client) UploadMedia(ctx context.Context, r UploadRequest) (*UploadedMedia, error) {
	if int64(len(r.Data)) > c.cfg.MaxMediaBytes {
		return nil, &Error{Code: CodeInvalidInput, Op: opGetUploadURL, Err: errors.New("media exceeds the configured size cap")}
	}
	if r.ToUserID == "" {
		return nil, &Error{Code: CodeInvalidInput, Op: opGetUploadURL, Err: errors.New("recipient is empty")}
	}
	key, err := NewMediaKey()
	if err != nil {
		return nil, &Error{Code: CodeMedia, Op: opGetUploadURL, Err: err}
	}
	var fk [16]byte
	_, _ = rand.Read(fk[:]) // crypto/rand.Read never fails (Go ≥1.24)
	cipher, err := EncryptECB(key, r.Data)
	if err != nil {
		return nil, &Error{Code: CodeMedia, Op: opGetUploadURL, Err: err}
	}
	sum := md5.Sum(r.Data)
	m := &UploadedMedia{
		MediaType:  r.MediaType,
		FileKey:    hex.EncodeToString(fk[:]),
		AESKey:     HexKey(key),
		RawSize:    int64(len(r.Data)),
		CipherSize: int64(len(cipher)),
		RawMD5:     hex.EncodeToString(sum[:]),
	}
	up, err := c.GetUploadURL(ctx, UploadURLRequest{
		FileKey: m.FileKey, MediaType: r.MediaType, ToUserID: r.ToUserID,
		RawSize: m.RawSize, RawFileMD5: m.RawMD5, FileSize: PaddedSize(m.RawSize), AESKey: m.AESKey,
	})
	if err != nil {
		return nil, err
	}
	m.EncryptQueryParam, err = c.UploadToCDN(ctx, up, m.FileKey, cipher)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// UploadToCDN POSTs ciphertext to the upload URL (upload_full_url when
// present, else <CDN base>/upload?encrypted_query_param=…&filekey=…) and
// returns the x-encrypted-param header. A 4xx answer is permanent (its
// x-error-message is in Error.Errmsg); 5xx and transport failures are tried
// up to Config.CDNUploadAttempts times.
func (c *Client) UploadToCDN(ctx context.Context, up *UploadURL, fileKey string, ciphertext []byte) (string, error) {
	target, err := c.uploadTarget(up, fileKey)
	if err != nil {
		return "", err
	}
	var last error
	for attempt := 1; attempt <= c.cfg.CDNUploadAttempts; attempt++ {
		if attempt > 1 {
			if err := pause.For(ctx, c.cfg.CDNRetryDelay); err != nil {
				return "", &Error{Code: CodeNotSent, Op: opCDNUpload, Err: err}
			}
		}
		resp, err := c.do(ctx, request{
			op: opCDNUpload, method: http.MethodPost, url: target, body: ciphertext,
			ctype: "application/octet-stream", timeout: c.cfg.CDNTimeout, limit: c.cfg.MaxBodyBytes,
		})
		if err == nil {
			return parseUploadResponse(resp.header)
		}
		last = err
		if !IsTransient(err) || ctx.Err() != nil {
			return "", err
		}
	}
	return "", last
}

// uploadTarget picks the upload URL.
func (c *Client) uploadTarget(up *UploadURL, fileKey string) (string, error) {
	if up == nil {
		return "", &Error{Code: CodeInvalidInput, Op: opCDNUpload, Err: errors.New("no upload URL")}
	}
	if up.UploadFullURL != "" {
		u, err := url.Parse(up.UploadFullURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "", &Error{Code: CodeMalformedBody, Op: opCDNUpload, Err: errors.New("upload_full_url is not an absolute http(s) URL")}
		}
		return up.UploadFullURL, nil
	}
	if up.UploadParam == "" {
		return "", &Error{Code: CodeInvalidInput, Op: opCDNUpload, Err: errors.New("no upload URL")}
	}
	return c.cdnURL("upload", "encrypted_query_param="+url.QueryEscape(up.UploadParam)+
		"&filekey="+url.QueryEscape(fileKey)), nil
}

// cdnURL joins path and a raw query below the CDN base.
func (c *Client) cdnURL(path, rawQuery string) string {
	u := *c.cdn
	u.Path = c.cdn.Path + path
	u.RawPath = ""
	u.RawQuery = rawQuery
	return u.String()
}

// DownloadMedia GETs a CDN object (media.full_url when present, else
// <CDN base>/download?encrypted_query_param=…) and decrypts it with key. A
// nil key returns the object as stored (plaintext). The body is capped at
// Config.MaxMediaBytes.
func (c *Client) DownloadMedia(ctx context.Context, media *CDNMedia, key []byte) ([]byte, error) {
	if media == nil || (media.FullURL == "" && media.EncryptQueryParam == "") {
		return nil, &Error{Code: CodeInvalidInput, Op: opCDNDownload, Err: errors.New("no CDN reference")}
	}
	target := media.FullURL
	if target != "" {
		u, err := url.Parse(target)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, &Error{Code: CodeInvalidInput, Op: opCDNDownload, Err: errors.New("full_url is not an absolute http(s) URL")}
		}
	} else {
		target = c.cdnURL("download", "encrypted_query_param="+url.QueryEscape(media.EncryptQueryParam))
	}
	resp, err := c.do(ctx, request{
		op: opCDNDownload, method: http.MethodGet, url: target,
		timeout: c.cfg.CDNTimeout, limit: c.cfg.MaxMediaBytes,
	})
	if err != nil {
		return nil, err
	}
	return decryptMedia(resp.body, key)
}

// DownloadItem downloads and decrypts the media of an inbound item, choosing
// the key as ItemMedia does.
func (c *Client) DownloadItem(ctx context.Context, it *Item) ([]byte, error) {
	media, key, err := ItemMedia(it)
	if err != nil {
		return nil, err
	}
	return c.DownloadMedia(ctx, media, key)
}

// decryptMedia decrypts a downloaded object; a nil key means plaintext.
func decryptMedia(data, key []byte) ([]byte, error) {
	if key == nil {
		return data, nil
	}
	plain, err := DecryptECB(key, data)
	if err != nil {
		return nil, &Error{Code: CodeMedia, Op: opCDNDownload, Err: err}
	}
	return plain, nil
}
