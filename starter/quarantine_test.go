package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/dbtest"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// The operator sees every quarantined page (table and JSON), and --show opens one with
// the installation's sealing keys.
func TestQuarantineListsQuarantinedPagesAndShowsOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	st, err := store.New(pool, testkit.Keyring, store.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	acct, err := storetest.RegisterAccount(ctx, st, now, store.ConfirmInput{ProviderAccountID: "0000quarantine@im.bot",
		OwnerPeerID: "o9cq8quarantine@im.wechat", BaseURL: "https://ilinkai.weixin.qq.com", BotToken: sealing.NewSecret("tok")})
	if err != nil {
		t.Fatal(err)
	}
	q, err := st.QuarantinePage(ctx, now, store.QuarantineInput{AccountKey: acct.AccountKey, Generation: acct.Generation,
		Scope: store.QuarantineWholePage, Messages: 2, Content: sealing.NewSecret(`[{"text":"lost?"}]`),
		ErrorCode: "invalid_input", ErrorMessage: "commit page: data exception (SQLSTATE 22P05)",
		MoveCursor: true, NextCursor: "Ck-next"})
	if err != nil {
		t.Fatal(err)
	}
	var schema string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		getenv := func(k string) string {
			if k == sealing.EnvKeys {
				return testkit.KeySpec
			}
			return ""
		}
		if err := run(ctx, append(args, "--database-url", dbtest.SchemaURL(schema)), nil, &out, &errOut, getenv); err != nil {
			t.Fatalf("starter %v: %v\n%s", args, err, errOut.String())
		}
		return out.String()
	}
	table := cli("quarantine")
	if !strings.Contains(table, q.QuarantineID) || !strings.Contains(table, "SQLSTATE 22P05") || !strings.Contains(table, acct.AccountKey) {
		t.Fatalf("the listing does not show the quarantined page:\n%s", table)
	}
	var rows []quarantineRow
	if err := json.Unmarshal([]byte(cli("quarantine", "--json", "--account", acct.AccountKey)), &rows); err != nil ||
		len(rows) != 1 || rows[0].Messages != 2 || !rows[0].CursorMoved || rows[0].Scope != store.QuarantineWholePage {
		t.Fatalf("JSON listing %+v (%v)", rows, err)
	}
	if strings.Contains(table, "lost?") {
		t.Fatal("the listing shows the sealed content")
	}
	if shown := cli("quarantine", "--show", q.QuarantineID); !strings.Contains(shown, `"lost?"`) {
		t.Fatalf("--show: %s", shown)
	}
}
