package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/converter"

	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/payloadcodec"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// TestDevCodecTokenIsDerivedFromTheDevKeyFileUnlessConfigured: with the dev key file's
// keys the token is the same on every run and long enough for the endpoint, and it is
// neither the sealing key nor the payload codec's key; ILINKFLOW_CODEC_TOKEN wins; with
// keys from the environment each run gets a random one.
func TestDevCodecTokenIsDerivedFromTheDevKeyFileUnlessConfigured(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "dev-sealing-key")
	k1, _, err := devKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	k2, _, err := devKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	none := func(string) string { return "" }
	a, err := devCodecToken(none, k1, true)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := devCodecToken(none, k2, true)
	if a != b || len(a) < gateway.MinCodecTokenBytes {
		t.Fatalf("tokens of two runs: %q, %q; want equal and at least %d bytes", a, b, gateway.MinCodecTokenBytes)
	}
	spec, _ := os.ReadFile(path)
	_, codecKeys, _ := k1.DeriveKeys(payloadcodec.KeyLabel)
	for _, k := range codecKeys {
		if strings.Contains(a, string(k)) || strings.Contains(string(spec), a) {
			t.Fatal("the token reveals a key")
		}
	}
	env := func(k string) string {
		if k == gateway.EnvCodecToken {
			return "  configured-token-0123456789  "
		}
		return ""
	}
	if got, _ := devCodecToken(env, k1, true); got != "configured-token-0123456789" {
		t.Fatalf("configured token: got %q", got)
	}
	r1, _ := devCodecToken(none, k1, false)
	r2, _ := devCodecToken(none, k1, false)
	if r1 == r2 || r1 == a || len(r1) < gateway.MinCodecTokenBytes {
		t.Fatalf("random tokens %q, %q (derived %q)", r1, r2, a)
	}
}

// TestCodecShowCommandIsOneShellLineTheShellSplitsBackIntoItsArguments: the banner's
// command, run through a POSIX shell, passes each argument unchanged, the token in the
// "Bearer <token>" form --codec-auth sends as the Authorization header.
func TestCodecShowCommandIsOneShellLineTheShellSplitsBackIntoItsArguments(t *testing.T) {
	t.Parallel()
	c := &conn{temporal: "127.0.0.1:7233", namespace: "dev ns", profile: "it's mine", configFile: "/tmp/a b/temporal.toml"}
	line := codecShowCommand(c, "ilink-account/0123456789ab/ilk_x", "http://127.0.0.1:8090/codec", "f00d")
	want := []string{"temporal", "workflow", "show", "--workflow-id", "ilink-account/0123456789ab/ilk_x", "--address", "127.0.0.1:7233",
		"--namespace", "dev ns", "--profile", "it's mine", "--config-file", "/tmp/a b/temporal.toml", "--detailed",
		"--codec-endpoint", "http://127.0.0.1:8090/codec", "--codec-auth", "Bearer f00d"}
	if !strings.Contains(line, "--codec-auth 'Bearer f00d'") {
		t.Fatalf("codec auth not in the form the CLI expects: %s", line)
	}
	out, err := exec.Command("sh", "-c", "set -- "+line+`; for a in "$@"; do printf '%s\n' "$a"; done`).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the shell splits\n%s\ninto %q\nwant %q", line, got, want)
	}
}

// TestOperatorCommandsDecodeWithTheDevKeyFileAndEncodeNothing: without configured keys
// the operator commands' converter reads what a `starter dev` worker encrypted with the
// dev key file and writes payloads unencrypted (a worker with other keys reads them); a
// key file readable by others, or none, gives the SDK's default.
func TestOperatorCommandsDecodeWithTheDevKeyFileAndEncodeNothing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "dev-sealing-key")
	keys, _, err := devKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	worker, err := payloadcodec.DataConverter(keys)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := worker.ToPayload("the worker's answer")
	if err != nil {
		t.Fatal(err)
	}
	dc := devDecodeConverter(path)
	if dc == nil {
		t.Fatal("no converter for an existing dev key file")
	}
	var got string
	if err := dc.FromPayload(sealed, &got); err != nil || got != "the worker's answer" {
		t.Fatalf("decode: %q, %v", got, err)
	}
	sent, err := dc.ToPayload("a signal")
	if err != nil {
		t.Fatal(err)
	}
	if enc := string(sent.GetMetadata()[converter.MetadataEncoding]); enc == payloadcodec.Encoding {
		t.Fatal("the operator's payload was encrypted with the dev key")
	}
	other, _ := sealing.ParseKeyring(mustSpec(t))
	otherWorker, _ := payloadcodec.DataConverter(other)
	var s string
	if err := otherWorker.FromPayload(sent, &s); err != nil || s != "a signal" {
		t.Fatalf("a worker with other keys cannot read it: %q, %v", s, err)
	}
	if devDecodeConverter(filepath.Join(t.TempDir(), "none")) != nil {
		t.Fatal("a converter for a missing key file")
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if devDecodeConverter(path) != nil {
		t.Fatal("a converter for a key file readable by others")
	}
}

// TestDevServerIsStartedWithTheUICodecEndpoint: the dev server dev starts gets
// --ui-codec-endpoint with the codec endpoint (so its UI decodes through it) when there
// is one for the UI, and no such flag otherwise; the rest of its command line is the same.
func TestDevServerIsStartedWithTheUICodecEndpoint(t *testing.T) {
	t.Parallel()
	with := devServerArgs("127.0.0.1", "7233", 8233, "default", "http://127.0.0.1:8090/codec")
	line := strings.Join(with, " ")
	for _, want := range []string{"server start-dev --ip 127.0.0.1 --port 7233 --ui-port 8233 --namespace default",
		" --ui-codec-endpoint http://127.0.0.1:8090/codec ", "--search-attribute IlinkAccount=Keyword"} {
		if !strings.Contains(line, want) {
			t.Fatalf("dev server arguments lack %q: %s", want, line)
		}
	}
	without := strings.Join(devServerArgs("127.0.0.1", "7233", 8233, "default", ""), " ")
	if strings.Contains(without, "--ui-codec-endpoint") ||
		without != strings.Replace(line, " --ui-codec-endpoint http://127.0.0.1:8090/codec", "", 1) {
		t.Fatalf("without a UI codec endpoint: %s", without)
	}
	if got := devUIOrigin("::1", 8233); got != "http://[::1]:8233" {
		t.Fatalf("the UI's origin on ::1 is %q", got)
	}
}

// TestDevUICodecOnlyWhenTheUIAndTheCodecEndpointAreOnLoopback: the UI is told about the
// codec endpoint (which lets it through without the token) only when the dev server
// (and so its UI) and the worker's HTTP listener are both on loopback.
func TestDevUICodecOnlyWhenTheUIAndTheCodecEndpointAreOnLoopback(t *testing.T) {
	t.Parallel()
	const endpoint = "http://127.0.0.1:8090/codec"
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8090}
	for _, c := range []struct {
		temporal string
		http     net.Addr
		want     string
	}{
		{"127.0.0.1:7233", loop, endpoint},
		{"localhost:7233", loop, endpoint},
		{"[::1]:7233", &net.TCPAddr{IP: net.IPv6loopback, Port: 8090}, endpoint},
		{"0.0.0.0:7233", loop, ""},
		{"192.168.1.20:7233", loop, ""},
		{"temporal.example:7233", loop, ""},
		{"127.0.0.1:7233", &net.TCPAddr{IP: net.IPv4zero, Port: 8090}, ""},
		{"127.0.0.1:7233", &net.TCPAddr{IP: net.IPv4(192, 168, 1, 20), Port: 8090}, ""},
		{"no port", loop, ""},
	} {
		if got := devUICodecEndpoint(c.temporal, c.http, endpoint); got != c.want {
			t.Errorf("Temporal on %s, HTTP on %s: %q, want %q", c.temporal, c.http, got, c.want)
		}
	}
}

func mustSpec(t *testing.T) string {
	t.Helper()
	spec, err := sealing.GenerateKeySpec(1)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}
