package vocab_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ilinkflow/ilinkflow/vocab"
)

func TestOutboundTextIsRefusedWhenPostgreSQLOrILinkCannotCarryIt(t *testing.T) {
	for _, c := range []struct {
		name string
		text string
		want vocab.TextFault
	}{
		{"plain", "hello", vocab.TextOK},
		{"at the limit", strings.Repeat("a", vocab.MaxTextBytes), vocab.TextOK},
		{"over the limit", strings.Repeat("a", vocab.MaxTextBytes+1), vocab.TextTooLong},
		{"NUL", "a\x00b", vocab.TextNUL},
		{"invalid UTF-8", "a\xffb", vocab.TextNotUTF8},
		{"empty", "", vocab.TextEmpty},
		{"blank", " \n\t", vocab.TextEmpty},
		{"other control characters", "a\x01\x1fb", vocab.TextOK},
	} {
		if got := vocab.CheckText(c.text, 0); got != c.want {
			t.Errorf("%s: CheckText = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestFileNamesLoseTheirPathControlCharactersAndExcessLength(t *testing.T) {
	for in, want := range map[string]string{
		"report.pdf": "report.pdf",
		"../../etc/<script>alert(1)</script>.pdf": "script_.pdf",
		`..\..\windows\system32\cmd.exe`:          "cmd.exe",
		"a\x00b\x1b[31m.txt":                      "ab[31m.txt",
		"\u202egnp.exe":                           "gnp.exe",
		"..":                                      "file",
		"":                                        "file",
		"...hidden":                               "hidden",
		"bad\xffbyte.txt":                         "badbyte.txt",
		"照片 2026.jpg":                             "照片 2026.jpg",
		"we:ird|na?me*.doc":                       "we_ird_na_me_.doc",
	} {
		if got := vocab.SafeFileName(in); got != want {
			t.Errorf("SafeFileName(%q) = %q, want %q", in, got, want)
		}
	}
	long := strings.Repeat("长", 200) + ".jpeg"
	got := vocab.SafeFileName(long)
	if len(got) > vocab.MaxFileNameBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, ".jpeg") {
		t.Errorf("a long name became %q (%d bytes)", got, len(got))
	}
}

func TestOutboundFileNamesWithControlCharactersAreRefused(t *testing.T) {
	for name, want := range map[string]vocab.TextFault{
		"a.pdf": vocab.TextOK, "../a.pdf": vocab.TextOK, "a\x00.pdf": vocab.TextNUL,
		"a\n.pdf": vocab.TextNUL, "a\xff.pdf": vocab.TextNotUTF8,
	} {
		if got := vocab.CheckFileName(name); got != want {
			t.Errorf("CheckFileName(%q) = %q, want %q", name, got, want)
		}
	}
}

func FuzzCheckTextAndSafeFileName(f *testing.F) {
	for _, s := range []string{"", "a", "a\x00", "\xff", "../x", strings.Repeat("é", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if vocab.CheckText(s, 0) == vocab.TextOK && (strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) || len(s) > vocab.MaxTextBytes) {
			t.Fatalf("CheckText accepted %q", s)
		}
		n := vocab.SafeFileName(s)
		if n == "" || len(n) > vocab.MaxFileNameBytes || !utf8.ValidString(n) || strings.ContainsAny(n, "/\\\x00") || vocab.CheckFileName(n) != vocab.TextOK {
			t.Fatalf("SafeFileName(%q) = %q", s, n)
		}
	})
}
