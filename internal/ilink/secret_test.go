package ilink

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestSecretNeverPrintsItsValue(t *testing.T) {
	const raw = "b0f5860fdecb@im.bot:deadbeefcafe"
	s := Secret(raw)
	type holder struct {
		Token Secret
		Ptr   *Secret
	}
	h := holder{Token: s, Ptr: &s}
	outs := []string{
		s.String(), s.GoString(),
		fmt.Sprint(s), fmt.Sprintf("%v %s %q %x %X %d %+v %#v", s, s, s, s, s, s, s, s),
		fmt.Sprintf("%v %+v %#v", h, h, h),
		fmt.Sprintf("%v", []Secret{s}),
		fmt.Sprintf("%v", Message{ContextToken: s}),
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("x", "token", s, "msg", Message{ContextToken: s},
		"media", CDNMedia{AESKey: s}, "qr", QRCodeStatus{BotToken: s}, "cfg", BotConfig{TypingTicket: s},
		"up", UploadedMedia{AESKey: s}, "opts", SendOptions{ContextToken: s})
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "token", s)
	outs = append(outs, buf.String())
	for _, o := range outs {
		if strings.Contains(o, raw) || strings.Contains(o, "deadbeef") || strings.Contains(o, fmt.Sprintf("%x", raw)) {
			t.Errorf("secret leaked: %s", o)
		}
	}
	if s.Reveal() != raw {
		t.Fatal("Reveal lost the value")
	}
}

func TestSecretEncodesPlainOnTheWire(t *testing.T) {
	b, err := json.Marshal(getConfigRequest{ILinkUserID: "u", ContextToken: "CKtok"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"context_token":"CKtok"`) {
		t.Fatalf("got %s", b)
	}
	var back getConfigRequest
	if err := json.Unmarshal(b, &back); err != nil || back.ContextToken.Reveal() != "CKtok" {
		t.Fatalf("round trip: %v %v", back.ContextToken.Reveal(), err)
	}
}

func TestEmptySecretPrintsEmpty(t *testing.T) {
	if fmt.Sprint(Secret("")) != "" || !Secret("").IsZero() {
		t.Fatal("empty secret should print empty")
	}
}
