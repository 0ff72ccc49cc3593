package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// cliRun runs the CLI in-process as main does and returns the exit status and output.
func cliRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runMain(context.Background(), args, strings.NewReader(""), &out, &errOut, func(string) string { return "" })
	return code, out.String(), errOut.String()
}

// TestEveryCommandHelpBadFlagAndBadValue runs every starter command with --help, with an
// unknown flag and with a bad value: help exits 0 with a description, an example and only
// the command's own flags; mistakes exit 2 and stderr names the problem exactly once,
// without a usage dump. Nothing here needs a server: every mistake is caught first.
func TestEveryCommandHelpBadFlagAndBadValue(t *testing.T) {
	t.Parallel()
	cases := []struct {
		cmd       string
		flags     []string // flags its help must list
		notFlags  []string // flags its help must not list
		badValue  []string // arguments with a bad value
		wantValue string   // what stderr must name, once
	}{
		{"migrate", []string{"-database-url"}, []string{"-json", "-temporal-address", "-generation"},
			[]string{"--database-url", "postgres://x:y@host:notaport/db"}, "--database-url"},
		{"keygen", []string{"-generation"}, []string{"-json", "-database-url", "-temporal-address"},
			[]string{"--generation", "0"}, "--generation 0: must be a positive integer"},
		{"enroll", []string{"-offer-id", "-lifetime", "-json", "-temporal-address", "-database-url", "-mcp-agent", "-agent-task-queue"},
			[]string{"-for", "-default", "-changes", "-ilink-client"},
			[]string{"--lifetime", "0s"}, "--lifetime 0s: must be positive"},
		{"accounts", []string{"-status", "-json", "-database-url"}, []string{"-temporal-address", "-for", "-state"},
			[]string{"--status", "bogus"}, `--status "bogus": must be one of active, paused, needs_relogin, replaced, disabled`},
		{"windows", []string{"-state", "-account", "-limit", "-json", "-database-url"}, []string{"-temporal-address", "-status"},
			[]string{"--state", "bogus"}, `--state "bogus": must be one of open, superseded, cancelled, expired`},
		{"held", []string{"-account", "-status", "-limit", "-by", "-json", "-database-url"}, []string{"-temporal-address", "-state", "-show"},
			[]string{"list", "--status", "bogus"}, `--status "bogus": must be one of held, sending, sent, unknown, failed, dropped`},
		{"reminder", []string{"-account", "-before", "-text", "-off", "-json", "-database-url"}, []string{"-temporal-address", "-status"},
			[]string{"--account", "ilk_x", "--before", "soon", "--text", "hi"}, `invalid value "soon" for flag -before`},
		{"quarantine", []string{"-account", "-show", "-json", "-database-url"}, []string{"-temporal-address", "-state"},
			[]string{"--show", "qp_x"}, `--show "qp_x": must be a quarantine id (qp_ and 32 hex digits)`},
		{"pause", []string{"-account", "-for", "-reason", "-json", "-temporal-address", "-database-url"}, []string{"pause only"},
			[]string{"--account", "ilk_x", "--for", "1 hour"}, `invalid value "1 hour" for flag -for`},
		{"resume", []string{"-account", "-reason", "-json"}, []string{"-for"},
			[]string{"--account", ""}, "resume: --account is required"},
		{"remove", []string{"-account", "-reason", "-json"}, []string{"-for"},
			[]string{"extra-argument"}, `unexpected argument "extra-argument"`},
		{"route", []string{"-account", "-webhook-url", "-webhook-secret-file", "-webhook-timeout", "-workflow-type", "-task-queue",
			"-mcp-agent", "-ilink-client", "-echo", "-default", "-changes", "-by", "-json", "-database-url"}, []string{"-temporal-address", "-webhook-secret "},
			[]string{"--account", "ilk_x", "--echo", "--default"}, "route: give one route only"},
		{"mcp-agent", []string{"-by", "-json", "-database-url"}, []string{"-temporal-address", "-status"},
			[]string{"frobnicate"}, `mcp-agent: unknown action "frobnicate"`},
		{"ilink-client", []string{"-by", "-account", "-code", "-base-url", "-json", "-database-url"}, []string{"-temporal-address", "-status"},
			[]string{"frobnicate"}, `ilink-client: unknown action "frobnicate"`},
		{"forget", []string{"-peer", "-account", "-dry-run", "-yes", "-by", "-json", "-temporal-address", "-database-url"},
			[]string{"-status", "-show"},
			[]string{"--peer", "o9cq8user@im.wechat"}, "forget: the erasure cannot be undone and needs explicit confirmation"},
		{"dev", []string{"-ui-port", "-sim-addr", "-http-addr", "-log-level", "-database-url", "-temporal-address"}, []string{"-json"},
			[]string{"--log-level", "loud"}, `--log-level "loud": must be one of debug, info, warn, error`},
	}
	for _, tc := range cases {
		t.Run(tc.cmd, func(t *testing.T) {
			code, out, errOut := cliRun(t, tc.cmd, "--help")
			if code != 0 || errOut != "" {
				t.Fatalf("--help: exit %d, stderr %q", code, errOut)
			}
			for _, want := range []string{"usage: starter " + tc.cmd, "\nexample:\n  ", "starter " + tc.cmd, "\nflags:\n"} {
				if !strings.Contains(out, want) {
					t.Fatalf("--help lacks %q:\n%s", want, out)
				}
			}
			if desc := strings.Split(out, "\n"); len(desc) < 3 || desc[1] != "" || desc[2] == "" || desc[3] != "" {
				t.Fatalf("--help has no one-line description after the synopsis:\n%s", out)
			}
			for _, f := range tc.flags {
				if !strings.Contains(out, "  "+f+" ") && !strings.Contains(out, "  "+f+"\n") {
					t.Errorf("--help does not list %s:\n%s", f, out)
				}
			}
			for _, f := range tc.notFlags {
				if strings.Contains(out, f) {
					t.Errorf("--help lists %q, which is not %s's:\n%s", f, tc.cmd, out)
				}
			}

			code, out, errOut = cliRun(t, tc.cmd, "--bogus-flag")
			assertUsageMistake(t, "bad flag", code, out, errOut, "flag provided but not defined: -bogus-flag")

			code, out, errOut = cliRun(t, append([]string{tc.cmd}, tc.badValue...)...)
			assertUsageMistake(t, "bad value", code, out, errOut, tc.wantValue)
		})
	}
}

func assertUsageMistake(t *testing.T, what string, code int, out, errOut, want string) {
	t.Helper()
	if code != 2 {
		t.Errorf("%s: exit %d, want 2; stderr %q", what, code, errOut)
	}
	if n := strings.Count(errOut, want); n != 1 {
		t.Errorf("%s: stderr names %q %d times, want once:\n%s", what, want, n, errOut)
	}
	if strings.Count(errOut, "\n") != 1 || strings.Contains(errOut, "usage:") {
		t.Errorf("%s: stderr is not a single line (usage dump?):\n%s", what, errOut)
	}
	if out != "" {
		t.Errorf("%s: stdout %q", what, out)
	}
}

// TestExitCodesAndTopLevelUsage checks the statuses outside the flags: no command is a
// usage mistake with the usage on stderr; help succeeds; an unknown command is a usage
// mistake; a failure (a database that does not exist) exits 1 with a clear message,
// not a store "internal" error; success exits 0.
func TestExitCodesAndTopLevelUsage(t *testing.T) {
	t.Parallel()
	code, out, errOut := cliRun(t)
	if code != 2 || out != "" || !strings.Contains(errOut, "usage: starter <command>") || strings.Count(errOut, "no command given") != 1 {
		t.Fatalf("no command: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, h := range []string{"help", "-h", "--help"} {
		if code, out, errOut := cliRun(t, h); code != 0 || errOut != "" || !strings.Contains(out, "commands:") {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q", h, code, out, errOut)
		}
	}
	code, _, errOut = cliRun(t, "frobnicate")
	assertUsageMistake(t, "unknown command", code, "", errOut, `unknown command "frobnicate"`)

	for _, args := range [][]string{{"accounts"}, {"windows"}, {"held", "list"}, {"quarantine"}, {"migrate"}} {
		cmd := args[0]
		code, _, errOut = cliRun(t, append(args, "--database-url", "postgres://postgres@127.0.0.1:5432/ilinkflow_no_such_db?sslmode=disable")...)
		if code != 1 || strings.Contains(errOut, "internal") || strings.Count(errOut, `database "ilinkflow_no_such_db"`) < 1 ||
			strings.Count(errOut, "\n") != 1 {
			t.Fatalf("%s with a missing database: exit %d, stderr %q", cmd, code, errOut)
		}
	}
	if code, out, errOut := cliRun(t, "keygen"); code != 0 || errOut != "" || !strings.HasPrefix(out, "1:") {
		t.Fatalf("keygen: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
