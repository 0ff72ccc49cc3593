package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/devserver"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// `starter forget` needs explicit confirmation, refuses a malformed id as a usage mistake
// and an unknown user or account with the store's code, counts in a dry run, erases with
// --yes, says so without printing the user's content, and a second run finds nothing left
// and succeeds.
func TestForgetNeedsConfirmationErasesAndSaysNothingIsLeftTheSecondTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dev := devserver.Start(t)
	ns, _ := dev.NewNamespace(t)
	pool := dbtest.NewPool(t)
	st, err := store.New(pool, testkit.Keyring, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	const user, words = "o9cq8forget@im.wechat", "please forget these words"
	acct, err := storetest.RegisterAccount(ctx, st, now, store.ConfirmInput{ProviderAccountID: "0000forget@im.bot",
		OwnerPeerID: user, BaseURL: "https://ilinkai.weixin.qq.com", BotToken: sealing.NewSecret("tok")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CommitPage(ctx, now, store.PageInput{AccountKey: acct.AccountKey, Generation: acct.Generation, NextCursor: "Ck1",
		Entries: []store.PageEntry{{ProviderMessageID: "7000000000000000001", PeerID: user, SentAt: now,
			ContextToken: sealing.NewSecret("CKctx-forget"), Payload: store.Payload{Summary: words}}}}); err != nil {
		t.Fatal(err)
	}
	var schema string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == sealing.EnvKeys {
			return testkit.KeySpec
		}
		return ""
	}
	starter := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		args = append(append([]string{"forget"}, args...), "--temporal-address", dev.HostPort, "--temporal-namespace", ns,
			"--database-url", dbtest.SchemaURL(schema), "--by", "dpo")
		code := runMain(ctx, args, nil, &out, &errOut, getenv)
		if strings.Contains(out.String()+errOut.String(), words) {
			t.Fatalf("starter %v printed the user's content:\n%s%s", args, out.String(), errOut.String())
		}
		return code, out.String(), errOut.String()
	}
	payloads := func() int {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM inbound_messages WHERE payload IS NOT NULL").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--peer", user}, 2, "needs explicit confirmation: give --yes"},
		{[]string{"--peer", user, "--yes", "--dry-run"}, 2, "give --dry-run or --yes, not both"},
		{[]string{"--peer", "o9cq8\x01bad", "--yes"}, 2, "--peer: not a WeChat user id"},
		{[]string{"--yes"}, 2, "--peer is required"},
		{[]string{"--peer", user, "--account", "ilk_x", "--yes"}, 2, `--account "ilk_x": must be an account key`},
		{[]string{"--peer", "o9cq8nobody@im.wechat", "--yes"}, 1, string(vocab.CodePeerNotFound)},
		{[]string{"--peer", user, "--account", "ilk_" + strings.Repeat("0", 32), "--yes"}, 1, string(vocab.CodeAccountNotFound)},
	} {
		code, out, errOut := starter(c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) || out != "" {
			t.Errorf("forget %q: exit %d, stderr %q, stdout %q; want exit %d naming %q", c.args, code, errOut, out, c.code, c.want)
		}
	}
	if payloads() != 1 {
		t.Fatal("a refused forget erased something")
	}

	code, out, errOut := starter("--peer", user, "--dry-run", "--json")
	var dry forgetRow
	if err := json.Unmarshal([]byte(out), &dry); code != 0 || err != nil || !dry.DryRun || dry.Messages != 1 || dry.ContextTokens != 1 ||
		len(dry.WindowsEnded) != 1 || payloads() != 1 {
		t.Fatalf("dry run: exit %d %+v (%v) %s", code, dry, err, errOut)
	}
	code, out, errOut = starter("--peer", user, "--yes")
	if code != 0 || !strings.Contains(out, "erased of this WeChat user on 1 account(s): "+acct.AccountKey) ||
		!strings.Contains(out, "messages 1,") || strings.Contains(out, user) || payloads() != 0 {
		t.Fatalf("forget --yes: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = starter("--peer", user, "--yes")
	if code != 0 || !strings.Contains(out, "nothing was left to erase") {
		t.Fatalf("a second forget: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = starter("--peer", user, "--yes", "--json")
	var again forgetRow
	if err := json.Unmarshal([]byte(out), &again); code != 0 || err != nil || !again.NothingLeft || again.Messages != 0 {
		t.Fatalf("a third forget (JSON): exit %d %+v %v", code, again, err)
	}
}
