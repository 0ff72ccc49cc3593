package ilink

import (
	"crypto/aes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
)

// KeySize is the AES-128 key size of CDN media.
const KeySize = 16

// Media crypto errors (wrapped in an *Error with CodeMedia by the client).
var (
	errKeySize    = errors.New("AES key must be 16 bytes")
	errCipherSize = errors.New("ciphertext length is not a positive multiple of 16")
	errPadding    = errors.New("invalid PKCS#7 padding")
	errKeyFormat  = errors.New("aes_key is neither base64 of 16 bytes nor base64 of 32 hex characters")
)

// NewMediaKey returns a random 16-byte AES key.
func NewMediaKey() ([]byte, error) {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("media key: %w", err)
	}
	return k, nil
}

// PaddedSize returns the AES-128-ECB/PKCS#7 ciphertext size of rawSize
// plaintext bytes: ((rawSize/16)+1)*16, a full extra block when aligned.
func PaddedSize(rawSize int64) int64 {
	return (rawSize/aes.BlockSize + 1) * aes.BlockSize
}

// EncryptECB encrypts plaintext with AES-128 in ECB mode and PKCS#7 padding.
func EncryptECB(key, plaintext []byte) ([]byte, error) {
	if len(key) != KeySize {
		return nil, errKeySize
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("aes: %w", err)
	}
	pad := aes.BlockSize - len(plaintext)%aes.BlockSize
	out := make([]byte, len(plaintext)+pad)
	copy(out, plaintext)
	for i := len(plaintext); i < len(out); i++ {
		out[i] = byte(pad)
	}
	for i := 0; i < len(out); i += aes.BlockSize {
		block.Encrypt(out[i:i+aes.BlockSize], out[i:i+aes.BlockSize])
	}
	return out, nil
}

// DecryptECB decrypts AES-128-ECB ciphertext and strips PKCS#7 padding.
func DecryptECB(key, ciphertext []byte) ([]byte, error) {
	if len(key) != KeySize {
		return nil, errKeySize
	}
	if len(ciphertext) == 0 || len(ciphertext)%aes.BlockSize != 0 {
		return nil, errCipherSize
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("aes: %w", err)
	}
	out := make([]byte, len(ciphertext))
	for i := 0; i < len(out); i += aes.BlockSize {
		block.Decrypt(out[i:i+aes.BlockSize], ciphertext[i:i+aes.BlockSize])
	}
	pad := int(out[len(out)-1])
	if pad == 0 || pad > aes.BlockSize {
		return nil, errPadding
	}
	for _, b := range out[len(out)-pad:] {
		if int(b) != pad {
			return nil, errPadding
		}
	}
	return out[:len(out)-pad], nil
}

// HexKey returns the key as 32 lower-case hex characters, the form of
// getuploadurl's aeskey and of an inbound image_item.aeskey.
func HexKey(key []byte) Secret { return Secret(hex.EncodeToString(key)) }

// OutboundAESKey returns the aes_key of outbound media: base64 of the
// 32-character hex key string (44 characters), not base64 of the raw bytes.
func OutboundAESKey(key []byte) Secret {
	return Secret(base64.StdEncoding.EncodeToString([]byte(hex.EncodeToString(key))))
}

// DecodeAESKey decodes a media aes_key in either encoding: base64 of 16 raw
// bytes, or base64 of a 32-character hex string.
func DecodeAESKey(s Secret) ([]byte, error) {
	raw, err := decodeBase64(s.Reveal())
	if err != nil {
		return nil, errKeyFormat
	}
	switch len(raw) {
	case KeySize:
		return raw, nil
	case 2 * KeySize:
		k, err := hex.DecodeString(string(raw))
		if err != nil {
			return nil, errKeyFormat
		}
		return k, nil
	}
	return nil, errKeyFormat
}

// DecodeHexKey decodes a 32-character hex key (image_item.aeskey).
func DecodeHexKey(s Secret) ([]byte, error) {
	if len(s) != 2*KeySize {
		return nil, errKeyFormat
	}
	k, err := hex.DecodeString(s.Reveal())
	if err != nil {
		return nil, errKeyFormat
	}
	return k, nil
}

// decodeBase64 accepts standard or URL alphabet, padded or not.
func decodeBase64(s string) ([]byte, error) {
	if len(s) > 256 {
		return nil, errKeyFormat
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errKeyFormat
}

// ItemMedia selects the CDN object of an inbound media item and its AES key:
// for images image_item.aeskey (hex) first, then media.aes_key; for voice,
// file and video media.aes_key. A nil key with a nil error means the object
// carries no key and is stored as plaintext.
func ItemMedia(it *Item) (*CDNMedia, []byte, error) {
	var media *CDNMedia
	var hexKey Secret
	switch {
	case it == nil:
	case it.ImageItem != nil:
		media, hexKey = it.ImageItem.Media, it.ImageItem.AESKey
	case it.FileItem != nil:
		media = it.FileItem.Media
	case it.VideoItem != nil:
		media = it.VideoItem.Media
	case it.VoiceItem != nil:
		media = it.VoiceItem.Media
	}
	if media == nil || (media.FullURL == "" && media.EncryptQueryParam == "") {
		return nil, nil, &Error{Code: CodeInvalidInput, Op: "media", Err: errors.New("item carries no CDN media")}
	}
	if hexKey != "" {
		k, err := DecodeHexKey(hexKey)
		if err == nil {
			return media, k, nil
		}
		if media.AESKey == "" {
			return nil, nil, &Error{Code: CodeMedia, Op: "media", Err: err}
		}
	}
	if media.AESKey == "" {
		return media, nil, nil
	}
	k, err := DecodeAESKey(media.AESKey)
	if err != nil {
		return nil, nil, &Error{Code: CodeMedia, Op: "media", Err: err}
	}
	return media, k, nil
}
