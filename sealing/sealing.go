// Package sealing seals ilinkflow's secrets (bot tokens, context tokens and
// image locators) at rest with AES-256-GCM under a generational key ring.
//
// Every ciphertext is bound by its additional authenticated data to a purpose,
// a binding (the row it belongs to) and the key generation that sealed it, so a
// ciphertext copied to another row or purpose, or relabelled with another
// generation, does not open. Plaintext is carried in [Secret], which never
// prints, logs or marshals its value. Errors never contain key material,
// plaintext or ciphertext.
package sealing

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/ilinkflow/ilinkflow/vocab"
)

// Redacted is what a [Secret] prints, logs and marshals instead of its value.
const Redacted = "[REDACTED]"

// Error codes carried by [Error].
const (
	CodeOpenFailed   = "sealing_open_failed"
	CodeNoKey        = "sealing_no_key"
	CodeMalformedKey = "sealing_malformed_key"
	CodeKeyFile      = "sealing_key_file"
	CodeInvalidInput = string(vocab.CodeInvalidInput)
)

// Error is the error type of this package. Code is stable and one of the Code*
// constants; Msg is a human-readable description free of secret material; Err,
// when set, is a wrapped cause (for example the error from reading a key file).
type Error struct {
	Code string
	Msg  string
	Err  error
}

// Error returns "sealing: " followed by Msg.
func (e *Error) Error() string { return "sealing: " + e.Msg }

// Unwrap returns the wrapped cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same Code, so that
// errors.Is(err, ErrOpen) matches every open failure.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinel errors; match them with errors.Is.
var (
	// ErrOpen: a sealed value could not be opened (unknown generation, wrong
	// purpose or binding, relabelled generation, or tampered data).
	ErrOpen error = &Error{Code: CodeOpenFailed, Msg: "cannot open sealed value"}
	// ErrNoKey: no sealing key is configured.
	ErrNoKey error = &Error{Code: CodeNoKey, Msg: "no sealing key configured"}
	// ErrMalformedKey: the key configuration is malformed (format, base64,
	// length, generation, duplicate generation, or conflicting settings).
	ErrMalformedKey error = &Error{Code: CodeMalformedKey, Msg: "malformed sealing key configuration"}
	// ErrKeyFile: the key file named by EnvKeysFile could not be read.
	ErrKeyFile error = &Error{Code: CodeKeyFile, Msg: "cannot read sealing key file"}
	// ErrInvalidInput: a caller passed an invalid argument (unknown purpose,
	// empty binding, nil keyring, ...).
	ErrInvalidInput error = &Error{Code: CodeInvalidInput, Msg: "invalid input"}
)

func errf(code, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// ---------------------------------------------------------------------------
// Secret

// Secret holds a plaintext secret and never prints it: String, GoString,
// Format (every verb), MarshalJSON, MarshalText and LogValue all yield
// [Redacted]. UnmarshalJSON and UnmarshalText refuse, so a redacted value is
// never read back as a secret. The zero value is the empty secret.
type Secret struct {
	// A pointer to a string rather than a string: fmt prints a pointer to a
	// non-composite value as an address, even for a Secret in an unexported
	// field (where fmt cannot call Format) and even under a bad verb, while
	// reflect.DeepEqual still compares the contents.
	p *string
}

// NewSecret wraps plaintext. An empty plaintext gives the zero Secret.
func NewSecret(plaintext string) Secret {
	if plaintext == "" {
		return Secret{}
	}
	return Secret{p: &plaintext}
}

// Reveal returns the plaintext. It is the only way to read a Secret.
func (s Secret) Reveal() string {
	if s.p == nil {
		return ""
	}
	return *s.p
}

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s.p == nil }

// Equal reports whether s and o hold the same plaintext, in time that does not
// depend on the contents (only on the lengths).
func (s Secret) Equal(o Secret) bool {
	return subtle.ConstantTimeCompare([]byte(s.Reveal()), []byte(o.Reveal())) == 1
}

// String returns [Redacted].
func (s Secret) String() string { return Redacted }

// GoString returns [Redacted].
func (s Secret) GoString() string { return Redacted }

// Format writes [Redacted] for every verb (quoted for %q).
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		_, _ = io.WriteString(f, strconv.Quote(Redacted))
		return
	}
	_, _ = io.WriteString(f, Redacted)
}

// LogValue implements slog.LogValuer and returns [Redacted].
func (s Secret) LogValue() slog.Value { return slog.StringValue(Redacted) }

// MarshalJSON returns the JSON string "[REDACTED]".
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(Redacted)), nil }

// MarshalText returns [Redacted].
func (s Secret) MarshalText() ([]byte, error) { return []byte(Redacted), nil }

// UnmarshalJSON always fails: a Secret is never decoded from JSON.
func (s *Secret) UnmarshalJSON([]byte) error {
	return errf(CodeInvalidInput, "a Secret cannot be decoded from JSON")
}

// UnmarshalText always fails: a Secret is never decoded from text.
func (s *Secret) UnmarshalText([]byte) error {
	return errf(CodeInvalidInput, "a Secret cannot be decoded from text")
}

// ---------------------------------------------------------------------------
// Sealing

// Purpose names what a sealed value is; it is part of the authenticated data.
type Purpose string

// The purposes ilinkflow seals.
const (
	PurposeBotToken     Purpose = "bot_token"
	PurposeContextToken Purpose = "context_token"
	PurposeImageLocator Purpose = "image_locator"
	// PurposeOutboundMedia seals the bytes of a media reply staged for its send.
	PurposeOutboundMedia Purpose = "outbound_media"
	// PurposeMediaUpload seals the CDN reference and AES key of uploaded media.
	PurposeMediaUpload Purpose = "media_upload"
	// PurposeQuarantinedPage seals the messages of a page the store could not commit.
	PurposeQuarantinedPage Purpose = "quarantined_page"
	// PurposeRouteSecret seals the signing secret of a bot's webhook route, bound to the
	// account key.
	PurposeRouteSecret Purpose = "route_secret"
	// PurposeMCPSession seals the agent session token of a message offered to an MCP
	// agent, bound to the message key.
	PurposeMCPSession Purpose = "mcp_session"
	// PurposeHeldReply seals the content of a held reply, bound to its id.
	PurposeHeldReply Purpose = "held_reply"
	// PurposeILinkClientSession seals the agent session token of a message queued for an
	// iLink client, bound to the message key.
	PurposeILinkClientSession Purpose = "ilink_client_session"
	// PurposeILinkClientUpload seals the bytes an iLink client uploaded to the facade's
	// CDN, bound to the upload's id.
	PurposeILinkClientUpload Purpose = "ilink_client_upload"
)

func (p Purpose) valid() bool {
	switch p {
	case PurposeBotToken, PurposeContextToken, PurposeImageLocator, PurposeOutboundMedia, PurposeMediaUpload, PurposeQuarantinedPage,
		PurposeRouteSecret, PurposeMCPSession, PurposeHeldReply, PurposeILinkClientSession, PurposeILinkClientUpload:
		return true
	}
	return false
}

// Sealed is what is stored: the key generation that sealed it, the 12-byte GCM
// nonce, and ciphertext||tag.
type Sealed struct {
	KeyGeneration int32
	Nonce         []byte
	Ciphertext    []byte
}

const (
	keySize   = 32
	nonceSize = 12
	tagSize   = 16
	aadPrefix = "ilinkflow/seal/v1"
)

// Keyring holds AES-256 keys by generation; the current generation seals and
// every generation opens. It is immutable and safe for concurrent use. It
// prints only its generations, never key material.
type Keyring struct {
	current int32
	aeads   map[int32]cipher.AEAD
	// prks holds, per generation, the HKDF-SHA256 pseudorandom key extracted from the
	// sealing key, from which DeriveKeys expands subkeys for other uses (never the
	// sealing key itself).
	prks map[int32][]byte
}

// NewKeyring builds a keyring from keys by generation. Each key must be exactly
// 32 bytes, every generation >= 1, and current must be present. The keys are
// copied (expanded into ciphers); the caller may wipe its map afterwards.
func NewKeyring(current int32, keys map[int32][]byte) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errf(CodeNoKey, "no keys given")
	}
	k := &Keyring{current: current, aeads: make(map[int32]cipher.AEAD, len(keys)), prks: make(map[int32][]byte, len(keys))}
	for _, gen := range slices.Sorted(maps.Keys(keys)) {
		key := keys[gen]
		if gen < 1 {
			return nil, errf(CodeMalformedKey, "generation %d: generation must be >= 1", gen)
		}
		if len(key) != keySize {
			return nil, errf(CodeMalformedKey, "generation %d: key is %d bytes, want %d", gen, len(key), keySize)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, errf(CodeMalformedKey, "generation %d: cannot create cipher", gen)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, errf(CodeMalformedKey, "generation %d: cannot create GCM", gen)
		}
		k.aeads[gen] = aead
		prk, err := hkdf.Extract(sha256.New, key, []byte(hkdfSalt))
		if err != nil {
			return nil, errf(CodeMalformedKey, "generation %d: cannot derive", gen)
		}
		k.prks[gen] = prk
	}
	if _, ok := k.aeads[current]; !ok {
		return nil, errf(CodeMalformedKey, "current generation %d has no key", current)
	}
	return k, nil
}

// hkdfSalt is the HKDF salt of DeriveKeys.
const hkdfSalt = "ilinkflow/keyring/v1"

// DeriveKeys derives from every generation's sealing key an independent 32-byte
// subkey for another use named by label (HKDF-SHA256, label as the info), so a key
// used elsewhere (e.g. label "ilinkflow/payload-codec") is never the sealing key and
// reveals nothing about it. It returns the current generation and the subkeys by
// generation; the caller owns (and may wipe) the returned slices. An empty label or a
// nil keyring is an error matching ErrInvalidInput.
func (k *Keyring) DeriveKeys(label string) (int32, map[int32][]byte, error) {
	if k == nil || k.prks == nil {
		return 0, nil, errf(CodeInvalidInput, "nil or zero keyring")
	}
	if label == "" {
		return 0, nil, errf(CodeInvalidInput, "empty derivation label")
	}
	out := make(map[int32][]byte, len(k.prks))
	for gen, prk := range k.prks {
		sub, err := hkdf.Expand(sha256.New, prk, label, keySize)
		if err != nil {
			return 0, nil, errf(CodeInvalidInput, "generation %d: cannot derive", gen)
		}
		out[gen] = sub
	}
	return k.current, out, nil
}

// Current returns the generation that seals.
func (k *Keyring) Current() int32 { return k.current }

// Has reports whether the keyring holds a key of the given generation (false on a nil
// keyring). A value sealed under a generation it holds may still fail to open: the key
// under that generation may not be the one that sealed it.
func (k *Keyring) Has(generation int32) bool {
	if k == nil {
		return false
	}
	_, ok := k.aeads[generation]
	return ok
}

// String describes the keyring by its generations only.
func (k *Keyring) String() string {
	if k == nil {
		return "sealing.Keyring(nil)"
	}
	return fmt.Sprintf("sealing.Keyring{current: %d, generations: %v}", k.current, slices.Sorted(maps.Keys(k.aeads)))
}

// GoString is the same as String.
func (k *Keyring) GoString() string { return k.String() }

// Format writes String for every verb, so no key schedule is ever printed.
func (k *Keyring) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, k.String()) }

// LogValue implements slog.LogValuer with String.
func (k *Keyring) LogValue() slog.Value { return slog.StringValue(k.String()) }

func aad(purpose Purpose, binding string, gen int32) []byte {
	b := make([]byte, 0, len(aadPrefix)+len(purpose)+len(binding)+14)
	b = append(b, aadPrefix...)
	b = append(b, 0)
	b = append(b, purpose...)
	b = append(b, 0)
	b = append(b, binding...)
	b = append(b, 0)
	return strconv.AppendInt(b, int64(gen), 10)
}

func checkArgs(k *Keyring, purpose Purpose, binding string) error {
	switch {
	case k == nil || k.aeads == nil:
		return errf(CodeInvalidInput, "nil or zero keyring")
	case !purpose.valid():
		return errf(CodeInvalidInput, "unknown purpose %q", string(purpose))
	case binding == "":
		return errf(CodeInvalidInput, "empty binding")
	case strings.IndexByte(binding, 0) >= 0:
		return errf(CodeInvalidInput, "binding contains a NUL byte")
	}
	return nil
}

// Seal encrypts plaintext under the current key with a fresh random nonce,
// authenticating purpose, binding (the owning row, e.g. an account key) and
// the generation. It refuses an unknown purpose or an empty binding.
func (k *Keyring) Seal(purpose Purpose, binding string, plaintext Secret) (Sealed, error) {
	if err := checkArgs(k, purpose, binding); err != nil {
		return Sealed{}, err
	}
	nonce := make([]byte, nonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return Sealed{}, errf(CodeInvalidInput, "cannot read random nonce")
	}
	ct := k.aeads[k.current].Seal(nil, nonce, []byte(plaintext.Reveal()), aad(purpose, binding, k.current))
	return Sealed{KeyGeneration: k.current, Nonce: nonce, Ciphertext: ct}, nil
}

// Open decrypts s, which must have been sealed with the same purpose and
// binding. Any failure to open (unknown generation, wrong purpose or binding,
// relabelled generation, malformed or tampered data) is an error matching
// ErrOpen and contains no key, plaintext or ciphertext bytes.
func (k *Keyring) Open(purpose Purpose, binding string, s Sealed) (Secret, error) {
	if err := checkArgs(k, purpose, binding); err != nil {
		return Secret{}, err
	}
	aead, ok := k.aeads[s.KeyGeneration]
	switch {
	case !ok:
		return Secret{}, errf(CodeOpenFailed, "cannot open sealed value: no key for generation %d", s.KeyGeneration)
	case len(s.Nonce) != nonceSize:
		return Secret{}, errf(CodeOpenFailed, "cannot open sealed value: nonce is %d bytes, want %d", len(s.Nonce), nonceSize)
	case len(s.Ciphertext) < tagSize:
		return Secret{}, errf(CodeOpenFailed, "cannot open sealed value: ciphertext is %d bytes, shorter than the tag", len(s.Ciphertext))
	}
	pt, err := aead.Open(nil, s.Nonce, s.Ciphertext, aad(purpose, binding, s.KeyGeneration))
	if err != nil {
		return Secret{}, errf(CodeOpenFailed, "cannot open sealed value: authentication failed (wrong key, purpose, binding or generation, or tampered data)")
	}
	sec := NewSecret(string(pt))
	clear(pt)
	return sec, nil
}

// ---------------------------------------------------------------------------
// Configuration

// EnvKeys names the environment variable holding the key spec, e.g.
// "2:<base64 32 bytes>,1:<base64 32 bytes>".
const EnvKeys = "ILINKFLOW_SEALING_KEYS"

// EnvKeysFile names the environment variable holding the path of a file with
// the same format as EnvKeys; entries may also be separated by whitespace and
// newlines, and '#' starts a comment that runs to the end of the line.
const EnvKeysFile = "ILINKFLOW_SEALING_KEYS_FILE"

// ParseKeyring parses a key spec: entries "GENERATION:BASE64KEY" separated by
// commas or whitespace, with '#' comments to the end of a line. Keys are
// standard base64, padded or not, and decode to 32 bytes. The highest
// generation is current. Errors match ErrNoKey (no entries) or ErrMalformedKey
// and never echo key text; entries are named by position and generation.
func ParseKeyring(spec string) (*Keyring, error) {
	keys := map[int32][]byte{}
	var current int32
	n := 0
	for line := range strings.Lines(spec) {
		line, _, _ = strings.Cut(line, "#")
		for _, entry := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
			n++
			genText, keyText, ok := strings.Cut(entry, ":")
			if !ok {
				return nil, errf(CodeMalformedKey, "entry %d: want GENERATION:BASE64KEY", n)
			}
			gen, ok := parseGeneration(genText)
			if !ok {
				return nil, errf(CodeMalformedKey, "entry %d: generation must be a decimal number from 1 to %d", n, math.MaxInt32)
			}
			if _, dup := keys[gen]; dup {
				return nil, errf(CodeMalformedKey, "entry %d: duplicate generation %d", n, gen)
			}
			key, err := base64.StdEncoding.Strict().DecodeString(keyText)
			if err != nil {
				key, err = base64.RawStdEncoding.Strict().DecodeString(keyText)
			}
			if err != nil {
				return nil, errf(CodeMalformedKey, "entry %d (generation %d): key is not valid standard base64", n, gen)
			}
			if len(key) != keySize {
				return nil, errf(CodeMalformedKey, "entry %d (generation %d): key is %d bytes, want %d", n, gen, len(key), keySize)
			}
			keys[gen] = key
			current = max(current, gen)
		}
	}
	if len(keys) == 0 {
		return nil, errf(CodeNoKey, "no keys in key spec")
	}
	k, err := NewKeyring(current, keys)
	for _, key := range keys {
		clear(key)
	}
	return k, err
}

func parseGeneration(s string) (int32, bool) {
	if s == "" || len(s) > 10 || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	g, err := strconv.ParseInt(s, 10, 32)
	if err != nil || g < 1 {
		return 0, false
	}
	return int32(g), true
}

// LoadKeyring reads the keyring from the environment through getenv (os.Getenv
// when nil). Exactly one of EnvKeys and EnvKeysFile must be set (non-blank).
// Errors match ErrNoKey (neither set), ErrMalformedKey (both set, or a bad
// spec) or ErrKeyFile (the file cannot be read; the cause is wrapped).
func LoadKeyring(getenv func(string) string) (*Keyring, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	spec, path := getenv(EnvKeys), strings.TrimSpace(getenv(EnvKeysFile))
	switch {
	case strings.TrimSpace(spec) == "" && path == "":
		return nil, errf(CodeNoKey, "no sealing key configured: set %s or %s", EnvKeys, EnvKeysFile)
	case strings.TrimSpace(spec) != "" && path != "":
		return nil, errf(CodeMalformedKey, "both %s and %s are set; set exactly one", EnvKeys, EnvKeysFile)
	}
	source := EnvKeys
	if path != "" {
		source = EnvKeysFile
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, &Error{Code: CodeKeyFile, Msg: fmt.Sprintf("%s: %v", EnvKeysFile, err), Err: err}
		}
		spec = string(b)
		clear(b)
	}
	k, err := ParseKeyring(spec)
	if e := (*Error)(nil); errors.As(err, &e) {
		return nil, &Error{Code: e.Code, Msg: source + ": " + e.Msg}
	}
	return k, err
}

// GenerateKeySpec returns "N:<base64>" for a fresh random 32-byte key of the
// given generation, for operators adding a key to EnvKeys or EnvKeysFile.
func GenerateKeySpec(generation int32) (string, error) {
	if generation < 1 {
		return "", errf(CodeInvalidInput, "generation must be >= 1, got %d", generation)
	}
	key := make([]byte, keySize)
	if _, err := rand.Read(key); err != nil {
		return "", errf(CodeInvalidInput, "cannot read random key")
	}
	spec := strconv.Itoa(int(generation)) + ":" + base64.StdEncoding.EncodeToString(key)
	clear(key)
	return spec, nil
}
