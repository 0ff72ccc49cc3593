package ilink

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"testing"
)

func TestPaddedSizeAddsAFullBlockWhenAligned(t *testing.T) {
	cases := map[int64]int64{0: 16, 1: 16, 15: 16, 16: 32, 17: 32, 31: 32, 32: 48, 1000: 1008}
	for raw, want := range cases {
		if got := PaddedSize(raw); got != want {
			t.Errorf("PaddedSize(%d) = %d, want %d", raw, got, want)
		}
	}
}

func TestEncryptECBMatchesFIPS197Vector(t *testing.T) {
	key, _ := hex.DecodeString("000102030405060708090a0b0c0d0e0f")
	pt, _ := hex.DecodeString("00112233445566778899aabbccddeeff")
	ct, err := EncryptECB(key, pt)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(ct[:16]); got != "69c4e0d86a7b0430d8cdb78070b4c55a" {
		t.Fatalf("first block %s", got)
	}
	if len(ct) != 32 {
		t.Fatalf("aligned input must gain a full padding block, got %d bytes", len(ct))
	}
}

func TestEncryptDecryptRoundTripsEverySize(t *testing.T) {
	key, err := NewMediaKey()
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n <= 49; n++ {
		pt := bytes.Repeat([]byte{byte(n)}, n)
		ct, err := EncryptECB(key, pt)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(ct)) != PaddedSize(int64(n)) {
			t.Fatalf("n=%d: ciphertext %d bytes, want %d", n, len(ct), PaddedSize(int64(n)))
		}
		back, err := DecryptECB(key, ct)
		if err != nil || !bytes.Equal(back, pt) {
			t.Fatalf("n=%d: round trip failed: %v", n, err)
		}
	}
}

func TestDecryptECBRejectsBadInput(t *testing.T) {
	key := make([]byte, 16)
	good, _ := EncryptECB(key, []byte("hello"))
	if _, err := DecryptECB(key[:15], good); !errors.Is(err, errKeySize) {
		t.Errorf("short key: %v", err)
	}
	if _, err := DecryptECB(key, good[:15]); !errors.Is(err, errCipherSize) {
		t.Errorf("short ciphertext: %v", err)
	}
	if _, err := DecryptECB(key, nil); !errors.Is(err, errCipherSize) {
		t.Errorf("empty ciphertext: %v", err)
	}
	other := bytes.Repeat([]byte{1}, 16)
	if _, err := DecryptECB(other, good); !errors.Is(err, errPadding) {
		// A wrong key yields random padding; 1 in 16ish could pass, this fixed key does not.
		t.Errorf("wrong key: %v", err)
	}
}

func TestOutboundAESKeyIsBase64OfTheHexKey(t *testing.T) {
	key, _ := hex.DecodeString("00112233445566778899aabbccddeeff")
	got := OutboundAESKey(key).Reveal()
	if len(got) != 44 {
		t.Fatalf("len %d, want 44", len(got))
	}
	dec, _ := base64.StdEncoding.DecodeString(got)
	if string(dec) != "00112233445566778899aabbccddeeff" {
		t.Fatalf("decodes to %q", dec)
	}
	m := UploadedMedia{AESKey: HexKey(key)}
	if m.CDNMedia().AESKey.Reveal() != got {
		t.Fatal("UploadedMedia.CDNMedia disagrees with OutboundAESKey")
	}
}

func TestDecodeAESKeyAcceptsBothEncodings(t *testing.T) {
	key, _ := hex.DecodeString("0f0e0d0c0b0a09080706050403020100")
	raw := Secret(base64.StdEncoding.EncodeToString(key))
	hexForm := Secret(base64.StdEncoding.EncodeToString([]byte(hex.EncodeToString(key))))
	for name, s := range map[string]Secret{"raw": raw, "hex": hexForm, "raw-unpadded": Secret(base64.RawStdEncoding.EncodeToString(key))} {
		got, err := DecodeAESKey(s)
		if err != nil || !bytes.Equal(got, key) {
			t.Errorf("%s: got %x, %v", name, got, err)
		}
	}
}

func TestDecodeAESKeyRejectsOtherShapes(t *testing.T) {
	for _, s := range []string{"", "!!!", base64.StdEncoding.EncodeToString(make([]byte, 24)),
		base64.StdEncoding.EncodeToString([]byte("zz112233445566778899aabbccddeeff"))} {
		if _, err := DecodeAESKey(Secret(s)); !errors.Is(err, errKeyFormat) {
			t.Errorf("%q: %v", s, err)
		}
	}
}

func TestItemMediaPrefersImageHexKey(t *testing.T) {
	hexKey := "00112233445566778899aabbccddeeff"
	other := base64.StdEncoding.EncodeToString(make([]byte, 16))
	it := &Item{Type: ItemImage, ImageItem: &ImageItem{AESKey: Secret(hexKey),
		Media: &CDNMedia{EncryptQueryParam: "p", AESKey: Secret(other)}}}
	_, key, err := ItemMedia(it)
	if err != nil || hex.EncodeToString(key) != hexKey {
		t.Fatalf("got %x, %v", key, err)
	}
	it.ImageItem.AESKey = ""
	_, key, err = ItemMedia(it)
	if err != nil || !bytes.Equal(key, make([]byte, 16)) {
		t.Fatalf("fallback to media.aes_key: %x, %v", key, err)
	}
}

func TestItemMediaWithoutKeyMeansPlaintext(t *testing.T) {
	it := &Item{Type: ItemImage, ImageItem: &ImageItem{Media: &CDNMedia{EncryptQueryParam: "p"}}}
	media, key, err := ItemMedia(it)
	if err != nil || key != nil || media == nil {
		t.Fatalf("got %v %x %v", media, key, err)
	}
	if got, err := decryptMedia([]byte("plain"), nil); err != nil || string(got) != "plain" {
		t.Fatalf("plaintext passthrough: %q %v", got, err)
	}
}

func TestItemMediaRejectsItemsWithoutMedia(t *testing.T) {
	for _, it := range []*Item{nil, {Type: ItemText, TextItem: &TextItem{Text: "x"}}, {Type: ItemFile, FileItem: &FileItem{}}} {
		if _, _, err := ItemMedia(it); CodeOf(err) != CodeInvalidInput {
			t.Errorf("%+v: %v", it, err)
		}
	}
	bad := &Item{Type: ItemFile, FileItem: &FileItem{Media: &CDNMedia{EncryptQueryParam: "p", AESKey: "!!"}}}
	if _, _, err := ItemMedia(bad); CodeOf(err) != CodeMedia {
		t.Errorf("bad key: %v", err)
	}
}

func TestOutboundMediaItemShapes(t *testing.T) {
	m := &UploadedMedia{AESKey: "00112233445566778899aabbccddeeff", EncryptQueryParam: "enc", RawSize: 100, CipherSize: 112}
	img := m.ImageItem()
	if img.Type != ItemImage || img.ImageItem.MidSize != 112 || img.ImageItem.Media.EncryptType != 1 {
		t.Errorf("image %+v", img.ImageItem)
	}
	f := m.FileItem("a.txt")
	if f.Type != ItemFile || f.FileItem.Len != "100" || f.FileItem.FileName != "a.txt" {
		t.Errorf("file %+v", f.FileItem)
	}
	v := m.VideoItem()
	if v.Type != ItemVideo || v.VideoItem.VideoSize != 112 {
		t.Errorf("video %+v", v.VideoItem)
	}
}
