package ilink

import (
	"strings"
	"testing"
)

func TestClientVersionPacksSemverAs0x00MMNNPP(t *testing.T) {
	cases := map[string]uint32{"2.4.9": 132105, "2.4.6": 132102, "2.2.0": 131584, "2.4.9-beta.0": 132105, "0.0.1": 1, "255.255.255": 0xffffff}
	for in, want := range cases {
		got, err := ClientVersionNumber(in)
		if err != nil || got != want {
			t.Errorf("%s: got %d, %v; want %d", in, got, err, want)
		}
	}
}

func TestClientVersionRejectsNonSemver(t *testing.T) {
	for _, in := range []string{"", "2.4", "2.4.9.1", "2.256.0", "a.b.c", "2.-1.0", "2..1", "02.4.9"} {
		if _, err := ClientVersionNumber(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestNewFillsDocumentedDefaults(t *testing.T) {
	c, err := New(Config{}, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.Config()
	if cfg.BaseURL != DefaultBaseURL || cfg.CDNBaseURL != DefaultCDNBaseURL || cfg.AppID != "bot" ||
		cfg.ClientVersion != "2.4.9" || cfg.PollTimeout != DefaultPollTimeout || cfg.PollMargin != DefaultPollMargin ||
		cfg.SendTimeout != DefaultSendTimeout || cfg.ControlTimeout != DefaultControlTimeout ||
		cfg.MaxBodyBytes != DefaultMaxBodyBytes || cfg.CDNUploadAttempts != 3 || cfg.QRCodeTimeout != 0 {
		t.Fatalf("defaults: %+v", cfg)
	}
	if c.versionHeader != "132105" {
		t.Fatalf("version header %s", c.versionHeader)
	}
	if bi := c.BaseInfo(); bi.ChannelVersion != "2.4.9" || bi.BotAgent != DefaultBotAgent {
		t.Fatalf("base info %+v", bi)
	}
}

func TestNewRejectsInvalidConfiguration(t *testing.T) {
	bad := []Config{
		{BaseURL: "ftp://x"},
		{BaseURL: "not a url"},
		{BaseURL: "https://x/?q=1"},
		{CDNBaseURL: "/relative"},
		{ClientVersion: "2.4"},
		{BotAgent: "ünicode"},
		{BotAgent: strings.Repeat("a", 257)},
		{RouteTag: "a\nb"},
	}
	for _, cfg := range bad {
		if _, err := New(cfg, ""); CodeOf(err) != CodeInvalidInput {
			t.Errorf("%+v: got %v", cfg, err)
		}
	}
	if _, err := New(Config{}, "tok\r\nX: y"); CodeOf(err) != CodeInvalidInput {
		t.Errorf("token with CRLF accepted: %v", err)
	}
}

func TestEndpointJoinsBelowBasePath(t *testing.T) {
	c, err := New(Config{BaseURL: "http://h:1/prefix"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := endpoint(c.base, pathGetUpdates, nil); got != "http://h:1/prefix/ilink/bot/getupdates" {
		t.Fatalf("got %s", got)
	}
}
