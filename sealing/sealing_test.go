package sealing

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func testKeyText(b byte) string { return base64.StdEncoding.EncodeToString(testKey(b)) }

func mustKeyring(t testing.TB, current int32, keys map[int32][]byte) *Keyring {
	t.Helper()
	k, err := NewKeyring(current, keys)
	if err != nil {
		t.Fatalf("NewKeyring: %v", err)
	}
	return k
}

func wantCode(t *testing.T, err error, sentinel error, code string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("err = %v, want errors.Is %v", err, sentinel)
	}
	var e *Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("err = %#v, want *Error with code %q", err, code)
	}
}

const plain = "bot-token-0123456789-very-secret"

func TestCiphertextOpensOnlyWithSamePurposeBindingAndGeneration(t *testing.T) {
	// Generations 1 and 2 share the same key bytes, so only the generation in
	// the authenticated data stops a relabelled ciphertext from opening.
	k := mustKeyring(t, 2, map[int32][]byte{1: testKey(7), 2: testKey(7)})
	s, err := k.Seal(PurposeBotToken, "account-1", NewSecret(plain))
	if err != nil {
		t.Fatal(err)
	}
	if s.KeyGeneration != 2 || len(s.Nonce) != 12 || len(s.Ciphertext) != len(plain)+16 {
		t.Fatalf("sealed = gen %d, nonce %d bytes, ciphertext %d bytes", s.KeyGeneration, len(s.Nonce), len(s.Ciphertext))
	}
	got, err := k.Open(PurposeBotToken, "account-1", s)
	if err != nil || got.Reveal() != plain {
		t.Fatalf("Open = %q, %v; want the plaintext", got.Reveal(), err)
	}

	clone := func(s Sealed) Sealed {
		return Sealed{KeyGeneration: s.KeyGeneration, Nonce: bytes.Clone(s.Nonce), Ciphertext: bytes.Clone(s.Ciphertext)}
	}
	type attempt struct {
		name    string
		purpose Purpose
		binding string
		sealed  Sealed
	}
	attempts := []attempt{
		{"copied to another binding", PurposeBotToken, "account-2", s},
		{"binding prefix", PurposeBotToken, "account-", s},
		{"another purpose", PurposeContextToken, "account-1", s},
		{"relabelled generation", PurposeBotToken, "account-1", func() Sealed { c := clone(s); c.KeyGeneration = 1; return c }()},
		{"unknown generation", PurposeBotToken, "account-1", func() Sealed { c := clone(s); c.KeyGeneration = 3; return c }()},
		{"short nonce", PurposeBotToken, "account-1", func() Sealed { c := clone(s); c.Nonce = c.Nonce[:11]; return c }()},
		{"truncated ciphertext", PurposeBotToken, "account-1", func() Sealed { c := clone(s); c.Ciphertext = c.Ciphertext[:len(c.Ciphertext)-1]; return c }()},
		{"empty ciphertext", PurposeBotToken, "account-1", func() Sealed { c := clone(s); c.Ciphertext = nil; return c }()},
		{"flipped nonce byte", PurposeBotToken, "account-1", func() Sealed { c := clone(s); c.Nonce[0] ^= 1; return c }()},
	}
	for i := range s.Ciphertext {
		c := clone(s)
		c.Ciphertext[i] ^= 0x80
		attempts = append(attempts, attempt{fmt.Sprintf("flipped ciphertext byte %d", i), PurposeBotToken, "account-1", c})
	}
	for _, a := range attempts {
		t.Run(a.name, func(t *testing.T) {
			got, err := k.Open(a.purpose, a.binding, a.sealed)
			wantCode(t, err, ErrOpen, CodeOpenFailed)
			if !got.IsZero() {
				t.Fatal("failed Open returned a non-zero secret")
			}
			msg := err.Error()
			for _, leak := range []string{plain, string(s.Ciphertext), hex.EncodeToString(s.Ciphertext), base64.StdEncoding.EncodeToString(s.Ciphertext), string(testKey(7)), testKeyText(7)} {
				if strings.Contains(msg, leak) {
					t.Fatalf("error %q leaks secret material", msg)
				}
			}
		})
	}
}

func TestSealUsesFreshNonces(t *testing.T) {
	k := mustKeyring(t, 1, map[int32][]byte{1: testKey(1)})
	a, _ := k.Seal(PurposeImageLocator, "msg-1/item-0", NewSecret(plain))
	b, _ := k.Seal(PurposeImageLocator, "msg-1/item-0", NewSecret(plain))
	if bytes.Equal(a.Nonce, b.Nonce) || bytes.Equal(a.Ciphertext, b.Ciphertext) {
		t.Fatal("two seals of the same plaintext share nonce or ciphertext")
	}
}

func TestSealAndOpenRefuseUnknownPurposeEmptyBindingAndNilKeyring(t *testing.T) {
	k := mustKeyring(t, 1, map[int32][]byte{1: testKey(1)})
	good, _ := k.Seal(PurposeContextToken, "window-1", NewSecret(plain))
	for _, tc := range []struct {
		name    string
		k       *Keyring
		purpose Purpose
		binding string
	}{
		{"unknown purpose", k, Purpose("password"), "window-1"},
		{"empty purpose", k, Purpose(""), "window-1"},
		{"empty binding", k, PurposeContextToken, ""},
		{"NUL in binding", k, PurposeContextToken, "window\x001"},
		{"nil keyring", nil, PurposeContextToken, "window-1"},
		{"zero keyring", &Keyring{}, PurposeContextToken, "window-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.k.Seal(tc.purpose, tc.binding, NewSecret(plain))
			wantCode(t, err, ErrInvalidInput, CodeInvalidInput)
			_, err = tc.k.Open(tc.purpose, tc.binding, good)
			wantCode(t, err, ErrInvalidInput, CodeInvalidInput)
		})
	}
}

func TestSealEmptySecretRoundTrips(t *testing.T) {
	k := mustKeyring(t, 1, map[int32][]byte{1: testKey(1)})
	s, err := k.Seal(PurposeContextToken, "w", Secret{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := k.Open(PurposeContextToken, "w", s)
	if err != nil || !got.IsZero() {
		t.Fatalf("Open = %v, %v; want zero secret", got.IsZero(), err)
	}
}

func TestRotationOpensOldRowsAndSealsWithNewGeneration(t *testing.T) {
	old := mustKeyring(t, 1, map[int32][]byte{1: testKey(1)})
	row, err := old.Seal(PurposeBotToken, "account-1", NewSecret(plain))
	if err != nil || row.KeyGeneration != 1 {
		t.Fatalf("Seal = gen %d, %v", row.KeyGeneration, err)
	}

	rotated := mustKeyring(t, 2, map[int32][]byte{1: testKey(1), 2: testKey(2)})
	if rotated.Current() != 2 {
		t.Fatalf("Current = %d, want 2", rotated.Current())
	}
	got, err := rotated.Open(PurposeBotToken, "account-1", row)
	if err != nil || got.Reveal() != plain {
		t.Fatalf("rotated keyring cannot open old row: %v", err)
	}
	fresh, err := rotated.Seal(PurposeBotToken, "account-1", got)
	if err != nil || fresh.KeyGeneration != 2 {
		t.Fatalf("re-seal = gen %d, %v; want gen 2", fresh.KeyGeneration, err)
	}
	if _, err := old.Open(PurposeBotToken, "account-1", fresh); !errors.Is(err, ErrOpen) {
		t.Fatalf("old keyring opened a gen-2 row: %v", err)
	}

	retired := mustKeyring(t, 2, map[int32][]byte{2: testKey(2)})
	if _, err := retired.Open(PurposeBotToken, "account-1", row); !errors.Is(err, ErrOpen) {
		t.Fatalf("keyring without gen 1 opened a gen-1 row: %v", err)
	}
	if got, err := retired.Open(PurposeBotToken, "account-1", fresh); err != nil || got.Reveal() != plain {
		t.Fatalf("keyring with gen 2 cannot open a gen-2 row: %v", err)
	}
}

func TestNewKeyringValidatesAndCopiesKeys(t *testing.T) {
	for _, tc := range []struct {
		name     string
		current  int32
		keys     map[int32][]byte
		sentinel error
	}{
		{"no keys", 1, nil, ErrNoKey},
		{"short key", 1, map[int32][]byte{1: testKey(1)[:31]}, ErrMalformedKey},
		{"long key", 1, map[int32][]byte{1: append(testKey(1), 0)}, ErrMalformedKey},
		{"generation 0", 1, map[int32][]byte{0: testKey(1), 1: testKey(1)}, ErrMalformedKey},
		{"negative generation", 1, map[int32][]byte{-1: testKey(1), 1: testKey(1)}, ErrMalformedKey},
		{"current missing", 2, map[int32][]byte{1: testKey(1)}, ErrMalformedKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewKeyring(tc.current, tc.keys); !errors.Is(err, tc.sentinel) {
				t.Fatalf("err = %v, want %v", err, tc.sentinel)
			}
		})
	}

	key := testKey(9)
	k := mustKeyring(t, 1, map[int32][]byte{1: key})
	s, _ := k.Seal(PurposeBotToken, "a", NewSecret(plain))
	clear(key)
	if got, err := k.Open(PurposeBotToken, "a", s); err != nil || got.Reveal() != plain {
		t.Fatalf("keyring depends on the caller's key slice: %v", err)
	}
}

func TestKeyringIsSafeForConcurrentUse(t *testing.T) {
	k := mustKeyring(t, 1, map[int32][]byte{1: testKey(1)})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			binding := fmt.Sprint("account-", i)
			for range 50 {
				s, err := k.Seal(PurposeBotToken, binding, NewSecret(plain))
				if err != nil {
					t.Error(err)
					return
				}
				if got, err := k.Open(PurposeBotToken, binding, s); err != nil || got.Reveal() != plain {
					t.Error("concurrent round trip failed")
					return
				}
			}
		})
	}
	wg.Wait()
}

type holder struct {
	Name    string
	Token   Secret
	Pointer *Secret
	hidden  Secret
}

func TestSecretNeverPrints(t *testing.T) {
	s := NewSecret(plain)
	h := holder{Name: "acct", Token: s, Pointer: &s, hidden: s}
	leaks := func(out string) bool {
		return strings.Contains(out, plain) ||
			strings.Contains(strings.ToLower(out), hex.EncodeToString([]byte(plain))) ||
			strings.Contains(out, base64.StdEncoding.EncodeToString([]byte(plain)))
	}
	check := func(what, out string) {
		t.Helper()
		if leaks(out) {
			t.Errorf("%s leaks the plaintext: %q", what, out)
		}
	}

	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%t", "%p", "%10.3s", "%-20v", "% x", "%#x", "%T", "%U", "%c", "%e", "%b", "%o"} {
		check("fmt "+verb+" of Secret", fmt.Sprintf(verb, s))
		check("fmt "+verb+" of *Secret", fmt.Sprintf(verb, &s))
		check("fmt "+verb+" of struct", fmt.Sprintf(verb, h))
		check("fmt "+verb+" of *struct", fmt.Sprintf(verb, &h))
		check("fmt "+verb+" of []Secret", fmt.Sprintf(verb, []Secret{s}))
		check("fmt "+verb+" of map", fmt.Sprintf(verb, map[string]Secret{"k": s}))
	}
	if got := fmt.Sprintf("%v|%s|%q|%#v", s, s, s, s); got != `[REDACTED]|[REDACTED]|"[REDACTED]"|[REDACTED]` {
		t.Errorf("fmt = %s", got)
	}
	check("Sprint", fmt.Sprint(s, h))
	check("Sprintln", fmt.Sprintln(s, &h))
	check("String", s.String())
	check("GoString", s.GoString())

	js, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	check("json.Marshal", string(js))
	if want := `{"Name":"acct","Token":"[REDACTED]","Pointer":"[REDACTED]"}`; string(js) != want {
		t.Errorf("json = %s, want %s", js, want)
	}
	if b, _ := json.Marshal(s); string(b) != `"[REDACTED]"` {
		t.Errorf("json of Secret = %s", b)
	}
	if b, _ := s.MarshalText(); string(b) != Redacted {
		t.Errorf("MarshalText = %s", b)
	}

	for _, mk := range []func(*bytes.Buffer) slog.Handler{
		func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		var buf bytes.Buffer
		log := slog.New(mk(&buf))
		log.Info("sealed", "token", s, "ptr", &s, "holder", h, slog.Any("any", s), slog.Group("g", "t", s))
		log.With("token", s).Error("with", "err", errors.New("x"))
		check("slog", buf.String())
		if !strings.Contains(buf.String(), Redacted) {
			t.Errorf("slog output lacks %s: %s", Redacted, buf.String())
		}
	}

	// Errors from Open and Load never carry the plaintext either.
	k := mustKeyring(t, 1, map[int32][]byte{1: testKey(1)})
	sealed, _ := k.Seal(PurposeBotToken, "a", s)
	_, err = k.Open(PurposeBotToken, "b", sealed)
	check("Open error", fmt.Sprintf("%v %+v %#v", err, err, err))
	_, err = LoadKeyring(func(string) string { return "1:" + plain })
	check("Load error", fmt.Sprintf("%v %+v %#v", err, err, err))
}

func TestSecretRefusesUnmarshal(t *testing.T) {
	var h holder
	err := json.Unmarshal([]byte(`{"Name":"a","Token":"[REDACTED]"}`), &h)
	if err == nil || !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("json.Unmarshal = %v, want refusal", err)
	}
	if !h.Token.IsZero() {
		t.Fatal("Unmarshal stored a secret")
	}
	var s Secret
	if err := s.UnmarshalJSON([]byte(`"real-token"`)); err == nil {
		t.Fatal("UnmarshalJSON accepted a value")
	}
	if err := s.UnmarshalText([]byte("real-token")); err == nil {
		t.Fatal("UnmarshalText accepted a value")
	}
	if !s.IsZero() {
		t.Fatal("refused unmarshal changed the secret")
	}
}

func TestSecretRevealIsZeroEqual(t *testing.T) {
	var zero Secret
	if !zero.IsZero() || zero.Reveal() != "" || !NewSecret("").IsZero() {
		t.Fatal("zero secret")
	}
	a, b := NewSecret("tok"), NewSecret("tok")
	if a.IsZero() || a.Reveal() != "tok" {
		t.Fatal("Reveal")
	}
	if !a.Equal(b) || a.Equal(NewSecret("tok2")) || a.Equal(zero) || !zero.Equal(NewSecret("")) {
		t.Fatal("Equal")
	}
}

func TestKeyringNeverPrintsKeys(t *testing.T) {
	k := mustKeyring(t, 2, map[int32][]byte{1: testKey(0x41), 2: testKey(0x42)})
	out := fmt.Sprintf("%v %+v %#v %s %x", k, k, k, k, k) + fmt.Sprintf("%+v", struct{ K *Keyring }{k})
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("k", "keyring", k)
	out += buf.String()
	for _, leak := range []string{string(testKey(0x41)), "AAAA", "BBBB", "4141", "4242", testKeyText(0x41)} {
		if strings.Contains(out, leak) {
			t.Fatalf("keyring output leaks key material: %s", out)
		}
	}
	if !strings.Contains(k.String(), "current: 2") {
		t.Fatalf("String = %s", k)
	}
}

func TestParseKeyringAcceptsFormsAndPicksHighestGeneration(t *testing.T) {
	raw := strings.TrimRight(testKeyText(3), "=")
	for _, tc := range []struct {
		name, spec string
		current    int32
	}{
		{"single", "1:" + testKeyText(1), 1},
		{"comma list, unordered", "2:" + testKeyText(2) + ",1:" + testKeyText(1) + ",3:" + testKeyText(3), 3},
		{"raw std base64", "3:" + raw, 3},
		{"spaces and trailing comma", " 1:" + testKeyText(1) + " , 5:" + testKeyText(5) + ",", 5},
		{"file form with comments", "# sealing keys\n\n# rotated 2025-01\n4:" + testKeyText(4) + "\n  1:" + testKeyText(1) + "   # old\r\n", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ParseKeyring(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if k.Current() != tc.current {
				t.Fatalf("Current = %d, want %d", k.Current(), tc.current)
			}
		})
	}
}

func TestParseKeyringRejectsMalformedSpecsWithoutEchoingKeys(t *testing.T) {
	short := base64.StdEncoding.EncodeToString(testKey(0x5a)[:31])
	long := base64.StdEncoding.EncodeToString(append(testKey(0x5b), 1))
	badB64 := testKeyText(0x5c)[:20] + "!!" + testKeyText(0x5c)[22:]
	good := testKeyText(0x5d)
	for _, tc := range []struct {
		name, spec, keyText, wantMsg string
		sentinel                     error
	}{
		{"empty", "", "", "no keys", ErrNoKey},
		{"only comments", "# nothing\n   \n#", "", "no keys", ErrNoKey},
		{"malformed base64", "1:" + badB64, badB64, "entry 1 (generation 1): key is not valid standard base64", ErrMalformedKey},
		{"url base64", "1:" + strings.NewReplacer("+", "-", "/", "_").Replace(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xff}, 16))), "", "not valid standard base64", ErrMalformedKey},
		{"wrong length short", "2:" + good + ",1:" + short, short, "entry 2 (generation 1): key is 31 bytes, want 32", ErrMalformedKey},
		{"wrong length long", "1:" + long, long, "key is 33 bytes, want 32", ErrMalformedKey},
		{"empty key", "1:", "", "key is 0 bytes, want 32", ErrMalformedKey},
		{"generation 0", "0:" + good, good, "entry 1: generation must be", ErrMalformedKey},
		{"negative generation", "-1:" + good, good, "generation must be", ErrMalformedKey},
		{"signed generation", "+1:" + good, good, "generation must be", ErrMalformedKey},
		{"generation overflow", "2147483648:" + good, good, "generation must be", ErrMalformedKey},
		{"missing colon", good, good, "entry 1: want GENERATION:BASE64KEY", ErrMalformedKey},
		{"duplicate generation", "1:" + good + "\n1:" + testKeyText(1), good, "entry 2: duplicate generation 1", ErrMalformedKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ParseKeyring(tc.spec)
			if k != nil {
				t.Fatal("got a keyring with an error")
			}
			wantCode(t, err, tc.sentinel, err.(*Error).Code)
			msg := fmt.Sprintf("%v %+v %#v", err, err, err)
			if !strings.Contains(msg, tc.wantMsg) {
				t.Errorf("error %q lacks %q", msg, tc.wantMsg)
			}
			if tc.keyText != "" && strings.Contains(msg, tc.keyText) {
				t.Errorf("error %q echoes the key text", msg)
			}
			if strings.Contains(msg, good) || strings.Contains(msg, testKeyText(1)) {
				t.Errorf("error %q echoes key text", msg)
			}
		})
	}
}

func TestLoadKeyring(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "keys")
	if err := os.WriteFile(file, []byte("# ilinkflow sealing keys\n1:"+testKeyText(1)+"\n\n# current\n2:"+testKeyText(2)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badFile := filepath.Join(dir, "bad")
	short := base64.StdEncoding.EncodeToString(testKey(0x33)[:31])
	if err := os.WriteFile(badFile, []byte("1:"+short+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	t.Run("from env", func(t *testing.T) {
		k, err := LoadKeyring(env(map[string]string{EnvKeys: "2:" + testKeyText(2) + ",1:" + testKeyText(1)}))
		if err != nil || k.Current() != 2 {
			t.Fatalf("LoadKeyring = %v, %v", k, err)
		}
	})
	t.Run("from file with comments", func(t *testing.T) {
		k, err := LoadKeyring(env(map[string]string{EnvKeysFile: file}))
		if err != nil || k.Current() != 2 {
			t.Fatalf("LoadKeyring = %v, %v", k, err)
		}
		old := mustKeyring(t, 1, map[int32][]byte{1: testKey(1)})
		s, _ := old.Seal(PurposeBotToken, "a", NewSecret(plain))
		if got, err := k.Open(PurposeBotToken, "a", s); err != nil || got.Reveal() != plain {
			t.Fatalf("file keyring cannot open gen-1 row: %v", err)
		}
	})
	t.Run("neither set", func(t *testing.T) {
		_, err := LoadKeyring(env(nil))
		wantCode(t, err, ErrNoKey, CodeNoKey)
		if !strings.Contains(err.Error(), EnvKeys) || !strings.Contains(err.Error(), EnvKeysFile) {
			t.Errorf("error %q should name both variables", err)
		}
		_, err = LoadKeyring(env(map[string]string{EnvKeys: "  ", EnvKeysFile: "\n"}))
		wantCode(t, err, ErrNoKey, CodeNoKey)
	})
	t.Run("both set", func(t *testing.T) {
		_, err := LoadKeyring(env(map[string]string{EnvKeys: "1:" + testKeyText(1), EnvKeysFile: file}))
		wantCode(t, err, ErrMalformedKey, CodeMalformedKey)
		if strings.Contains(err.Error(), testKeyText(1)) {
			t.Errorf("error %q echoes the key", err)
		}
	})
	t.Run("malformed env", func(t *testing.T) {
		_, err := LoadKeyring(env(map[string]string{EnvKeys: "1:" + short}))
		wantCode(t, err, ErrMalformedKey, CodeMalformedKey)
		if !strings.Contains(err.Error(), EnvKeys+": entry 1 (generation 1): key is 31 bytes, want 32") || strings.Contains(err.Error(), short) {
			t.Errorf("error = %q", err)
		}
	})
	t.Run("malformed file", func(t *testing.T) {
		_, err := LoadKeyring(env(map[string]string{EnvKeysFile: badFile}))
		wantCode(t, err, ErrMalformedKey, CodeMalformedKey)
		if !strings.Contains(err.Error(), EnvKeysFile) || strings.Contains(err.Error(), short) {
			t.Errorf("error = %q", err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := LoadKeyring(env(map[string]string{EnvKeysFile: filepath.Join(dir, "nope")}))
		wantCode(t, err, ErrKeyFile, CodeKeyFile)
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("error %v does not wrap the read error", err)
		}
	})
	t.Run("comment-only file", func(t *testing.T) {
		empty := filepath.Join(dir, "empty")
		_ = os.WriteFile(empty, []byte("# none yet\n"), 0o600)
		_, err := LoadKeyring(env(map[string]string{EnvKeysFile: empty}))
		wantCode(t, err, ErrNoKey, CodeNoKey)
	})
}

func TestGenerateKeySpec(t *testing.T) {
	a, err := GenerateKeySpec(3)
	if err != nil || !strings.HasPrefix(a, "3:") {
		t.Fatalf("GenerateKeySpec = %q, %v", a, err)
	}
	b, _ := GenerateKeySpec(2)
	if a[2:] == b[2:] {
		t.Fatal("two generated keys are equal")
	}
	k, err := ParseKeyring(a + "," + b)
	if err != nil || k.Current() != 3 {
		t.Fatalf("generated spec does not parse: %v", err)
	}
	for _, g := range []int32{0, -1} {
		if _, err := GenerateKeySpec(g); !errors.Is(err, ErrInvalidInput) {
			t.Fatalf("GenerateKeySpec(%d) = %v, want invalid input", g, err)
		}
	}
}

func FuzzParseKeyring(f *testing.F) {
	for _, seed := range []string{
		"", "1:" + testKeyText(1), "2:" + testKeyText(2) + ",1:" + testKeyText(1),
		"# c\n3:" + strings.TrimRight(testKeyText(3), "=") + "\n", "0:x", "1:", ":", ",,,", "1:" + testKeyText(1) + ",1:" + testKeyText(1),
		"99999999999:" + testKeyText(1), "1:" + testKeyText(1)[:40], "\x00:\xff",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		k, err := ParseKeyring(spec)
		if err != nil {
			var e *Error
			if k != nil || !errors.As(err, &e) || (e.Code != CodeNoKey && e.Code != CodeMalformedKey) {
				t.Fatalf("ParseKeyring(%q) = %v, %#v", spec, k, err)
			}
			// No long token of the input (a key candidate) appears in the error.
			for _, tok := range strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == ':' || r == ' ' || r == '\n' || r == '\t' || r == '\r' }) {
				if len(tok) >= 16 && strings.Contains(err.Error(), tok) {
					t.Fatalf("error %q echoes input %q", err, tok)
				}
			}
			return
		}
		if k.Current() < 1 {
			t.Fatalf("current generation %d", k.Current())
		}
		s, err := k.Seal(PurposeBotToken, "fuzz", NewSecret("t"))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := k.Open(PurposeBotToken, "fuzz", s); err != nil || got.Reveal() != "t" {
			t.Fatalf("round trip failed: %v", err)
		}
	})
}

func benchKeyring(b *testing.B) (*Keyring, Secret) {
	k := mustKeyring(b, 1, map[int32][]byte{1: testKey(1)})
	return k, NewSecret(strings.Repeat("t", 64))
}

func BenchmarkSeal64ByteToken(b *testing.B) {
	k, tok := benchKeyring(b)
	b.SetBytes(64)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.Seal(PurposeBotToken, "account-1", tok); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen64ByteToken(b *testing.B) {
	k, tok := benchKeyring(b)
	s, err := k.Seal(PurposeBotToken, "account-1", tok)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(64)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.Open(PurposeBotToken, "account-1", s); err != nil {
			b.Fatal(err)
		}
	}
}

func TestDeriveKeysGivesAStableSubkeyPerGenerationAndLabelNeverTheKey(t *testing.T) {
	k1 := []byte("derive-test-key-generation-1-012")
	k2 := []byte("derive-test-key-generation-2-012")
	ring, err := NewKeyring(2, map[int32][]byte{1: bytes.Clone(k1), 2: bytes.Clone(k2)})
	if err != nil {
		t.Fatal(err)
	}
	cur, a, err := ring.DeriveKeys("ilinkflow/test")
	if err != nil || cur != 2 || len(a) != 2 {
		t.Fatalf("DeriveKeys: %d %d %v", cur, len(a), err)
	}
	again, _ := NewKeyring(2, map[int32][]byte{1: bytes.Clone(k1), 2: bytes.Clone(k2)})
	_, b, _ := again.DeriveKeys("ilinkflow/test")
	_, other, _ := ring.DeriveKeys("ilinkflow/other")
	for gen, key := range map[int32][]byte{1: k1, 2: k2} {
		if len(a[gen]) != 32 || bytes.Equal(a[gen], key) || !bytes.Equal(a[gen], b[gen]) || bytes.Equal(a[gen], other[gen]) {
			t.Fatalf("generation %d: subkey not stable, equal to the key, or not separated by label", gen)
		}
	}
	if bytes.Equal(a[1], a[2]) {
		t.Fatal("two generations derive the same subkey")
	}
	if _, _, err := ring.DeriveKeys(""); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("empty label: %v", err)
	}
	var nilRing *Keyring
	if _, _, err := nilRing.DeriveKeys("x"); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("nil keyring: %v", err)
	}
}

func TestHasReportsTheGenerationsTheKeyringHolds(t *testing.T) {
	k := mustKeyring(t, 3, map[int32][]byte{1: testKey(1), 3: testKey(3)})
	for gen, want := range map[int32]bool{0: false, 1: true, 2: false, 3: true, 4: false} {
		if got := k.Has(gen); got != want {
			t.Errorf("Has(%d) = %v, want %v", gen, got, want)
		}
	}
	if (*Keyring)(nil).Has(1) {
		t.Error("a nil keyring holds generation 1")
	}
}
