package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/ilinkflow/ilinkflow/db/dbtest"
	"github.com/ilinkflow/ilinkflow/devserver"
)

// TestDevRunsEverythingAndTheDemoBotAnswers runs `starter dev` as a newcomer would (here
// against an already running Temporal server, which dev connects to instead of starting
// one): the demo bot is enrolled and a typed message gets the echo agent's reply.
func TestDevRunsEverythingAndTheDemoBotAnswers(t *testing.T) {
	dev := devserver.Start(t)
	ns, _ := dev.NewNamespace(t)
	pool := dbtest.NewPool(t)
	var schema string
	if err := pool.QueryRow(context.Background(), "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"dev", "--temporal-address", dev.HostPort, "--temporal-namespace", ns,
		"--task-queue", devserver.TaskQueue(t), "--database-url", dbtest.SchemaURL(schema),
		"--sim-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"},
		strings.NewReader("hello from a newcomer\n"), &out, &errOut, func(string) string { return "" })
	if err != nil {
		t.Fatalf("dev: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	t.Logf("dev output:\n%s", out.String())
	for _, want := range []string{"ilinkflow is running", "reply API", "metrics", "demo bot", "bot> echo: hello from a newcomer"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("dev output lacks %q:\n%s\n%s", want, out.String(), errOut.String())
		}
	}
}
