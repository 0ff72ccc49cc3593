//go:build unix

package e2e_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
)

// recipeSection is the README section whose shell blocks the recipe test runs: first the
// settings, then the commands.
const recipeSection = "## Run a worker"

// recipeWithin bounds the whole recipe: it compiles the simulator, starter and worker with
// `go run` (minutes on a busy 2-core machine with a cold build cache; seconds when warm).
const recipeWithin = 15 * time.Minute

// TestTheRunAWorkerRecipeAnswersAMessageAsWritten runs the README's "Run a worker" recipe as
// a user types it: the commands block is read from README.md and run by bash as written (the
// Temporal dev server, keygen, the simulator, the worker, `starter enroll` through the
// simulator's scripted scan, one message and its answer). Only the settings block is the
// test's own: free ports in the variables it sets, and a fresh schema in DATABASE_URL in
// place of its `createdb`. Every process the recipe leaves in the background is stopped
// with its process group when the test ends.
func TestTheRunAWorkerRecipeAnswersAMessageAsWritten(t *testing.T) {
	t.Parallel()
	cli := devserver.CLI(t) // the recipe runs `temporal server start-dev`; skips in -short
	for _, tool := range []string{"bash", "curl", "jq", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the recipe needs %s: %v", tool, err)
		}
	}
	settings, commands := readRecipe(t)

	port := func() string {
		_, p, err := net.SplitHostPort(testkit.FreeAddr(t))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	set := map[string]string{
		"DATABASE_URL":        dbtest.SchemaURL(dbtest.NewSchema(t)),
		"TEMPORAL_PORT":       port(),
		"TEMPORAL_UI_PORT":    port(),
		"SIM":                 testkit.FreeAddr(t),
		"ILINKFLOW_HTTP_ADDR": testkit.FreeAddr(t),
	}
	checkRecipeSettings(t, settings, set)

	// The environment of a user's shell, without ilinkflow's and Temporal's variables (the
	// recipe sets those it needs), with the test's settings, the CLI that devserver found
	// first on PATH, and no Temporal client config file of this machine's user.
	env := crashEnv(set)
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			env[i] = "PATH=" + filepath.Dir(cli) + string(os.PathListSeparator) + v
		}
	}
	env = append(env, "TEMPORAL_CONFIG_FILE="+emptyConfigFile)

	logFile, err := os.Create(filepath.Join(t.TempDir(), "recipe.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	output := func() string {
		b, _ := os.ReadFile(logFile.Name())
		return string(b)
	}
	// -e stops at the first failing command, -x shows each command as it runs.
	cmd := exec.Command("bash", "-c", "set -ex\n"+commands)
	cmd.Dir = filepath.Join("..", "..") // the repository's root: the recipe runs `go run ./worker`
	cmd.Env = env
	// A file, not a pipe: the background processes keep their output open after bash ends.
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() {
		stopping := time.Now()
		if err := stopProcessGroup(pgid); err != nil {
			t.Error(err)
		}
		t.Logf("the recipe's background processes stopped %s after SIGTERM", time.Since(stopping).Round(100*time.Millisecond))
		if t.Failed() {
			t.Logf("recipe output:\n%s", crashTail(output(), 80))
		}
	})
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the recipe failed after %s: %v", time.Since(began).Round(time.Second), err)
		}
	case <-time.After(recipeWithin):
		t.Fatalf("the recipe did not finish within %v", recipeWithin)
	}
	t.Logf("the recipe ran in %s", time.Since(began).Round(time.Second))

	out := output()
	for _, want := range []string{"enrolled: account ilk_", `{"outcome":"accepted","text":"echo: hello"}`} {
		if !strings.Contains(out, want) {
			t.Fatalf("the recipe's output lacks %q", want)
		}
	}
	// The simulator (still running in the background) saw exactly that one answer.
	ctl := ilinksim.NewControl("http://"+set["SIM"], nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bots, err := ctl.Bots(ctx)
	if err != nil || len(bots) != 1 {
		t.Fatalf("simulator bots: %v, %v; want the one the recipe enrolled", bots, err)
	}
	sent, err := ctl.Sent(ctx, bots[0].BotID)
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != 1 || sent[0].Outcome != ilinksim.OutcomeAccepted || sent[0].Text != "echo: hello" {
		t.Fatalf("the bot sent %+v; want one accepted \"echo: hello\"", sent)
	}
}

// readRecipe returns the two shell blocks of the README's recipe section: the settings and
// the commands.
func readRecipe(t *testing.T) (settings, commands string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	start := strings.Index(text, "\n"+recipeSection+"\n")
	if start < 0 {
		t.Fatalf("README.md has no section %q", recipeSection)
	}
	section := text[start+1:]
	if end := strings.Index(section[len(recipeSection):], "\n## "); end >= 0 {
		section = section[:len(recipeSection)+end]
	}
	blocks := regexp.MustCompile("(?s)\n```sh\n(.*?)\n```\n").FindAllStringSubmatch(section, -1)
	if len(blocks) != 2 {
		t.Fatalf("README.md's %q has %d sh blocks, want 2 (the settings, then the commands)", recipeSection, len(blocks))
	}
	return blocks[0][1], blocks[1][1]
}

var (
	exportRE   = regexp.MustCompile(`^export ((?:[A-Z_][A-Z0-9_]*=\S+\s*)+)$`)
	createdbRE = regexp.MustCompile(`^createdb\b.* (\w+)$`)
)

// checkRecipeSettings checks that the settings block does nothing but create the database
// that its DATABASE_URL names and export the variables the test sets instead: what the test
// substitutes is exactly what the README tells the user to choose.
func checkRecipeSettings(t *testing.T, settings string, set map[string]string) {
	t.Helper()
	var exported []string
	var created, url string
	for _, line := range strings.Split(settings, "\n") {
		line = strings.TrimSpace(line)
		if m := createdbRE.FindStringSubmatch(line); m != nil {
			created = m[1]
			continue
		}
		m := exportRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("the recipe's settings block has a line the test does not stand in for: %q", line)
		}
		for _, kv := range strings.Fields(m[1]) {
			k, v, _ := strings.Cut(kv, "=")
			exported = append(exported, k)
			if k == "DATABASE_URL" {
				url = strings.Trim(v, `'"`)
			}
		}
	}
	if created == "" || !strings.Contains(url, "/"+created+"?") {
		t.Fatalf("the settings block creates database %q but DATABASE_URL is %q", created, url)
	}
	var want []string
	for k := range set {
		want = append(want, k)
	}
	slices.Sort(exported)
	slices.Sort(want)
	if !slices.Equal(exported, want) {
		t.Fatalf("the settings block exports %v; the test sets %v", exported, want)
	}
}

// stopProcessGroup stops every process of the group pgid: SIGTERM (the worker drains, the
// dev server and the simulator shut down), then SIGKILL to whatever is left after a minute.
func stopProcessGroup(pgid int) error {
	gone := func(within time.Duration) bool {
		deadline := time.Now().Add(within)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for time.Now().Before(deadline) {
			if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
				return true
			}
			<-tick.C
		}
		return false
	}
	if err := syscall.Kill(-pgid, syscall.SIGTERM); errors.Is(err, syscall.ESRCH) {
		return nil
	}
	if gone(time.Minute) {
		return nil
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if gone(10 * time.Second) {
		return errors.New("the recipe's processes did not stop within a minute of SIGTERM (killed)")
	}
	return errors.New("the recipe's processes outlived SIGKILL")
}
