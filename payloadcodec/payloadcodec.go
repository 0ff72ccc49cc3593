// Package payloadcodec encrypts every payload ilinkflow puts in Temporal (workflow and
// activity inputs and results, signals, updates, queries, memos) with AES-256-GCM, so
// users' message text and agents' replies are never stored in plaintext in Temporal's
// history.
//
// [Codec] implements converter.PayloadCodec. Encode marshals each payload (metadata and
// data) and seals it under the current key generation with a fresh random 12-byte
// nonce; the result is a payload with metadata encoding [Encoding] and [MetaGeneration]
// (the key generation, decimal) whose data is nonce||ciphertext||tag. The additional
// authenticated data binds the key generation, so relabelling a payload with another
// generation does not open it. Decode opens such payloads with any generation in the
// ring and passes every other payload through unchanged, so histories written before
// the codec was turned on still decode and replay.
//
// The keys are derived with HKDF from the sealing key ring (package sealing, environment
// ILINKFLOW_SEALING_KEYS) under the label [KeyLabel]: one codec key per sealing
// generation, never equal to the sealing key. Rotating the sealing keys rotates the
// codec keys: the highest generation encodes, every generation in the ring decodes.
//
// [DataConverter] wraps the SDK's default data converter with the codec; every Temporal
// client that reads or writes ilinkflow's workflows (the worker, the operator commands,
// agents) must dial with it. [NewHTTPHandler] serves the codec to the Temporal UI and CLI
// (--codec-endpoint) behind a bearer token.
package payloadcodec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"
	"strconv"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

const (
	// Encoding is the metadata "encoding" of an encrypted payload.
	Encoding = "binary/ilinkflow-aesgcm"
	// MetaGeneration is the metadata key holding the key generation (decimal) that
	// encrypted a payload.
	MetaGeneration = "ilinkflow-key-generation"
	// KeyLabel is the HKDF label deriving the codec keys from the sealing keys.
	KeyLabel = "ilinkflow/payload-codec"

	nonceSize = 12
	tagSize   = 16
	aadPrefix = "ilinkflow/payload-codec/v1"
)

// Error codes carried by [Error].
const (
	// CodeUnknownGeneration: a payload was encrypted with a key generation that is not
	// in the ring (a retired or foreign key).
	CodeUnknownGeneration = "payload_codec_unknown_generation"
	// CodeDecryptFailed: an encrypted payload is malformed or does not authenticate
	// (tampered data, relabelled generation, wrong key).
	CodeDecryptFailed = "payload_codec_decrypt_failed"
	// CodeEncryptFailed: a payload could not be encrypted.
	CodeEncryptFailed = "payload_codec_encrypt_failed"
	// CodeInvalidInput: a caller passed an invalid argument (nil keyring, ...).
	CodeInvalidInput = string(vocab.CodeInvalidInput)
)

// Error is the error type of this package. Code is stable and one of the Code*
// constants; Msg never contains key material, plaintext or ciphertext.
type Error struct {
	Code string
	Msg  string
}

// Error returns "payloadcodec: " followed by Msg.
func (e *Error) Error() string { return "payloadcodec: " + e.Msg }

// Is reports whether target is an *Error with the same Code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinel errors; match them with errors.Is.
var (
	ErrUnknownGeneration error = &Error{Code: CodeUnknownGeneration, Msg: "no key for the payload's generation"}
	ErrDecryptFailed     error = &Error{Code: CodeDecryptFailed, Msg: "cannot decrypt payload"}
	ErrEncryptFailed     error = &Error{Code: CodeEncryptFailed, Msg: "cannot encrypt payload"}
	ErrInvalidInput      error = &Error{Code: CodeInvalidInput, Msg: "invalid input"}
)

func errf(code, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Codec is the AES-256-GCM payload codec. It is immutable and safe for concurrent use,
// and prints only its generations.
type Codec struct {
	current int32
	aeads   map[int32]cipher.AEAD
}

var _ converter.PayloadCodec = (*Codec)(nil)

// New derives the codec keys from the sealing key ring.
func New(keys *sealing.Keyring) (*Codec, error) {
	if keys == nil {
		return nil, errf(CodeInvalidInput, "nil keyring")
	}
	current, subkeys, err := keys.DeriveKeys(KeyLabel)
	if err != nil {
		return nil, errf(CodeInvalidInput, "cannot derive the codec keys")
	}
	c := &Codec{current: current, aeads: make(map[int32]cipher.AEAD, len(subkeys))}
	for gen, key := range subkeys {
		block, err := aes.NewCipher(key)
		clear(key)
		if err != nil {
			return nil, errf(CodeInvalidInput, "generation %d: cannot create cipher", gen)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, errf(CodeInvalidInput, "generation %d: cannot create GCM", gen)
		}
		c.aeads[gen] = aead
	}
	return c, nil
}

// DataConverter returns the SDK's default data converter wrapped with the codec of keys:
// the data converter of every Temporal client ilinkflow dials.
func DataConverter(keys *sealing.Keyring) (converter.DataConverter, error) {
	c, err := New(keys)
	if err != nil {
		return nil, err
	}
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c), nil
}

// Current returns the generation that encodes.
func (c *Codec) Current() int32 { return c.current }

// String describes the codec by its current generation only.
func (c *Codec) String() string {
	return fmt.Sprintf("payloadcodec.Codec{current: %d}", c.current)
}

func aad(gen int32) []byte {
	b := append([]byte(aadPrefix), 0)
	return strconv.AppendInt(b, int64(gen), 10)
}

// Encode encrypts every payload under the current generation.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return payloads, errf(CodeEncryptFailed, "payload %d: cannot marshal", i)
		}
		buf := make([]byte, nonceSize, nonceSize+len(plain)+tagSize)
		if _, err := rand.Read(buf); err != nil {
			return payloads, errf(CodeEncryptFailed, "cannot read random nonce")
		}
		buf = c.aeads[c.current].Seal(buf, buf[:nonceSize], plain, aad(c.current))
		clear(plain)
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(Encoding),
				MetaGeneration:             []byte(strconv.FormatInt(int64(c.current), 10)),
			},
			Data: buf,
		}
	}
	return out, nil
}

// Decode decrypts every payload with encoding [Encoding] under its generation and passes
// every other payload through unchanged. Errors match ErrUnknownGeneration or
// ErrDecryptFailed and never contain payload bytes.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != Encoding {
			out[i] = p
			continue
		}
		genText := string(p.GetMetadata()[MetaGeneration])
		g, err := strconv.ParseInt(genText, 10, 32)
		if err != nil || g < 1 || strconv.FormatInt(g, 10) != genText {
			return payloads, errf(CodeDecryptFailed, "payload %d: malformed key generation", i)
		}
		gen := int32(g)
		aead, ok := c.aeads[gen]
		if !ok {
			return payloads, errf(CodeUnknownGeneration, "payload %d: no key for generation %d", i, gen)
		}
		data := p.GetData()
		if len(data) < nonceSize+tagSize {
			return payloads, errf(CodeDecryptFailed, "payload %d: ciphertext is %d bytes, too short", i, len(data))
		}
		plain, err := aead.Open(nil, data[:nonceSize], data[nonceSize:], aad(gen))
		if err != nil {
			return payloads, errf(CodeDecryptFailed, "payload %d: authentication failed (wrong key or generation, or tampered data)", i)
		}
		var orig commonpb.Payload
		err = proto.Unmarshal(plain, &orig)
		clear(plain)
		if err != nil {
			return payloads, errf(CodeDecryptFailed, "payload %d: decrypted payload is malformed", i)
		}
		out[i] = &orig
	}
	return out, nil
}
