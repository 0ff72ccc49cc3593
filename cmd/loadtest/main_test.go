package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestBadFlagsExitTwoWithoutRunning(t *testing.T) {
	for _, args := range [][]string{
		{"-bots", "0"},
		{"-bots", "10", "-active", "11"},
		{"-worker-env", "NOEQUALS"},
		{"extra"},
		{"-chaos", "-workers", "0"},
		{"-chaos", "-kill-plan", "random,bogus"},
		{"-chaos", "-freeze", "-1s"},
		{"-soak", "-soak-page", "0"},
		{"-soak", "-soak-page", "3", "-soak-interval", "1000"},
		{"-soak", "-soak-retain-content", "96h", "-soak-retain-rows", "48h"},
		{"-soak", "-soak-p99-growth", "-0.1"},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 2 || out.Len() != 0 {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), errOut.String())
		}
	}
}

func TestHelpListsTheFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-help"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, f := range []string{"-bots", "-active", "-messages", "-idle", "-longpoll-hold", "-db-max-conns", "-json",
		"-chaos", "-workers", "-duration", "-kills", "-kill-plan", "-restart-after", "-freeze", "-rolling",
		"-soak", "-soak-interval", "-soak-day", "-soak-retain-content", "-soak-retain-rows", "-soak-purge-every", "-soak-p99-growth"} {
		if !strings.Contains(errOut.String(), f) {
			t.Fatalf("help does not list %s:\n%s", f, errOut.String())
		}
	}
}

func TestWorkerEnvFlagCollectsSettings(t *testing.T) {
	e := envFlags{}
	if err := e.Set("ILINKFLOW_POLL_SESSION=1m"); err != nil {
		t.Fatal(err)
	}
	if err := e.Set("ILINKFLOW_SEND_GAP=a=b"); err != nil {
		t.Fatal(err)
	}
	if e["ILINKFLOW_POLL_SESSION"] != "1m" || e["ILINKFLOW_SEND_GAP"] != "a=b" || e.String() != "ILINKFLOW_POLL_SESSION,ILINKFLOW_SEND_GAP" {
		t.Fatalf("%v", e)
	}
}
